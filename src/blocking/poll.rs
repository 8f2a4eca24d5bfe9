//! Noticing, without notifications, that someone else changed a lock with parked clients.
//!
//! Redisson's Lua, a plain `DEL`, a `MULTI` block: other clients free locks through commands
//! the module does not run. Keyspace events would tell, but every subscribed event costs each
//! write in the server a module context; a command filter looking at keys costs every command.
//! Instead, while clients are parked, a timer every [`POLL_MS`] looks at parked locks'
//! signatures (the lock key's type, length and expiry, and its fair queue's length) and serves
//! a lock whose signature changed: a few key lookups per parked lock, nothing per command of
//! anyone else. A change that leaves the signature as it was (a holder swapped within the same
//! millisecond with the same lease) waits for the next change, the expiry timer, or, for a
//! fair lock, its keep-alive tick.
//!
//! The work per tick is bounded: at most [`BATCH`] locks, taken round-robin, so the poll's cost
//! does not grow with the number of locks with parked clients (measured with one parked lock:
//! 3.3% of a core at a 1 ms interval, the event loop's 1 kHz wake-up itself; about 1.5% at
//! [`POLL_MS`] = 5; without the bound 4,000 locks would take the whole core). With `n` such
//! locks a change by someone else is noticed within `ceil(n / BATCH)` ticks: 5 ms up to
//! [`BATCH`] locks, 80 ms for 1,000, 785 ms for 10,000
//! (docs/design.md). The module's own writes and `expired`/`evicted` events do not wait for
//! the poll.
//!
//! A tick serves locks, so it writes: it runs only when `super::paused::gate` allows (see
//! `super::timers`), and each grant is checked against the parked client's own user.

use std::cell::RefCell;
use std::collections::VecDeque;

use super::waiter::Map;

use super::registry::with;
use super::waiter::LockId;
use super::waiter::{TimerData, TimerId};
use crate::ffi::{Ctx, KeyKind};

/// How often parked locks are looked at: "within milliseconds" for a fifth of a 1 ms tick's
/// fixed cost (each tick wakes the whole event loop).
pub const POLL_MS: i64 = 5;

/// The most locks looked at per tick: each costs two key lookups (about 0.5 us), so 64 add
/// some 32 us to a tick, about 0.6% of a core at one tick per 5 ms.
pub const BATCH: usize = 64;

/// What a poll compares: the lock key's (type, length, expiry), its fair queue's length, and
/// for a string (a synchronizer's counter) a hash of its value: `INCRBY 3` on `4` keeps the
/// length.
type Sig = (KeyKind, usize, Option<i64>, usize, u64);

#[derive(Default)]
struct Poll {
    timer: Option<TimerId>,
    /// Each polled lock: its signature, and the generation of its entry in `order`.
    sigs: Map<LockId, (Sig, u64)>,
    /// The round-robin order; an entry whose generation is not its lock's current one (the
    /// lock was forgotten, and perhaps polled again since) is dropped when reached.
    order: VecDeque<(LockId, u64)>,
    next_gen: u64,
    /// Other keys of a polled lock whose changes count too (a rate limiter's hash and grants).
    also: Map<LockId, Vec<Vec<u8>>>,
}

thread_local! {
    static POLL: RefCell<Poll> = RefCell::new(Poll::default());
}

fn with_poll<T>(f: impl FnOnce(&mut Poll) -> T) -> Option<T> {
    POLL.with(|p| p.try_borrow_mut().ok().map(|mut p| f(&mut p)))
}

/// The signature of `id` as the keyspace has it now (in its database, selected by the caller),
/// with the keys in `also` folded into its content hash.
fn sig(ctx: &Ctx, id: &LockId, also: &[Vec<u8>]) -> Sig {
    let look = |name: &[u8]| {
        let s = ctx.string(name);
        let k = ctx.open_key(s.as_ref(), false);
        let kind = k.kind();
        let at = if kind == KeyKind::Empty { None } else { k.expire_at() };
        let value = if kind == KeyKind::String { content(&k.string_get()) } else { 0 };
        (kind, k.len(), at, value)
    };
    let (kind, len, at, mut value) = look(&id.1);
    let (_, queued, _, _) = look(&crate::core::names::fair_queue_buf(&id.1));
    for key in also {
        let (k, l, a, v) = look(key);
        let parts = [k as u64, l as u64, a.map_or(u64::MAX, |a| a as u64), v];
        value = parts.iter().fold(value, |h, &p| (h ^ p).wrapping_mul(0x0100_0000_01b3));
    }
    (kind, len, at, queued, value)
}

