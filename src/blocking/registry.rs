//! The registry of parked clients: per lock, its waiters in arrival order, and the timers
//! armed for them. One thread-local, borrowed only through [`with`], never across a Redis
//! call that can call back into the module.

use std::cell::RefCell;

use crate::effects::served::set_any_parked;
use crate::ffi::Ctx;

use super::request::Request;
use super::waiter::TimerId;
use super::waiter::{LockId, Map, Waiter};
use super::waiters::Waiters;

#[derive(Default)]
pub(super) struct Registry {
    pub(super) locks: Map<LockId, Waiters>,
    /// Lock key -> the databases where it has parked clients: resolves a name the command
    /// filter saw (it does not know the database) or the store wrote.
    pub(super) by_name: Map<Vec<u8>, Vec<i32>>,
    pub(super) pending: Vec<LockId>,
    pub(super) pending_timer: Option<TimerId>,
    pub(super) expiry_timers: Map<LockId, (TimerId, i64)>,
    pub(super) fair_tick: Option<TimerId>,
}

thread_local! {
    // Redis runs every module callback on its main thread.
    static REGISTRY: RefCell<Registry> = RefCell::default();
}

/// Runs `f` on the registry. Never re-entered: no Redis call that can call back into this
/// module (a write, a timer) is made while the registry is borrowed.
pub(super) fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> Option<R> {
    REGISTRY.with(|r| r.try_borrow_mut().ok().map(|mut g| f(&mut g)))
}

/// Number of clients parked now.
pub fn parked_now() -> usize {
    with(|r| r.locks.values().map(Waiters::len).sum()).unwrap_or(0)
}

/// The first `limit` clients parked on `key` in `db`, in arrival order, and how many there
/// are, for `LOCK.INFO`.
pub fn parked_on(db: i32, key: &[u8], limit: usize) -> (Vec<crate::core::lock::info::Parked>, usize) {
    let now = Ctx::now_ms();
    let id = (db, key.to_vec());
    let list = |w: &Waiter| {
        let request = w.req.wait_kind().name();
        // A synchronizer's waiter has no owner: the permits it wants stand in its place.
        let owner = if w.req.is_sync() { w.req.permits().to_string().into_bytes() } else { w.req.owner().to_vec() };
        crate::core::lock::info::Parked { client: w.client, request, owner, waited_ms: now - w.since }
    };
    with(|r| r.locks.get(&id).map(|q| (q.iter().take(limit).map(list).collect(), q.len())))
        .flatten()
        .unwrap_or_default()
}

/// Number of synchronizer waiters parked now.
pub fn parked_sync_now() -> usize {
    with(|r| r.locks.values().map(|q| q.iter().filter(|w| w.req.is_sync()).count()).sum()).unwrap_or(0)
}

/// Number of rate limiter waiters parked now.
pub fn parked_rate_now() -> usize {
    with(|r| r.locks.values().map(|q| q.iter().filter(|w| matches!(w.req, Request::RateLimit { .. })).count()).sum())
        .unwrap_or(0)
}

/// Remembers which databases a lock key has parked clients in, so a change reported by name
/// (the module's own writes, the command filter) finds them.
pub(super) fn watch_lock(r: &mut Registry, id: &LockId) {
    r.by_name.entry(id.1.clone()).or_default().push(id.0);
    set_any_parked(true);
}

pub(super) fn unwatch_lock(r: &mut Registry, id: &LockId) {
    if let Some(dbs) = r.by_name.get_mut(&id.1) {
        dbs.retain(|&d| d != id.0);
        if dbs.is_empty() {
            r.by_name.remove(&id.1);
        }
    }
    set_any_parked(!r.by_name.is_empty());
}
