//! Finding the expirable semaphores whose leases the module did not write, so that their
//! reclaim timer (`super::arm`) is armed too: every permit leased comes back at its lease
//! end, and the channel hears of it, whoever leased it and whatever happened since.
//!
//! The module's own commands arm the timer as they lease. Two things can leave a lease with no
//! timer, and each is found here:
//! - **The keyspace was replaced or changed hands**: a restart from the RDB or the AOF, `DEBUG
//!   RELOAD`, `SWAPDB`, a replica promoted to primary (a replica reclaims nothing, so it arms
//!   nothing). Then every database is walked ([`scan_all`]), [`BUDGET`] keys per tick of a 1 ms
//!   timer, for lease zsets (`...:timeout`): about 1 s per million keys, the server answering
//!   clients between ticks. A lease that ends before the walk reaches it comes back when found.
//! - **Someone else wrote a lease**: Redisson's Lua (scripts off, or a body left to Lua), a
//!   plain `ZADD`. The command filter reports a `...:timeout` key that a script names, and,
//!   once leases were seen on this server, one that a `ZADD` (from a client, queued in
//!   `MULTI`, or called by a script) writes ([`noticed`]; `crate::ffi::filter`); a 0 ms timer
//!   looks at it after the command ran. A command queued in `MULTI` ran only at `EXEC`: what
//!   was looked at too early is looked at again after the next `EXEC` ([`on_exec`]).
//!
//! A zset found is a semaphore's only if its name is one `permit_timeouts` makes, the count
//! beside it is an integer and its earliest lease is held by a 16-byte id
//! (`core::sync::permits::has_leases`); else nothing is armed and nothing written. The look only
//! reads; the reclaim it arms writes only when `crate::blocking::paused::gate` allows, and a
//! replica arms nothing.

use std::cell::RefCell;
use std::collections::VecDeque;

use crate::blocking::waiter::{TimerData, TimerId};
use crate::core::sync::names::names_of_permit_timeouts;
use crate::core::sync::permits;
use crate::effects::RedisStore;
use crate::ffi::scan::KeysWalk;
use crate::ffi::{Args, Ctx, KeyKind};

/// Keys walked per tick (a few ms of work at most).
pub const BUDGET: usize = 2_000;
/// The interval between ticks of a walk.
const TICK_MS: i64 = 1;
/// The most `ZADD`s remembered between ticks, and looked at again after an `EXEC`.
const MAX_NOTICED: usize = 1_024;
/// The last byte of every lease zset's name (`:timeout`).
const SUFFIX: &[u8] = b":timeout";

#[derive(Default)]
struct Find {
    /// The walk in progress: the database and where it is.
    walk: Option<KeysWalk>,
    /// Lease zsets named by a `ZADD` since the last tick (in a database the filter does not
    /// know).
    noticed: Vec<Vec<u8>>,
    /// Those looked at with nothing found: perhaps queued in a `MULTI` not yet run.
    early: VecDeque<Vec<u8>>,
    timer: Option<TimerId>,
}

thread_local! {
    // Redis runs every module callback on its main thread.
    static FIND: RefCell<Find> = RefCell::default();
}

fn with<T>(f: impl FnOnce(&mut Find) -> T) -> Option<T> {
    FIND.with(|r| r.try_borrow_mut().ok().map(|mut r| f(&mut r)))
}

/// Arms the tick after `ms`, unless armed.
fn arm(ctx: &Ctx, ms: i64) {
    if with(|f| f.timer.is_none()).unwrap_or(false) {
        let t = ctx.create_timer(ms, TimerData::ReclaimFind);
        with(|f| f.timer = Some(t));
    }
}

/// Walks every database from the start (a walk under way starts again: the keyspace it was
/// walking was replaced). The first step runs now (only reads and arms timers): a small
/// keyspace is walked at once and leaves no timer behind (a module with a timer pending cannot
/// be unloaded); a replica leaves it to its tick, which drops it.
pub fn scan_all(ctx: &Ctx) {
    with(|f| f.walk = Some(KeysWalk::new()));
    let previous = ctx.selected_db();
    let more = ctx.is_replica() || ctx.is_loading() || walk(ctx);
    ctx.select_db(previous);
    if more {
        arm(ctx, 0);
    }
}

