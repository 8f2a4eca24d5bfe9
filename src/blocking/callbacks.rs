//! What Redis calls the wake-up path for, and its registration: the ways out of parking other
//! than a grant (a client's time running out, a disconnect or `CLIENT UNBLOCK`), a grant whose
//! reply never reached its client (`answer`), and the events that touch every parked client
//! (FLUSHALL/SWAPDB, this server becoming a replica).
//!
//! The callbacks are this module's own: [`register`] (at load) and [`Parked`] (named when a
//! client parks) hand them to the thin wrappers under `crate::ffi`, which call them without
//! knowing this module, so the wake-up path has no import cycle with ffi.

use crate::core::Reply;
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::blocked::BlockCallbacks;
use crate::ffi::{Args, Ctx};

use super::answer::{self, answer, Undelivered};
use super::changes::changed;
use super::give_back;
use super::registry::with;
use super::request::{attempt_for_waiter, timeout_reply, Attempt};
use super::serve::{arm_expiry, queue};
use super::waiter::{LockId, Parked};
use super::waiters::{self, Waiters};
use super::{fair, paused, priority};
use crate::effects::ServedBy;

/// Hands the store the wake-up path's reaction to a write (`effects::served`). Called at
/// load, before any command can run.
pub fn register() {
    crate::effects::served::on_change(changed);
}

/// What a parked client's timeout and disconnect, and the loss of its grant's reply, do
/// (`Ctx::block_client::<Parked>`).
impl BlockCallbacks for Parked {
    type Undelivered = Undelivered;

    fn on_timeout(ctx: &Ctx) -> Reply {
        on_timeout(ctx)
    }

    fn on_disconnect(ctx: &Ctx, bc: usize, dropped: Option<Undelivered>) {
        match dropped {
            // Answered, and Redis drops the answer now (`answer`'s notes): the client, told
            // an error or gone, holds nothing, so the grant goes back before the command that
            // dropped it replies.
            Some(what) => give_back::now(ctx, what),
            None => on_disconnect(ctx, bc),
        }
    }

    /// An answer freed unwritten that `on_disconnect` did not get: given back as soon as the
    /// module may write (meanwhile the module's `*.HOLDS` do not count it).
    fn on_undelivered(ctx: &Ctx, what: Undelivered) {
        give_back::later(ctx, what);
    }
}

/// FLUSHALL / FLUSHDB deleted locks without per-key events: serve every lock.
pub fn on_flush(ctx: &Ctx) {
    stats::forget_all();
    let all: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    for id in all {
        queue(ctx, id, ServedBy::Timer);
    }
}

/// A parked client's time ran out: reply what the non-blocking command replies now (which
/// may be a grant, if the lock came free this very moment). While the module may not write,
/// the refusal computed by reads alone (`paused::refusal`).
fn on_timeout(ctx: &Ctx) -> Reply {
    let client = ctx.client_id();
    // Answered already, its answer not yet handed to Redis (`answer`): the grant is what the
    // command would reply now, and the client holds it.
    if let Some(a) = answer::take_by_client(client) {
        a.bc.unblock(None);
        return a.reply;
    }
    let Some((id, w)) = with(|r| waiters::take_by_client(&mut r.locks, client)).flatten() else { return Reply::Nil };
    stats::TIMEOUTS.inc();
    if let Some(reply) = timeout_reply(ctx, &w.req, &w.who) {
        w.ended(false);
        w.bc.unblock(None);
        left(ctx, id, &w.req);
        return reply;
    }
    let writers = priority::writers_at_timeout(&id, &w.req);
    let args = Args::empty();
    // The waiter's user is checked on both paths: a refusal replies the lock's TTL too, which
    // its user may no longer read.
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(&w.who);
    let open = paused::gate(ctx) == paused::Gate::Open;
    let (reply, granted) = if open {
        match attempt_for_waiter(&mut store, &id.1, &w.req, writers) {
            Ok(Attempt::Granted(r)) => (r, true),
            Ok(Attempt::Refused(r)) => (r, false),
            Err(e) => (Reply::Error(e.to_string()), false),
        }
    } else {
        match crate::core::permit(&mut store, || vec![crate::core::access::lock(&id.1)]) {
            Ok(()) => (paused::refusal(ctx, &id.1, &w.req), false),
            Err(e) => (Reply::Error(e.to_string()), false),
        }
    };
    drop(store);
    w.ended(granted);
    if !granted {
        // The client reads its timeout reply right after this callback: its queue place must
        // be gone by then (a reader of the queue would otherwise still see it), so the cancel
        // runs here when the module may write, and from the cancel timer only in a pause.
        if open {
            fair::waiters::cancel_now(ctx, &id, &w.req, &w.who);
        } else {
            fair::waiters::gave_up(ctx, &id, &w.req, &w.who);
        }
    }
    w.bc.unblock(None);
    arm_expiry(ctx, &id);
    reply
}

/// A parked client went away (or was unblocked with CLIENT UNBLOCK ... ERROR): forget it.
fn on_disconnect(ctx: &Ctx, bc: usize) {
    // Answered already, its answer not yet handed to Redis (`answer`): the client was told an
    // error, or is gone, so its grant goes back at once (counted as given back, not as a
    // parked client leaving: as on a server where the answer went to Redis at once).
    if let Some(a) = answer::take_by_handle(bc) {
        a.bc.unblock(None);
        if let Some(what) = a.give_back {
            give_back::now(ctx, what);
        }
        return;
    }
    // Found through the index in O(log n): a pool of thousands disconnecting at once must not
    // search every queue for each client.
    if let Some((id, w)) = with(|r| waiters::take_by_handle(&mut r.locks, bc)).flatten() {
        stats::DISCONNECTS.inc();
        w.ended(false);
        if w.req.is_sync() {
            w.bc.unblock(None);
            return left(ctx, id, &w.req);
        }
        fair::waiters::gave_up(ctx, &id, &w.req, &w.who);
        w.bc.unblock(None);
        arm_expiry(ctx, &id);
    }
}

/// A synchronizer's waiter left unserved: the semaphore is served after this callback (from
/// the 0 ms timer), as the waiters behind it may fit in what it could not.
fn left(ctx: &Ctx, id: LockId, req: &super::request::Request) {
    arm_expiry(ctx, &id);
    if !matches!(req, super::request::Request::Latch) && with(|r| r.locks.contains_key(&id)).unwrap_or(false) {
        queue(ctx, id, ServedBy::Timer);
    }
}

/// The error a parked client gets when its server stops being a primary: Redis's own text for
/// clients it unblocks on a role change, so clients handle both alike.
pub const DEMOTED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// This server became a replica: no lock may be granted here any more, so every parked client
/// gets an error at once (it retries on the new primary) instead of waiting forever.
pub fn on_demoted(ctx: &Ctx) {
    let all: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    for id in all {
        while let Some(w) = with(|r| r.locks.get_mut(&id).and_then(Waiters::pop_front)).flatten() {
            stats::DISCONNECTS.inc();
            w.ended(false);
            answer(ctx, w, Reply::Error(DEMOTED.into()), None);
        }
        arm_expiry(ctx, &id);
    }
}
