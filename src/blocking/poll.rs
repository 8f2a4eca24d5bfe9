//! Noticing, without notifications, that someone else changed a lock with parked clients.
//!
//! Redisson's Lua, a plain `DEL`, a `MULTI` block: other clients free locks through commands
//! the module does not run. Keyspace events would tell, but every subscribed event costs each
//! write in the server a module context; a command filter costs every command about as much.
//! Instead, while clients are parked, a timer every [`POLL_MS`] looks at each parked lock's
//! signature (its type, length and expiry, and its fair queue's length) and serves the lock
//! when the signature changed: a few key lookups per parked lock and tick, nothing per command
//! of anyone else. A change that leaves the signature as it was (a holder swapped within the
//! same millisecond with the same lease) waits for the next change, the expiry timer, or, for
//! a fair lock, its keep-alive tick.

use std::cell::RefCell;
use std::collections::HashMap;

use super::{serve, with, LockId, TimerData};
use crate::ffi::events::TimerId;
use crate::ffi::{Ctx, KeyKind};

/// How often parked locks are looked at: the wake-up delay for a change by someone else.
pub const POLL_MS: i64 = 1;

/// What a poll compares: the lock key's (type, length, expiry) and its fair queue's length.
type Sig = (KeyKind, usize, Option<i64>, usize);

#[derive(Default)]
struct Poll {
    timer: Option<TimerId>,
    sigs: HashMap<LockId, Sig>,
}

thread_local! {
    static POLL: RefCell<Poll> = RefCell::new(Poll::default());
}

fn with_poll<T>(f: impl FnOnce(&mut Poll) -> T) -> Option<T> {
    POLL.with(|p| p.try_borrow_mut().ok().map(|mut p| f(&mut p)))
}

/// The signature of `id` as the keyspace has it now (in its database, selected by the caller).
fn sig(ctx: &Ctx, id: &LockId) -> Sig {
    let look = |name: &[u8]| {
        let s = ctx.string(name);
        let k = ctx.open_key(s.as_ref(), false);
        let kind = k.kind();
        let at = if kind == KeyKind::Empty { None } else { k.expire_at() };
        (kind, k.len(), at)
    };
    let (kind, len, at) = look(&id.1);
    let (_, queued, _) = look(&crate::names::fair_queue(&id.1));
    (kind, len, at, queued)
}

/// A client was just parked on `id`, inside its own command: the lock as it is now is the
/// baseline, and polling runs while anyone is parked.
pub fn parked(ctx: &Ctx, id: &LockId) {
    if with_poll(|p| p.sigs.contains_key(id)).unwrap_or(true) {
        return;
    }
    let s = sig(ctx, id);
    let arm = with_poll(|p| {
        p.sigs.insert(id.clone(), s);
        p.timer.is_none()
    })
    .unwrap_or(false);
    if arm {
        let t = ctx.create_timer(POLL_MS, TimerData::Poll);
        with_poll(|p| p.timer = Some(t));
    }
}

/// Nobody waits for `id` any more: forget it, and stop polling when nothing is left (so a
/// server with no parked client holds no timer of ours).
pub fn forget(ctx: &Ctx, id: &LockId) {
    let stop = with_poll(|p| {
        p.sigs.remove(id);
        if p.sigs.is_empty() {
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

/// The tick: serves every parked lock whose signature changed, and forgets locks nobody
/// waits for any more.
pub fn tick(ctx: &Ctx) {
    // A replica grants nothing (its parked clients were released when it was demoted).
    if ctx.flags() & redis_module::raw::REDISMODULE_CTX_FLAGS_SLAVE as u64 != 0 {
        with_poll(|p| *p = Poll::default());
        return;
    }
    let parked: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    let ids: Vec<LockId> = with_poll(|p| {
        p.timer = None;
        p.sigs.retain(|id, _| parked.contains(id));
        p.sigs.keys().cloned().collect()
    })
    .unwrap_or_default();
    for id in &ids {
        if !ctx.select_db(id.0) {
            continue;
        }
        let now = sig(ctx, id);
        if with_poll(|p| p.sigs.get(id) == Some(&now)).unwrap_or(true) {
            continue;
        }
        serve(ctx, id);
        // Whatever serving changed (a grant) is the new baseline.
        let after = sig(ctx, id);
        with_poll(|p| {
            if let Some(s) = p.sigs.get_mut(id) {
                *s = after;
            }
        });
    }
    let again = with_poll(|p| !p.sigs.is_empty()).unwrap_or(false);
    if again {
        let t = ctx.create_timer(POLL_MS, TimerData::Poll);
        with_poll(|p| p.timer = Some(t));
    }
}

/// The module was loaded again: no timer of an earlier load is pending (Redis refuses to
/// unload a module that holds one), and nobody is parked.
pub fn reload() {
    with_poll(|p| *p = Poll::default());
}
