//! Giving back a grant whose reply never reached its client (`answer`): the client was told
//! an error or went away, so it holds nothing, and what the module wrote for it is released
//! as the client itself would release it, through the same core function as the release
//! command: the lock's channel message published, the effects replicated, the lock served to
//! its next parked client right after.
//!
//! The release runs from a 0 ms timer: the grant comes back from a disconnect callback or
//! from Redis freeing an answer, no place to write. While writes are paused the timer leaves
//! its work for the pause's end (`paused`); on a replica it is dropped, as the grant is the
//! primary's to keep or release.

use std::cell::{Cell, RefCell};

use super::answer::{GiveBack, Undelivered};
use super::serve::serve;
use super::waiter::TimerData;
use crate::core::rwlock::Side;
use crate::core::{fair, permits, ratelimiter, reentrant, rwlock, semaphore, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

thread_local! {
    /// The grants to give back, in the order they came back.
    static DUE: RefCell<Vec<Undelivered>> = const { RefCell::new(Vec::new()) };
    /// The timer that gives them back is armed.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Gives `what` back from the 0 ms timer.
pub fn later(ctx: &Ctx, what: Undelivered) {
    DUE.with(|d| d.borrow_mut().push(what));
    if !ARMED.with(|a| a.replace(true)) {
        ctx.create_timer(0, TimerData::GiveBack);
    }
}

/// The timer fired: it is no longer armed.
pub fn fired() {
    ARMED.with(|a| a.set(false));
}

/// This server is a replica now: nothing may be written here.
pub fn clear() {
    DUE.with(|d| d.borrow_mut().clear());
}

/// Gives every due grant back, then serves its lock. The caller checked that the module may
/// write now.
pub fn run(ctx: &Ctx) {
    let due = DUE.with(|d| std::mem::take(&mut *d.borrow_mut()));
    for ((db, key), what) in due {
        if !ctx.select_db(db) {
            continue;
        }
        // A key of another type by now, or a hold already gone: nothing of the grant is left.
        if release(ctx, &key, &what).unwrap_or(false) {
            stats::GIVEN_BACK.inc();
        }
        serve(ctx, &(db, key));
    }
}

/// Releases `what` on `key` in the selected database, as the module's own upkeep: the grant
/// being undone is the module's write, made a moment ago with the client's permissions.
/// True if a hold or permits were released (a lease may have run out meanwhile).
fn release(ctx: &Ctx, key: &[u8], what: &GiveBack) -> crate::core::Result<bool> {
    let args = Args::empty();
    // Served right after, by `run`.
    let mut s = RedisStore::at(ctx, &args, Ctx::now_ms()).served_by_writer();
    // An unlock replies nil when the owner held nothing (any more).
    let released = |r: Reply| !matches!(r, Reply::Nil);
    match what {
        GiveBack::Lock { owner, lease } => reentrant::unlock(&mut s, key, owner, *lease, None).map(released),
        GiveBack::Read { owner, lease } => rwlock::unlock(&mut s, key, owner, Side::Read, *lease, None).map(released),
        GiveBack::Write { owner, lease } => rwlock::unlock(&mut s, key, owner, Side::Write, *lease, None).map(released),
        GiveBack::Fair { owner, lease } => fair::unlock(&mut s, key, owner, *lease, None).map(released),
        GiveBack::Semaphore { permits } => semaphore::release(&mut s, key, *permits).map(|_| true),
        // Whichever ids are still held: one whose lease ran out meanwhile is back already.
        GiveBack::Permits { ids } => {
            let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            permits::release_each(&mut s, key, &ids).map(|n| n > 0)
        }
        GiveBack::Rate { name, client, permits } => {
            ratelimiter::release(&mut s, name, client.as_deref(), *permits, Ctx::now_ms()).map(|_| true)
        }
    }
}
