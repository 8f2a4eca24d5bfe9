//! Who goes first while clients are parked, and how long the module's timers may be.
//!
//! - **Writers are not starved.** A reader that arrives while a writer is parked on the lock
//!   (`RWLOCK.WLOCK ... BLOCK`) waits behind it: refused with the PTTL, or parked after the
//!   writer with `BLOCK`. Only re-entries are granted (an owner that already holds a read
//!   hold, or the write holder): they hold what the writer waits for, so making them wait
//!   would deadlock. Readers parked before the writer keep their turn (serving goes in arrival
//!   order). Redisson's Lua clients cannot see parked writers and are granted as before.
//! - **A fair queue is not jumped.** A reentrant or read-write acquire is refused on a free
//!   name whose fair queue has a live waiter (`crate::core::lock::kinds`); a client parked so is
//!   woken when that waiter's deadline passes, if nothing else changes first.

use super::registry::with;
use super::request::Request;
use super::waiter::LockId;
use crate::core::lock::kinds;
use crate::core::lock::rwlock::Writers;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// The longest a lock's wake-up timer is armed for (1 hour): a lease of centuries is woken
/// early and re-armed, since Redis keeps timers in microseconds and would overflow.
pub const MAX_TIMER_MS: i64 = 3_600_000;

/// A `BLOCK` limit past this (146 million years) waits without limit: Redis adds the limit to
/// its clock, which must not overflow.
const MAX_BLOCK_MS: i64 = i64::MAX / 2;

/// The timeout to give Redis for `BLOCK ms` (0: no limit).
pub fn block_limit(ms: i64) -> i64 {
    if ms > MAX_BLOCK_MS {
        0
    } else {
        ms
    }
}

pub(super) fn writer_parked(id: &LockId) -> bool {
    with(|r| r.locks.get(id).is_some_and(|q| q.iter().any(|w| matches!(w.req, Request::Write { .. })))).unwrap_or(false)
}

/// Nobody is parked anywhere: the common case, answered by one flag, without building a lock
/// id or borrowing the registry.
pub(super) fn nobody_parked() -> bool {
    !crate::effects::served::any_parked()
}

/// Whether a writer is parked on `key` (in the selected database): one flag when nobody is.
pub fn writer_waits(ctx: &Ctx, key: &[u8]) -> bool {
    !nobody_parked() && writer_parked(&(ctx.selected_db(), key.to_vec()))
}

/// A parked reader's time ran out: it is answered as a new reader would be, without serving
/// (a timeout callback is no place to write for others).
pub fn writers_at_timeout(id: &LockId, req: &Request) -> Writers {
    if matches!(req, Request::Read { .. }) && writer_parked(id) {
        Writers::Waiting
    } else {
        Writers::None
    }
}

/// For a free lock whose fair queue refuses others: when its first live waiter's deadline
/// passes (absolute ms), the moment the lock may become free for them.
/// The lock's database is selected for the look, as `expiry_of` does.
pub fn queue_expiry(ctx: &Ctx, id: &LockId) -> Option<i64> {
    let previous = ctx.selected_db();
    if previous != id.0 && !ctx.select_db(id.0) {
        return None;
    }
    let args = Args::empty();
    let now = Ctx::now_ms();
    let mut store = RedisStore::at(ctx, &args, now);
    // A waiter without a deadline never times out: only a change to the keys wakes the lock.
    let deadline = kinds::first_live_waiter(&mut store, &id.1).ok().flatten().flatten();
    drop(store);
    if previous != id.0 {
        ctx.select_db(previous);
    }
    // Saturating: a deadline past the i64 range is simply never.
    deadline.map(|d| d.ceil() as i64)
}
