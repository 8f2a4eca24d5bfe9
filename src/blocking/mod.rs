//! Waiting inside the server: `BLOCK ms` parks a client until the lock is granted to it.
//!
//! Policy: per lock, parked clients are served in arrival order, and serving stops at the first
//! one that still cannot have the lock, so a later parked reader never overtakes an earlier
//! parked writer, while consecutive readers are granted together. A non-blocking call (and a
//! BLOCK call's first try) keeps Redisson's semantics and may take a free lock directly, with
//! two exceptions (`priority`): a new reader waits behind a parked writer unless it re-enters,
//! and no acquire of another kind takes a free name past a live fair waiter.
//!
//! A grant is computed by the same core function as the non-blocking command, on a store whose
//! writes propagate like any command's. Wake-ups come from three places:
//! - our own write commands: `serve_now` at the end of each serves the lock at once, in the
//!   same command, so a release hands over with no window for others to barge in;
//! - a change to a lock (or its fair queue) by anyone else, Redisson's Lua included: a 1 ms
//!   tick compares each parked lock's signature (`poll`) and serves the lock when it changed;
//!   `expired`/`evicted` events and FLUSHALL queue the lock in `pending`, served from a 0 ms
//!   timer (a notification callback is no place to write);
//! - lease expiry: a timer at the lock's absolute expiry, since Redis' own lazy or active
//!   expiry may come much later.
//!
//! Fair-lock waiters keep their place in the lock's queue while parked (`fair`).
//!
//! Every write the module starts on its own (a timer, a BLOCK timeout) first asks
//! [`paused::gate`]: while writes are paused it waits, in `pending` and the cancel list,
//! until they resume (`paused`).
//!
//! A grant counts once its reply reached the client (`answer`): every acquire gets exactly one
//! reply, and a grant whose reply Redis drops (the client unblocked with an error, killed or
//! gone between the grant and the reply) is given back as a release would (`give_back`).
//!
//! Invariant: a waiter is in the registry if and only if it has not been answered; its
//! `BlockedClient` is released exactly once, by whichever path takes it out (grant, timeout,
//! disconnect, CLIENT UNBLOCK), or, on Redis 7.0, by `answer` before Redis next sleeps.
//!
//! Files, from the top: `acquire` (an acquire command's way through), `contended` (the names
//! clients are parked on, for `LOCK.CONTENDED`), `park` (parking a client), `callbacks`
//! (timeouts, disconnects, lost answers, flushes, demotion), `changes` (noticing changes
//! reported by name), `timers` (what a timer does when it fires), `give_back` (releasing a
//! grant whose reply was lost), `fair/` (keeping parked fair waiters' places; its `queue`,
//! reading the fair queue, lies below `serve`), `serve` (granting, the expiry and pending
//! timers), `answer` (answering a parked client), `poll` (noticing changes nothing reports),
//! `windows` (a rate limiter's next grant leaving its window), `reclaim/` (expired permits of
//! the expirable semaphore), `priority`, `paused`, `request` (what a client asks, one try at
//! it), `registry` (who is parked where), `waiters`, `waiter` (the types). No file imports one
//! above it.
//!
//! May import: effects, acl, ffi, core. Imported by redisson, commands, server.

mod acquire;
mod answer;
mod callbacks;
mod changes;
mod contended;
mod fair;
mod give_back;
mod park;
mod paused;
pub mod poll;
mod priority;
pub mod reclaim;
mod registry;
mod request;
mod serve;
mod timers;
mod waiter;
mod waiters;
mod windows;

pub use crate::core::lock::rwlock::Writers;
pub use crate::effects::served::{any_parked, ServedBy};
pub use acquire::{acquire, acquire_sync};
pub use callbacks::{on_demoted, on_flush, register, DEMOTED};
pub use changes::{changed, name_changed, on_key_gone, recheck_all};
pub use contended::{contended, contended_names};
pub use give_back::{held_back, HeldBack};
pub use park::park;
pub use priority::writer_waits;
pub use registry::{parked_now, parked_on, parked_rate_now, parked_sync_now};
pub use request::{attempt, Attempt, Request};
pub use serve::serve_now;
