//! Giving back a grant whose reply never reached its client (`answer`): the client was told
//! an error or went away, so it holds nothing, and what the module wrote for it is released
//! as the client itself would release it, through the same core function as the release
//! command: the lock's channel message published, the effects replicated, the lock served to
//! its next parked client right after.
//!
//! No command may see the grant after the one that dropped its reply: [`now`] releases it in
//! the disconnect callback itself, which Redis runs inside that command (`CLIENT KILL`,
//! `CLIENT UNBLOCK ... ERROR`, `EXEC`) or where it handles a closed connection, before anything
//! else runs. The writes are the module's in that command's execution unit: they replicate
//! with it (inside `EXEC`'s transaction too). Where that moment is no place to write:
//! - a script is running (Redis handles disconnects while a script is busy): the release waits
//!   for the script's end, as a job of that execution unit ([`Ctx::after_this_unit`], Redis
//!   7.2+), so that the script's reads hold still and no command runs in between; on Redis 7.0,
//!   which has no such jobs, for the 0 ms timer;
//! - writes are paused, or the server loads: the release waits for writes to resume (`paused`),
//!   and until then the module's `*.HOLDS` do not count the hold ([`held_back`]): the libraries
//!   settle a lost reply with them, and must not read "granted" for a grant that goes back;
//! - a replica: dropped, as the grant is the primary's to keep or release.

use std::cell::{Cell, RefCell};

use super::answer::{GiveBack, Undelivered};
use super::paused::{self, Gate};
use super::serve::serve;
use super::waiter::TimerData;
use crate::core::lock::rwlock::Side;
use crate::core::lock::{fair, reentrant, rwlock};
use crate::core::rate::limiter;
use crate::core::sync::{permits, semaphore};
use crate::core::Reply;
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

thread_local! {
    /// The grants to give back once the module may write, in the order they came back.
    static DUE: RefCell<Vec<Undelivered>> = const { RefCell::new(Vec::new()) };
    /// The timer that gives them back is armed.
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// Gives `what` back now, from the callback that learned its reply is dropped; or as soon as
/// the module may write (see the file's notes).
pub fn now(ctx: &Ctx, what: Undelivered) {
    match paused::gate(ctx) {
        Gate::Open if ctx.in_script() => {
            DUE.with(|d| d.borrow_mut().push(what));
            if !ctx.after_this_unit(after_unit) {
                arm(ctx);
            }
        }
        Gate::Open => give_back(ctx, what),
        // The poll that waits for writes to resume runs `run` (`timers`).
        Gate::Later => DUE.with(|d| d.borrow_mut().push(what)),
        Gate::Never => {}
    }
}

/// Gives `what` back from the 0 ms timer.
pub fn later(ctx: &Ctx, what: Undelivered) {
    DUE.with(|d| d.borrow_mut().push(what));
    arm(ctx);
}

fn arm(ctx: &Ctx) {
    if !ARMED.with(|a| a.replace(true)) {
        ctx.create_timer(0, TimerData::GiveBack);
    }
}

/// The job of [`now`] at the end of a script's execution unit.
fn after_unit(ctx: &Ctx) {
    match paused::gate(ctx) {
        Gate::Open => run(ctx),
        Gate::Later => {}
        Gate::Never => clear(),
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
    for what in due {
        give_back(ctx, what);
    }
}

/// What `owner` holds of `key` (in the selected database) only until a give-back waiting for
/// writes releases it: the holds of a reentrant or fair lock, the read and the write holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldBack {
    pub holds: i64,
    pub reads: i64,
    pub writes: i64,
}

/// See [`HeldBack`]. Nothing (and no look at the context) while no give-back waits.
pub fn held_back(ctx: &Ctx, key: &[u8], owner: &[u8]) -> HeldBack {
    if DUE.with(|d| d.borrow().is_empty()) {
        return HeldBack::default();
    }
    let db = ctx.selected_db();
    DUE.with(|d| count_held_back(&d.borrow(), db, key, owner))
}

/// What of `due` gives back `owner`'s holds of `key` in database `db`.
fn count_held_back(due: &[Undelivered], db: i32, key: &[u8], owner: &[u8]) -> HeldBack {
    let mut back = HeldBack::default();
    for ((in_db, k), what) in due {
        if *in_db != db || k != key {
            continue;
        }
        match what {
            GiveBack::Lock { owner: o, .. } | GiveBack::Fair { owner: o, .. } if o == owner => back.holds += 1,
            GiveBack::Read { owner: o, .. } if o == owner => back.reads += 1,
            GiveBack::Write { owner: o, .. } if o == owner => back.writes += 1,
            _ => {}
        }
    }
    back
}

/// Releases `what` and serves its lock, in the lock's database, then selects the context's
/// own again (a disconnect callback's context is the client's, which may live on).
fn give_back(ctx: &Ctx, ((db, key), what): Undelivered) {
    let was = ctx.selected_db();
    if !ctx.select_db(db) {
        return;
    }
    // A key of another type by now, or a hold already gone: nothing of the grant is left.
    if release(ctx, &key, &what).unwrap_or(false) {
        stats::GIVEN_BACK.inc();
    }
    serve(ctx, &(db, key));
    ctx.select_db(was);
}

/// Releases `what` on `key` in the selected database, as the module's own upkeep: the grant
/// being undone is the module's write, made a moment ago with the client's permissions.
/// True if a hold or permits were released (a lease may have run out meanwhile).
fn release(ctx: &Ctx, key: &[u8], what: &GiveBack) -> crate::core::Result<bool> {
    let args = Args::empty();
    // Served right after, by `give_back`.
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
            limiter::release(&mut s, name, client.as_deref(), *permits, Ctx::now_ms()).map(|_| true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owners_holds_of_that_key_in_that_database_are_held_back() {
        let b = |s: &str| s.as_bytes().to_vec();
        let due: Vec<Undelivered> = vec![
            ((0, b("m")), GiveBack::Lock { owner: b("w"), lease: 1 }),
            ((0, b("m")), GiveBack::Fair { owner: b("w"), lease: 1 }),
            ((0, b("m")), GiveBack::Lock { owner: b("x"), lease: 1 }),
            ((1, b("m")), GiveBack::Lock { owner: b("w"), lease: 1 }),
            ((0, b("n")), GiveBack::Lock { owner: b("w"), lease: 1 }),
            ((0, b("rw")), GiveBack::Read { owner: b("w"), lease: 1 }),
            ((0, b("rw")), GiveBack::Write { owner: b("w"), lease: 1 }),
            ((0, b("m")), GiveBack::Semaphore { permits: 1 }),
        ];
        assert_eq!(count_held_back(&due, 0, b"m", b"w"), HeldBack { holds: 2, reads: 0, writes: 0 });
        assert_eq!(count_held_back(&due, 0, b"rw", b"w"), HeldBack { holds: 0, reads: 1, writes: 1 });
        assert_eq!(count_held_back(&due, 2, b"m", b"w"), HeldBack::default());
        assert_eq!(count_held_back(&[], 0, b"m", b"w"), HeldBack::default());
    }
}
