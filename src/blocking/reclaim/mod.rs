//! The expirable semaphore's reclaim, one family: the timer that returns expired permits
//! (here), and the search for leases the module did not write, so that their timer is armed
//! too ([`find`]).
//!
//! Expired permits of the expirable semaphore come back at their deadline, with nobody
//! calling: one timer per semaphore, at the earliest lease end in `{name}:timeout`
//! (`core::sync::permits::next_expiry`), runs `core::sync::permits::reclaim` (the same writes,
//! messages and replication as Redisson's reclaim), then serves the semaphore's parked clients
//! and re-arms for the next lease end.
//!
//! A timer is armed by every `PSEMAPHORE.*` command that gives a permit a lease, when a client
//! parks on an expirable semaphore, and by the timer itself. Permits leased by others (a
//! Redisson client's Lua) are seen once a module command or a parked client touches the
//! semaphore; until then they come back as under Redisson, at the next call that reclaims.
//! A timer firing while writes are paused leaves its semaphore due, run when they resume; on a
//! replica nothing is reclaimed (the primary's writes arrive by replication).

pub mod find;

use std::cell::RefCell;

use super::waiter::{LockId, Map, TimerData, TimerId};
use crate::core::sync::permits;
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// A lease years away is woken early and re-armed (Redis keeps timers in microseconds).
const MAX_TIMER_MS: i64 = super::priority::MAX_TIMER_MS;

#[derive(Default)]
struct Reclaim {
    /// The armed timer of each semaphore, with the lease end it is due at.
    timers: Map<LockId, (TimerId, i64)>,
    /// Semaphores whose timer fired, to reclaim once writes are allowed.
    due: Vec<LockId>,
}

thread_local! {
    // Redis runs every module callback on its main thread.
    static RECLAIM: RefCell<Reclaim> = RefCell::default();
}

fn with<T>(f: impl FnOnce(&mut Reclaim) -> T) -> Option<T> {
    RECLAIM.with(|r| r.try_borrow_mut().ok().map(|mut r| f(&mut r)))
}

/// Runs `f` with `db` selected, then selects the database that was.
pub(super) fn in_db<T>(ctx: &Ctx, db: i32, f: impl FnOnce() -> T) -> Option<T> {
    let previous = ctx.selected_db();
    if previous != db && !ctx.select_db(db) {
        return None;
    }
    let out = f();
    if previous != db {
        ctx.select_db(previous);
    }
    Some(out)
}

/// Keeps one timer for the semaphore `id` at its earliest lease end (none if no permit has a
/// lease). A timer already due no later is kept: firing early, it reclaims nothing and re-arms.
pub fn arm(ctx: &Ctx, id: &LockId) {
    let next = in_db(ctx, id.0, || {
        let args = Args::empty();
        let mut store = RedisStore::at(ctx, &args, Ctx::now_ms());
        // Another type under the zset: nothing to wait for; the commands answer WRONGTYPE.
        permits::next_expiry(&mut store, &id.1).ok().flatten()
    })
    .flatten();
    let stale = with(|r| match (r.timers.get(id), next) {
        (Some(&(_, at)), Some(want)) if at <= want => None,
        _ => r.timers.remove(id).map(|(t, _)| t),
    })
    .flatten();
    if let Some(t) = stale {
        ctx.stop_timer(t);
    }
    let Some(at) = next else { return };
    // Leases are in use here: the command filter looks at others' `ZADD`s from now on.
    crate::ffi::filter::set_leases_seen();
    if with(|r| r.timers.contains_key(id)).unwrap_or(true) {
        return;
    }
    let ms = (at - Ctx::now_ms()).clamp(0, MAX_TIMER_MS);
    let t = ctx.create_timer(ms, TimerData::Reclaim { db: id.0, key: id.1.clone() });
    with(|r| r.timers.insert(id.clone(), (t, at)));
}

/// The timer of `id` fired: it is due (and no longer armed).
pub(super) fn fired(id: &LockId) {
    with(|r| {
        r.timers.remove(id);
        if !r.due.contains(id) {
            r.due.push(id.clone());
        }
    });
}

/// Reclaims the expired permits of every due semaphore, serves its parked clients (with
/// `serve`, the hand-off's, which lies above this file) and re-arms. Writes: the caller has
/// asked the write gate.
pub(super) fn run_due(ctx: &Ctx, serve: fn(&Ctx, &LockId)) {
    let due = with(|r| std::mem::take(&mut r.due)).unwrap_or_default();
    for id in due {
        if !ctx.select_db(id.0) {
            continue;
        }
        let args = Args::empty();
        let now = Ctx::now_ms();
        // The module's own upkeep, as Redisson's reclaim in any call would do it; the parked
        // clients are served right below, each checked against its own user.
        let mut store = RedisStore::at(ctx, &args, now).served_by_writer();
        let before = crate::core::sync::store::SyncStore::zset_count(
            &mut store,
            &crate::core::sync::names::permit_timeouts(&id.1),
            0.0,
            now as f64,
        )
        .unwrap_or(0);
        // A key of another type: nothing reclaimed; the commands answer WRONGTYPE.
        if let Ok(Some(_)) = permits::reclaim(&mut store, &id.1, now, None) {
            stats::PERMITS_RECLAIMED.add(before as u64);
        }
        drop(store);
        serve(ctx, &id);
        arm(ctx, &id);
    }
}

/// A replica reclaims nothing (or the module was loaded again): forget what was due. Armed
/// timers fire and find the gate closed, or nothing to do.
pub fn clear() {
    with(|r| r.due.clear());
}

/// The module was loaded again: no timer of an earlier load is pending.
pub fn reload() {
    with(|r| *r = Reclaim::default());
}
