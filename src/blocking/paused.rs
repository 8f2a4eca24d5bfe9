//! Writes the module starts on its own wait while the server forbids them.
//!
//! Outside a client's command (a timer, a BLOCK timeout) the module writes only when [`gate`]
//! says [`Gate::Open`]. While writes are paused (`CLIENT PAUSE ... WRITE|ALL`, `FAILOVER`, a
//! cluster manual failover) or the server loads, Redis must not see a write: 7.0 aborts on
//! one, and a grant replied without its write would tell a client it holds a lock it does not.
//! The work then stays where it waits anyway: locks to serve in the registry's `pending` (an
//! expiry timer firing in a pause adds its lock there), cancels of fair waiters that gave up in
//! `fair::waiters`' list, and the fair keep-alive tick, not re-armed. Redis has no event for a
//! pause's end, so while one lasts a timer polls every [`POLL_MS`]; when writes resume it runs
//! the deferred work. Nothing polls while writes are allowed.
//!
//! On a replica the deferred work is dropped: nothing may be granted there (parked clients are
//! released when a primary is demoted), and a fair waiter's place left behind is purged by the
//! new primary once its deadline passes.

use std::cell::Cell;

use super::request::Request;
use super::waiter::TimerData;
use crate::core::store::TTL_PERSISTENT;
use crate::core::{LockError, Reply};
use crate::ffi::pause::writes_paused;
use crate::ffi::{Ctx, KeyKind};

/// How often a pause is checked for its end, while one lasts.
pub const POLL_MS: i64 = 10;

thread_local! {
    /// A [`TimerData::Resume`] timer is armed.
    static POLLING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the module may write now, outside a client's command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// A primary taking writes.
    Open,
    /// Writes are paused, or the server loads: defer the work (the poll is armed).
    Later,
    /// A replica: drop the work.
    Never,
}

/// Checks whether the module may write now; on [`Gate::Later`], makes sure the poll is armed.
pub fn gate(ctx: &Ctx) -> Gate {
    if ctx.is_replica() {
        return Gate::Never;
    }
    if writes_paused() || ctx.is_loading() {
        if !POLLING.with(|p| p.replace(true)) {
            ctx.create_timer(POLL_MS, TimerData::Resume);
        }
        return Gate::Later;
    }
    Gate::Open
}

/// The poll timer fired: it is no longer armed.
pub fn polled() {
    POLLING.with(|p| p.set(false));
}

/// The reply of a parked client whose BLOCK timeout falls while the module may not write:
/// the refusal the non-blocking command gives, computed by reads alone. That is the lock's
/// remaining time (PTTL), as Redisson's refusal; a lock whose lease ran out during the pause
/// reads as free but cannot be taken, and is refused with 0 ("retry now": the retry waits for
/// the pause to end like any write). Never a grant, since granting is a write.
pub fn refusal(ctx: &Ctx, key: &[u8], req: &Request) -> Reply {
    if let Some(r) = req.sync_refusal() {
        return r;
    }
    let name = ctx.string(key);
    let k = ctx.open_key(name.as_ref(), false);
    let ttl = match k.kind() {
        KeyKind::Empty => 0,
        KeyKind::Hash => k.expire_at().map_or(TTL_PERSISTENT, |at| (at - Ctx::now_ms()).max(0)),
        _ => return Reply::Error(LockError::WrongType.to_string()),
    };
    let plain = match req {
        Request::Fair { noqueue: true, .. } => 1,
        // Redisson's reply to a waiter already queued: the lock's PTTL, at least 0.
        Request::Fair { .. } => ttl.max(0),
        _ => ttl,
    };
    // A fenced refusal carries no token: `[refusal, -1]`, as the fenced commands reply.
    match req {
        Request::Lock { token: true, .. } | Request::Write { token: true, .. } | Request::Fair { token: true, .. } => {
            Reply::Array(vec![Reply::Int(plain), Reply::Int(-1)])
        }
        _ => Reply::Int(plain),
    }
}
