//! Parked `FAIRLOCK.ACQUIRE` clients.
//!
//! A parked fair waiter takes its place in the lock's queue like any Redisson waiter (its
//! refused attempt enqueued it) and is served when it reaches the head and the lock is free.
//! Redisson drops a queued waiter once its deadline passes, assuming it stopped retrying; a
//! parked, connected client has not, so while it waits a tick every [`TICK_MS`] keeps its
//! deadline at least [`AHEAD_MS`] ahead (and the deadlines queued behind it, by the same
//! amount, so they stay in order). The tick also serves the lock, so a dead Redisson waiter
//! at the head is purged without anyone calling.
//!
//! A parked waiter that gives up (timeout, disconnect, `CLIENT UNBLOCK`) leaves the queue as
//! `FAIRLOCK.CANCEL` does, from a 0 ms timer: a disconnect callback is no place to write.
//! While writes are paused the tick and the cancels wait (`crate::blocking::paused`); when they
//! resume, the keep-alive runs first.

use std::cell::RefCell;

use crate::acl::Who;
use crate::blocking::registry::with;
use crate::blocking::request::Request;
use crate::blocking::serve::serve;
use crate::blocking::waiter::LockId;
use crate::blocking::waiter::TimerData;
use crate::core::lock::fair;
use crate::core::Reply;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// How often parked fair waiters' deadlines are looked at.
pub const TICK_MS: i64 = 100;
/// A parked waiter's deadline is kept at least this far from now.
pub const AHEAD_MS: i64 = 3 * TICK_MS;

/// A waiter that gave up: (owner, wait, the user it ran as), by lock.
type Cancel = (Vec<u8>, i64, Who);

thread_local! {
    /// Waiters that gave up, to be cancelled.
    static CANCELS: RefCell<Vec<(LockId, Cancel)>> = const { RefCell::new(Vec::new()) };
}

/// The parked fair waiters of a lock, in arrival order: (owner, wait).
fn parked_on(id: &LockId) -> Vec<(Vec<u8>, i64)> {
    let fair_only = |w: &crate::blocking::waiter::Waiter| match &w.req {
        Request::Fair { owner, wait, .. } => Some((owner.clone(), *wait)),
        _ => None,
    };
    with(|r| r.locks.get(id).map(|q| q.iter().filter_map(fair_only).collect())).flatten().unwrap_or_default()
}

/// Answers `NOPERM` to the parked fair waiters of `id` whose user may no longer touch the
/// lock and its queue: the module keeps their places on their behalf, never beyond their
/// permission. Their places are left to expire (nothing is written for them).
fn drop_denied(ctx: &Ctx, id: &LockId) {
    let fair =
        |w: &crate::blocking::waiter::Waiter| matches!(w.req, Request::Fair { .. }).then(|| (w.client, w.who.clone()));
    let users: Vec<(u64, Who)> =
        with(|r| r.locks.get(id).map(|q| q.iter().filter_map(fair).collect())).flatten().unwrap_or_default();
    for (client, who) in users {
        let args = Args::empty();
        let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(&who);
        let needs = || [vec![crate::core::access::lock(&id.1)], crate::core::access::fair(&id.1)].concat();
        let Err(e) = crate::core::permit(&mut store, needs) else { continue };
        drop(store);
        let gone = with(|r| {
            let q = r.locks.get_mut(id)?;
            let pos = q.iter().position(|w| w.client == client)?;
            q.remove(pos)
        })
        .flatten();
        if let Some(w) = gone {
            w.ended(false);
            crate::blocking::answer::answer(ctx, w, Reply::Error(e.to_string()), None);
        }
    }
}

fn keep_alive(ctx: &Ctx, id: &LockId) {
    drop_denied(ctx, id);
    let parked = parked_on(id);
    if parked.is_empty() {
        return;
    }
    let refs: Vec<(&[u8], i64)> = parked.iter().map(|(o, w)| (o.as_slice(), *w)).collect();
    let args = Args::empty();
    // Only deadlines move, ahead of now: nobody's turn changes, and the tick serves the lock
    // right after anyway. No timer for that.
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).served_by_writer();
    // A queue or deadline key of another type: nothing to keep alive; the waiter's next
    // attempt answers it with the error.
    let _ = fair::keep_alive(&mut store, &id.1, &refs, AHEAD_MS);
}

fn arm_tick(ctx: &Ctx) {
    if with(|r| r.fair_tick.is_none()).unwrap_or(false) {
        let t = ctx.create_timer(TICK_MS, TimerData::FairTick);
        with(|r| r.fair_tick = Some(t));
    }
}

/// A fair waiter (`owner`) was just parked, inside its own command: its place is kept from
/// now on. Only its own place can need it now (the tick keeps the others, and re-checks their
/// users), so a place with its wait ahead costs one read, not a pass over the whole queue:
/// parking N waiters stays O(N), not O(N^2).
pub fn parked(ctx: &Ctx, id: &LockId, owner: &[u8]) {
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms());
    // A queue or deadline key of another type: nothing to keep alive.
    let due = fair::place_due(&mut store, &id.1, owner, AHEAD_MS).unwrap_or(false);
    drop(store);
    if due {
        keep_alive(ctx, id);
    }
    arm_tick(ctx);
}

