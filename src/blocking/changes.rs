//! Changes to locks with parked clients, reported by name: the module's own writes, the
//! command filter's hits and `EXEC`, `expired`/`evicted` events. Each queues the lock in
//! `pending`, served by whoever made the change when it serves right after (the module's own
//! commands end with `serve_now`; a grant is made by `serve` itself), else from a 0 ms timer.
//! Changes by others that nothing reports are found by `super::poll`.

use super::fair;
use super::registry::with;
use super::serve::queue;
use super::waiter::LockId;
use crate::effects::served::{any_parked, ServedBy};
use crate::ffi::Ctx;

/// `name` changed (in `db`, or in a database the caller does not know): if it is a lock with
/// parked clients, or the fair queue of one, queue that lock to be served by `by`. Called for
/// the module's own writes and for commands of others the filter saw before they run (so the
/// 0 ms timer serves the lock after them).
pub fn changed(ctx: &Ctx, db: Option<i32>, name: &[u8], by: ServedBy) {
    if !any_parked() {
        return;
    }
    let queue_of = fair::queue::locks_of_queue(name);
    let due: Vec<LockId> = with(|r| {
        let mut due = Vec::new();
        for lock in std::iter::once(name).chain(queue_of.iter().flatten().map(Vec::as_slice)) {
            if let Some(dbs) = r.by_name.get(lock) {
                due.extend(dbs.iter().filter(|&&d| db.is_none_or(|db| db == d)).map(|&d| (d, lock.to_vec())));
            }
        }
        due
    })
    .unwrap_or_default();
    for id in due {
        queue(ctx, id, by);
    }
}

/// `EXEC`: the commands it runs were filtered when they were queued, perhaps before their
/// lock had parked clients, and run only now: serve every lock with parked clients after it.
pub fn recheck_all(ctx: &Ctx) {
    let all: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    for id in all {
        queue(ctx, id, ServedBy::Timer);
    }
}

/// A command about to run names `name` (the command filter; any database): serve the lock
/// after the command, from a 0 ms timer.
pub fn name_changed(ctx: &Ctx, name: &[u8]) {
    changed(ctx, None, name, ServedBy::Timer);
}

/// An `expired` or `evicted` event (the only keyspace events the module subscribes to): a
/// parked lock that expired is served now rather than by its expiry timer.
pub fn on_key_gone(ctx: &Ctx, key: &[u8]) {
    changed(ctx, Some(ctx.selected_db()), key, ServedBy::Timer);
}