/// FNV-1a of a string value: a counter's few bytes.
fn content(v: &[u8]) -> u64 {
    v.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn arm(ctx: &Ctx) {
    let need = with_poll(|p| p.timer.is_none() && !p.sigs.is_empty()).unwrap_or(false);
    if need {
        let t = ctx.create_timer(POLL_MS, TimerData::Poll);
        with_poll(|p| p.timer = Some(t));
    }
}

/// A client was just parked on `id`, inside its own command: the lock as it is now is the
/// baseline, and polling runs while anyone is parked. Changes to the keys in `also` count as
/// changes to the lock.
pub fn parked(ctx: &Ctx, id: &LockId, also: Vec<Vec<u8>>) {
    if with_poll(|p| p.sigs.contains_key(id)).unwrap_or(true) {
        return;
    }
    let s = sig(ctx, id, &also);
    with_poll(|p| {
        if !also.is_empty() {
            p.also.insert(id.clone(), also);
        }
        let generation = p.next_gen;
        p.next_gen += 1;
        p.sigs.insert(id.clone(), (s, generation));
        p.order.push_back((id.clone(), generation));
    });
    arm(ctx);
}

/// Nobody waits for `id` any more: forget it, and stop polling when nothing is left (so a
/// server with no parked client holds no timer of ours).
pub fn forget(ctx: &Ctx, id: &LockId) {
    let stop = with_poll(|p| {
        p.sigs.remove(id);
        p.also.remove(id);
        if p.sigs.is_empty() {
            p.order.clear();
            p.also.clear();
            p.timer.take()
        } else {
            None
        }
    })
    .flatten();
    if let Some(t) = stop {
        ctx.stop_timer(t);
    }
}

/// The tick's timer fired: it is no longer armed (whether or not the tick may run now).
pub fn fired() {
    with_poll(|p| p.timer = None);
}

/// The tick, once writes are allowed: looks at the next [`BATCH`] parked locks, serves those
/// whose signature changed (with `serve`, the caller's: the hand-off lies above this file), and
/// re-arms.
pub fn tick(ctx: &Ctx, serve: fn(&Ctx, &LockId)) {
    // Each lock at most once per tick, however few there are.
    let limit = with_poll(|p| p.sigs.len()).unwrap_or(0).min(BATCH);
    let mut looked = 0;
    while looked < limit {
        let Some((id, generation)) = with_poll(|p| p.order.pop_front()).flatten() else { break };
        let current = with_poll(|p| p.sigs.get(&id).copied()).flatten();
        let Some((before, _)) = current.filter(|&(_, g)| g == generation) else { continue };
        // A lock nobody waits for any more (its last waiter left by a path that did not tell).
        if !with(|r| r.locks.contains_key(&id)).unwrap_or(false) {
            with_poll(|p| {
                p.sigs.remove(&id);
                p.also.remove(&id);
            });
            continue;
        }
        looked += 1;
        with_poll(|p| p.order.push_back((id.clone(), generation)));
        if !ctx.select_db(id.0) {
            continue;
        }
        let also = with_poll(|p| p.also.get(&id).cloned()).flatten().unwrap_or_default();
        let now = sig(ctx, &id, &also);
        if now == before {
            continue;
        }
        serve(ctx, &id);
        // Whatever serving changed (a grant) is the new baseline.
        let after = sig(ctx, &id, &also);
        with_poll(|p| {
            if let Some((s, _)) = p.sigs.get_mut(&id) {
                *s = after;
            }
        });
    }
    arm(ctx);
}

/// Writes resumed after a pause (or loading ended): polling goes on.
pub fn resume(ctx: &Ctx) {
    arm(ctx);
}

/// A replica grants nothing (its parked clients were released when it was demoted): stop.
pub fn clear() {
    with_poll(|p| {
        p.sigs.clear();
        p.order.clear();
        p.also.clear();
    });
}

/// The module was loaded again: no timer of an earlier load is pending (Redis refuses to
/// unload a module that holds one), and nobody is parked.
pub fn reload() {
    with_poll(|p| *p = Poll::default());
}
