//! An acquire command's way through the wake-up path: one try, then parking when `BLOCK` is
//! given.

use super::park::park;
use super::priority::{nobody_parked, writer_parked};
use super::registry::with;
use super::request::{attempt_as, attempt_sync, Attempt, Request};
use super::serve::{serve, serve_now};
use crate::core::lock::rwlock::Writers;
use crate::core::{Reply, Result};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// An acquire command: granted now if it can be, else parked when `block` is given (the
/// timeout in ms, 0 = no limit), else the refusal.
/// `owner` is the command's own argument (`req` borrows it; a client that parks keeps a copy).
pub fn acquire(
    ctx: &Ctx,
    args: &Args,
    key: &[u8],
    owner: &[u8],
    req: Request<&[u8]>,
    block: Option<i64>,
) -> Result<Reply> {
    let writers = writers_ahead(ctx, key, &req);
    let mut store = RedisStore::new(ctx, args);
    let outcome = attempt_as(&mut store, key, owner, &req, writers).map_err(|e| e.in_command(req.command()));
    drop(store);
    // A fair acquire may have purged or joined the queue of a lock others are parked on.
    serve_now(ctx);
    match (outcome?, block) {
        (Attempt::Granted(reply), _) => Ok(reply),
        (Attempt::Refused(reply), block) => {
            stats::REFUSED.inc();
            match block {
                Some(ms) => park(ctx, key, req.to_owned(), ms, reply),
                None => Ok(reply),
            }
        }
    }
}

/// Whether `req`, a new acquire on `key`, must let a parked writer go first. A lock that came
/// free a moment ago (a lease just ran out, a foreign release not yet served) is served first,
/// so its parked writer takes it before the new reader looks.
pub fn writers_ahead<O>(ctx: &Ctx, key: &[u8], req: &Request<O>) -> Writers {
    if !matches!(req, Request::Read { .. }) || nobody_parked() {
        return Writers::None;
    }
    let id = (ctx.selected_db(), key.to_vec());
    if !writer_parked(&id) {
        return Writers::None;
    }
    serve(ctx, &id);
    if writer_parked(&id) {
        Writers::Waiting
    } else {
        Writers::None
    }
}

/// A synchronizer's acquire (`SEMAPHORE.ACQUIRE`, `PSEMAPHORE.ACQUIRE`, `COUNTDOWN.AWAIT`):
/// taken now if it can be and nobody is parked ahead, else parked when `block` is given, else
/// the refusal. A latch's wait only reads.
pub fn acquire_sync(ctx: &Ctx, args: &Args, key: &[u8], req: Request<&[u8]>, block: Option<i64>) -> Result<Reply> {
    let ahead = queued_ahead(ctx, key, &req);
    let mut store =
        if matches!(req, Request::Latch) { RedisStore::reader(ctx, args) } else { RedisStore::new(ctx, args) };
    let outcome = attempt_sync(&mut store, key, &req, ahead).map_err(|e| e.in_command(req.command()));
    drop(store);
    serve_now(ctx);
    match (outcome?, block) {
        (Attempt::Granted(reply), _) => {
            if matches!(req, Request::Permits { .. }) {
                super::reclaim::arm(ctx, &(ctx.selected_db(), key.to_vec()));
            }
            Ok(reply)
        }
        (Attempt::Refused(reply), block) => {
            stats::SYNC_REFUSED.inc();
            match block {
                Some(ms) => park(ctx, key, req.to_owned(), ms, reply),
                None => Ok(reply),
            }
        }
    }
}

/// Whether a new semaphore acquire on `key` must leave the permits to clients parked on it
/// (strict FIFO among the semaphores' waiters: a latch's waiter parked on the same name takes
/// no permit, so it is not ahead). A change not served yet (someone else's `INCRBY` the poll
/// has not seen) is served first, so the parked clients have what it freed before the newcomer
/// looks.
fn queued_ahead<O>(ctx: &Ctx, key: &[u8], req: &Request<O>) -> bool {
    if matches!(req, Request::Latch) || nobody_parked() {
        return false;
    }
    let id = (ctx.selected_db(), key.to_vec());
    let line = req.line();
    let parked = || with(|r| r.locks.get(&id).is_some_and(|q| q.lines().contains(&line))).unwrap_or(false);
    if !parked() {
        return false;
    }
    serve(ctx, &id);
    parked()
}
