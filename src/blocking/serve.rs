//! Parking a client and granting a lock to its parked clients: [`park`] puts a refused
//! client in the registry, [`serve`] grants a lock to its waiters in order while they can
//! have it, and the timers that make sure that happens (the lease's expiry, the 0 ms timer of
//! [`queue`]).

use crate::acl::Who;
use crate::core::Reply;
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx, KeyKind};

use super::answer::{answer, GiveBack};
use super::fair;
use super::registry::unwatch_lock;
use super::registry::with;
use super::request::{attempt_for_waiter, Attempt, Line, Request};
use super::waiter::TimerData;
use super::waiter::{LockId, Waiter};
use super::waiters::Waiters;
use super::{paused, poll, priority};
use crate::core::lock::rwlock::Writers;
use crate::effects::ServedBy;

/// Serves the locks of the current database that changed during this command. Called by every
/// write command after its own effects, so a release hands the lock over at once.
pub fn serve_now(ctx: &Ctx) {
    let db = ctx.selected_db();
    // The usual case, nobody parked or nothing changed: one look at an empty list.
    let ready: Vec<LockId> = with(|r| {
        if r.pending.is_empty() {
            return Vec::new();
        }
        let (mine, others): (Vec<_>, Vec<_>) = r.pending.drain(..).partition(|id| id.0 == db);
        r.pending = others;
        mine
    })
    .unwrap_or_default();
    if ready.is_empty() {
        return;
    }
    // Inside a command writes are allowed, but for a `CLIENT PAUSE` run in the same MULTI.
    if paused::gate(ctx) != paused::Gate::Open {
        with(|r| r.pending.extend(ready));
        return;
    }
    for id in ready {
        serve(ctx, &id);
    }
}

/// Grants `id` to its parked clients, line by line (`Request::line`: the locks, the
/// semaphores' permits, the latch), each line in its own order while its first can have what it
/// asks: a waiter that cannot never holds back one of another line. A grant in one line can
/// open another (permits taken down to 0 open a latch of the same name), so while there are
/// two lines or more, they are served again until none moves.
pub(super) fn serve(ctx: &Ctx, id: &LockId) {
    loop {
        let lines = with(|r| r.locks.get(id).map(Waiters::lines)).flatten().unwrap_or_default();
        let mut moved = false;
        for &line in &lines {
            moved |= serve_line(ctx, id, line);
        }
        if !moved || lines.len() < 2 {
            break;
        }
    }
    // Served as the keyspace is now: a change reported meanwhile (the grants' own writes
    // included) needs no second pass from the pending timer.
    with(|r| r.pending.retain(|p| p != id));
    arm_expiry(ctx, id);
}

/// Grants `id` to its parked clients of `line`, in order, while they can have it; true if any
/// was answered. For a fair lock the queue, not the order of parking, decides who is first
/// (Redisson clients queue too, and a parked waiter may have lost its place): when the first
/// parked waiter is refused, the parked waiter at the head of the queue, if any, is tried too.
/// At most two attempts per grant.
fn serve_line(ctx: &Ctx, id: &LockId, line: Line) -> bool {
    let who_and_req = |w: &Waiter| (w.req.clone(), w.who.clone());
    let mut moved = false;
    while let Some((i, (front, who))) =
        with(|r| r.locks.get(id).and_then(|q| q.first_in(line)).map(|(i, w)| (i, who_and_req(w)))).flatten()
    {
        if try_grant(ctx, id, i, &front, &who) {
            moved = true;
            continue;
        }
        // A reentrant acquire is refused while a fair waiter is first in line: that waiter,
        // parked further back, must not wait behind it. Only a parked fair waiter can be.
        let fair_parked = || {
            with(|r| r.locks.get(id).is_some_and(|q| q.iter().any(|w| matches!(w.req, Request::Fair { .. }))))
                .unwrap_or(false)
        };
        if !matches!(front, Request::Fair { .. } | Request::Lock { .. }) || !fair_parked() {
            break;
        }
        let head = fair::queue::first_in_line(ctx, id);
        let at_head = with(|r| {
            let q = r.locks.get(id)?;
            q.iter().position(|w| matches!(&w.req, Request::Fair { owner, .. } if Some(owner) == head.as_ref()))
        })
        .flatten();
        match at_head {
            Some(j) if j != i => {
                let Some((req, who)) = with(|r| r.locks.get(id).and_then(|q| q.get(j)).map(who_and_req)).flatten()
                else {
                    break;
                };
                if !try_grant(ctx, id, j, &req, &who) {
                    break;
                }
                moved = true;
            }
            _ => break,
        }
    }
    moved
}