/// A `ZADD` to `key`, a name ending in `:timeout`, is about to run (the command filter).
pub fn noticed(ctx: &Ctx, key: &[u8]) {
    let new = with(|f| {
        let new = f.noticed.len() < MAX_NOTICED && !f.noticed.iter().any(|k| k == key);
        if new {
            f.noticed.push(key.to_vec());
        }
        new
    })
    .unwrap_or(false);
    if new {
        arm(ctx, 0);
    }
}

/// `EXEC`: the `ZADD`s queued in its transaction run now; look again at those looked at early.
pub fn on_exec(ctx: &Ctx) {
    let again = with(|f| {
        let early: Vec<Vec<u8>> = f.early.drain(..).collect();
        for k in early {
            if f.noticed.len() < MAX_NOTICED && !f.noticed.contains(&k) {
                f.noticed.push(k);
            }
        }
        !f.noticed.is_empty()
    })
    .unwrap_or(false);
    if again {
        arm(ctx, 0);
    }
}

/// The tick's timer fired: it is no longer armed.
pub(in crate::blocking) fn fired() {
    with(|f| f.timer = None);
}

/// The tick, on a primary: looks at the `ZADD`s noticed, then walks on; re-arms while a walk
/// is under way. (Reads only: the caller has asked the write gate all the same, so that no
/// lease is looked at while a replica or a loading server has the keyspace.)
pub(in crate::blocking) fn tick(ctx: &Ctx) {
    let noticed = with(|f| std::mem::take(&mut f.noticed)).unwrap_or_default();
    for key in noticed {
        if !look_everywhere(ctx, &key) {
            with(|f| {
                if f.early.len() == MAX_NOTICED {
                    f.early.pop_front();
                }
                f.early.push_back(key);
            });
        }
    }
    if walk(ctx) {
        arm(ctx, TICK_MS);
    }
}

/// A replica arms nothing (or the module was loaded again): forget the work.
pub fn clear() {
    with(|f| {
        f.walk = None;
        f.noticed.clear();
        f.early.clear();
    });
}

/// The module was loaded again: no timer of an earlier load is pending.
pub fn reload() {
    with(|f| *f = Find::default());
}

/// Writes resumed after a pause (or loading ended): the work left goes on.
pub(in crate::blocking) fn resume(ctx: &Ctx) {
    if with(|f| f.walk.is_some() || !f.noticed.is_empty()).unwrap_or(false) {
        arm(ctx, 0);
    }
}

/// One step of the walk (at most [`BUDGET`] keys, through as many empty databases as come
/// next); true while there is more.
fn walk(ctx: &Ctx) -> bool {
    let Some(mut walk) = with(|f| f.walk.take()).flatten() else { return false };
    let mut found = Vec::new();
    let Some(db) = walk.step(ctx, BUDGET, |name| {
        if name.len() > SUFFIX.len() && name.ends_with(SUFFIX) {
            found.push(name.to_vec());
        }
    }) else {
        // Past the last database: the walk is over.
        return false;
    };
    for key in found {
        look(ctx, db, &key);
    }
    // A walk started again meanwhile (a look cannot, but keep the newer one).
    with(|f| {
        if f.walk.is_none() {
            f.walk = Some(walk);
        }
    });
    true
}

/// Looks at the lease zset `key` in every database that has keys (the filter does not know
/// the client's); true if a semaphore was found.
fn look_everywhere(ctx: &Ctx, key: &[u8]) -> bool {
    let mut found = false;
    let mut db = 0;
    while ctx.select_db(db) {
        if ctx.db_size() > 0 {
            found |= look(ctx, db, key);
        }
        db += 1;
    }
    found
}

/// Arms the reclaim timer of the semaphore whose leases the zset `key` (in `db`, selected)
/// holds, if it is one; true if so.
fn look(ctx: &Ctx, db: i32, key: &[u8]) -> bool {
    let name = ctx.string(key);
    if ctx.open_key(name.as_ref(), false).kind() != KeyKind::Zset {
        return false;
    }
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms());
    // `{x}:timeout` may be the zset of `x` or of `{x}`: the one whose count exists (both: each
    // is armed, and the first to fire reclaims).
    let names: Vec<Vec<u8>> =
        names_of_permit_timeouts(key).into_iter().filter(|n| permits::has_leases(&mut store, n)).collect();
    drop(store);
    for n in &names {
        super::arm(ctx, &(db, n.clone()));
    }
    !names.is_empty()
}