/// The tick: keeps every parked fair waiter's place and serves its lock.
pub fn tick(ctx: &Ctx) {
    let ids: Vec<LockId> = with(|r| {
        r.fair_tick = None;
        let has_fair = |q: &crate::blocking::waiters::Waiters| q.iter().any(|w| matches!(w.req, Request::Fair { .. }));
        r.locks.iter().filter(|(_, q)| has_fair(q)).map(|(id, _)| id.clone()).collect()
    })
    .unwrap_or_default();
    for id in &ids {
        if ctx.select_db(id.0) {
            keep_alive(ctx, id);
            serve(ctx, id);
        }
    }
    if !ids.is_empty() {
        arm_tick(ctx);
    }
}

/// Writes resumed after a pause: the tick now, not when its timer fires (a deadline may have
/// passed meanwhile), and the timer re-armed from now.
pub fn tick_now(ctx: &Ctx) {
    if let Some(t) = with(|r| r.fair_tick.take()).flatten() {
        ctx.stop_timer(t);
    }
    tick(ctx);
}

/// A parked waiter left without the lock: if it was a fair waiter, cancel its queue place.
pub fn gave_up(ctx: &Ctx, id: &LockId, req: &Request, who: &Who) {
    let Request::Fair { owner, wait, .. } = req else { return };
    let first = CANCELS.with(|c| {
        let mut c = c.borrow_mut();
        c.push((id.clone(), (owner.clone(), *wait, who.clone())));
        c.len() == 1
    });
    if first {
        ctx.create_timer(0, TimerData::FairCancels);
    }
}

/// A parked fair waiter's BLOCK timed out, in its own timeout callback (writes allowed): its
/// queue place is cancelled at once, as `FAIRLOCK.CANCEL` would, and the lock served (the
/// waiter behind may now be first in line). Only in the waiter's own database; anything else
/// goes through the cancel timer, which selects databases.
pub fn cancel_now(ctx: &Ctx, id: &LockId, req: &Request, who: &Who) {
    let Request::Fair { owner, wait, .. } = req else { return };
    if ctx.selected_db() != id.0 {
        return gave_up(ctx, id, req, who);
    }
    // A user that may no longer write the queue: its place is left to expire.
    if !may_write_queue(ctx, id, who) {
        return;
    }
    let args = Args::empty();
    // Served right below.
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).served_by_writer();
    // Another type under the queue: nothing of ours to remove.
    let _ = fair::cancel_many(&mut store, &id.1, &[(owner.as_slice(), *wait)]);
    drop(store);
    serve(ctx, id);
}

/// Cancels the queue places of the fair waiters that gave up, then serves their locks (the
/// waiter behind may now be first in line).
pub fn run_cancels(ctx: &Ctx) {
    let cancels = CANCELS.with(|c| std::mem::take(&mut *c.borrow_mut()));
    // One pass per lock, however many of its waiters gave up together.
    for (id, batch) in by_lock(cancels) {
        if !ctx.select_db(id.0) {
            continue;
        }
        // A user that may no longer write the queue: its place is left to expire.
        let allowed: Vec<(Vec<u8>, i64)> =
            batch.into_iter().filter(|(_, _, who)| may_write_queue(ctx, &id, who)).map(|(o, w, _)| (o, w)).collect();
        let refs: Vec<(&[u8], i64)> = allowed.iter().map(|(owner, wait)| (owner.as_slice(), *wait)).collect();
        let args = Args::empty();
        // Every waiter in `refs` was checked against its own user just above. Served below.
        let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).served_by_writer();
        // Another type under the queue: nothing of ours to remove.
        if !refs.is_empty() {
            let _ = fair::cancel_many(&mut store, &id.1, &refs);
        }
        drop(store);
        serve(ctx, &id);
    }
}

/// Drops the pending cancels: the server was demoted since the waiters gave up (Redis unblocks
/// parked clients on a role change). A write here would make this replica diverge; the new
/// primary's queue purge removes their places.
pub fn forget_cancels() {
    CANCELS.with(|c| c.borrow_mut().clear());
}

/// Whether the user a parked fair waiter ran as may still write its lock's queue (as
/// `FAIRLOCK.CANCEL` would check it), so the module may cancel its place for it.
fn may_write_queue(ctx: &Ctx, id: &LockId, who: &Who) -> bool {
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(who);
    crate::core::permit(&mut store, || crate::core::access::fair(&id.1)).is_ok()
}

/// The cancels grouped by lock, locks in the order they first gave up, each lock's cancels in
/// the order they came.
fn by_lock<T>(cancels: Vec<(LockId, T)>) -> Vec<(LockId, Vec<T>)> {
    let mut order: Vec<(LockId, Vec<T>)> = Vec::new();
    let mut at: std::collections::HashMap<LockId, usize> = std::collections::HashMap::new();
    for (id, cancel) in cancels {
        let i = *at.entry(id.clone()).or_insert_with(|| {
            order.push((id, Vec::new()));
            order.len() - 1
        });
        order[i].1.push(cancel);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::by_lock;

    #[test]
    fn cancels_are_grouped_by_lock_in_order() {
        let id = |n: &str| (0, n.as_bytes().to_vec());
        let c = |l: &str, o: &str, w| (id(l), (o.as_bytes().to_vec(), w));
        let grouped = by_lock(vec![c("a", "1", 1), c("b", "2", 2), c("a", "3", 3), c("c", "4", 4), c("b", "5", 5)]);
        let names: Vec<(Vec<u8>, Vec<i64>)> =
            grouped.into_iter().map(|(l, b)| (l.1, b.into_iter().map(|(_, w)| w).collect())).collect();
        assert_eq!(names, [(b"a".to_vec(), vec![1, 3]), (b"b".to_vec(), vec![2, 5]), (b"c".to_vec(), vec![4])]);
    }
}