/// Runs the acquire of the `i`-th parked waiter of `id`; if it is granted (or fails), answers
/// and releases that client. True if the client was answered.
fn try_grant(ctx: &Ctx, id: &LockId, i: usize, req: &Request, who: &Who) -> bool {
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(who).served_by_writer();
    // Served in arrival order: a parked reader ahead of a parked writer goes first.
    let outcome = attempt_for_waiter(&mut store, &id.1, req, Writers::None);
    drop(store);
    let (reply, give_back, granted) = match outcome {
        Ok(Attempt::Refused(_)) => return false,
        Ok(Attempt::Granted(reply)) => {
            let give_back = GiveBack::of(req, &reply).map(|g| (id.clone(), g));
            (reply, give_back, true)
        }
        // The key changed type under the waiter, or its user lost a permission: it gets the
        // error the command would give.
        Err(e) => (Reply::Error(e.to_string()), None, false),
    };
    if matches!(req, Request::Permits { .. }) {
        // The new permits' leases: the reclaim timer is due no later than the first to end.
        super::reclaim::arm(ctx, id);
    }
    if let Some(w) = with(|r| r.locks.get_mut(id).and_then(|q| q.remove(i))).flatten() {
        stats::HANDOFFS.inc();
        w.ended(granted);
        if req.is_sync() {
            stats::SYNC_HANDOFFS.inc();
        }
        if matches!(req, Request::RateLimit { .. }) {
            stats::RATE_HANDOFFS.inc();
        }
        answer(ctx, w, reply, give_back);
    }
    true
}

/// Keeps one timer per lock with parked clients, at its lease's absolute expiry; forgets the
/// lock when nobody waits for it any more.
pub(super) fn arm_expiry(ctx: &Ctx, id: &LockId) {
    let waiting = with(|r| {
        let waiting = r.locks.get(id).is_some_and(|q| !q.is_empty());
        if !waiting && r.locks.remove(id).is_some() {
            unwatch_lock(r, id);
        }
        waiting
    })
    .unwrap_or(false);
    if !waiting {
        poll::forget(ctx, id);
    }
    let expires_at = if waiting {
        let lock = expiry_of(ctx, id).or_else(|| priority::queue_expiry(ctx, id));
        // A rate limiter's state: also when its oldest grant leaves the window.
        match (lock, super::windows::window_expiry(ctx, id)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    } else {
        None
    };
    // A timer due no later than the lock's expiry is kept: when it fires early it serves the
    // lock (refused) and re-arms for the expiry then. A hand-off moves the expiry at every
    // grant; re-creating the timer each time would cost more than the rest of the hand-off.
    let stale = with(|r| match (r.expiry_timers.get(id), expires_at) {
        (Some(&(_, at)), Some(want)) if at <= want => None,
        _ => r.expiry_timers.remove(id).map(|(t, _)| t),
    })
    .flatten();
    if let Some(t) = stale {
        ctx.stop_timer(t);
    }
    if let Some(at) = expires_at {
        let already = with(|r| r.expiry_timers.contains_key(id)).unwrap_or(true);
        if !already {
            // +1: Redis considers a key expired only once its expiry time has passed. A lease
            // years long wakes the lock early and re-arms (Redis' timers count in us).
            let ms = (at - Ctx::now_ms()).saturating_add(1).min(priority::MAX_TIMER_MS);
            let t = ctx.create_timer(ms, TimerData::Expiry { db: id.0, key: id.1.clone() });
            with(|r| r.expiry_timers.insert(id.clone(), (t, at)));
        }
    }
}

/// The absolute expiry of the lock key, if it has one (in the lock's database).
fn expiry_of(ctx: &Ctx, id: &LockId) -> Option<i64> {
    let previous = ctx.selected_db();
    if previous != id.0 && !ctx.select_db(id.0) {
        return None;
    }
    let name = ctx.string(&id.1);
    let key = ctx.open_key(name.as_ref(), false);
    let at = if key.kind() == KeyKind::Empty { None } else { key.expire_at() };
    drop(key);
    if previous != id.0 {
        ctx.select_db(previous);
    }
    at
}

/// Queues `id` to be served by `by`: from a 0 ms timer, or by the writer right after.
pub(super) fn queue(ctx: &Ctx, id: LockId, by: ServedBy) {
    let need_timer = with(|r| {
        if !r.pending.contains(&id) {
            r.pending.push(id);
        }
        by == ServedBy::Timer && r.pending_timer.is_none()
    })
    .unwrap_or(false);
    if need_timer {
        stats::SERVE_TIMERS.inc();
        let t = ctx.create_timer(0, TimerData::Pending);
        with(|r| r.pending_timer = Some(t));
    }
}
