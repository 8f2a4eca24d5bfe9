//! The command filter's part that sees other clients' changes to what the read-hold index
//! depends on. `crate::ffi::filter` calls it only while something is watched (the index has
//! entries, or names are watched: `ffi::filter::watching`), so otherwise the module costs
//! other traffic one flag test. An index no read unlock used for a while is dropped (see
//! `super::hold_index::IDLE_MS`), and with it this part's cost. `docs/benchmarks.md` part 7b
//! counts what each part costs other commands, in instructions.
//!
//! What a hit means for parked clients is the wake-up path's (`crate::blocking`), above this
//! module: the caller passes it in ([`Hits`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::classify::{classify, may_name_later_keys, Keys};
use super::hold_index;
use super::names::{active, may_matter};
use crate::ffi::filter::FilterCall;
use crate::ffi::{log, Ctx};

/// What a hit means beyond the index: the wake-up path's, passed in by the caller.
pub struct Hits {
    /// A command about to run names this key: serve the parked locks it may change.
    pub changed: fn(&[u8]),
    /// Commands queued earlier run now (`EXEC`): re-check every lock with parked clients.
    pub all_changed: fn(),
}

/// Commands looked at so far.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// A command (named `cmd`, neither `EXEC` nor one the filter handles itself) is about to run
/// or be queued: drop the index entries its key arguments may change, and tell `hit` of each
/// name that matters (the wake-up path serves the parked locks it may change). The usual
/// command costs one argument fetch, a bit and a byte test on it (`names::may_matter`), and a
/// bit test on its name (`classify::may_name_later_keys`); the command is classified only when
/// a key matters (so a read of a lock keeps its entry).
pub fn on_command(call: FilterCall, cmd: &[u8], hit: &Hits) {
    // Now and then, an index nobody uses goes (and with it this part's cost).
    let n = SEEN.load(Relaxed).wrapping_add(1);
    SEEN.store(n, Relaxed);
    if n.is_multiple_of(1024) {
        let mut still = true;
        guarded(|| still = expire_idle());
        if !still {
            return;
        }
    }
    // `GET`, the usual read, changes nothing: not even its key is fetched.
    if cmd.len() == 3 && cmd.eq_ignore_ascii_case(b"get") {
        return;
    }
    let Some(first) = call.arg(1) else { return };
    if may_matter(first) {
        guarded(|| on_first(cmd, first, hit));
    }
    if may_name_later_keys(cmd) {
        let argc = call.argc();
        if argc > 2 {
            guarded(|| on_later(call, argc, hit));
        }
    }
}

/// Runs `f`, logging a panic instead of letting it unwind into Redis: the filter's fast path
/// (argument fetches and bit tests) cannot panic, what follows a hit might.
#[inline(never)]
fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        log(c"warning", "lockmod: internal error in the command filter");
    }
}

/// Drops an index nobody uses; whether anything is still watched.
fn expire_idle() -> bool {
    hold_index::expire_idle(Ctx::now_ms());
    active()
}

/// `argv[1]` of `cmd` may matter: unless the command only reads it, it is a hit.
#[inline(never)]
fn on_first(cmd: &[u8], first: &[u8], hit: &Hits) {
    match classify(cmd) {
        Keys::Ignore => {}
        Keys::Exec => {
            on_exec();
            (hit.all_changed)();
        }
        Keys::First | Keys::All => on_hit(first, hit),
    }
}

/// A command that changes keys named after `argv[1]`: each of them may be a hit.
#[inline(never)]
fn on_later(call: FilterCall, argc: usize, hit: &Hits) {
    for name in (2..argc).filter_map(|i| call.arg(i)) {
        if may_matter(name) {
            on_hit(name, hit);
        }
    }
}

/// A command about to run names `name`, which a lock with parked clients or an index entry
/// depends on: drop the entry now (the command runs before anything could read it again),
/// then `hit` (which serves the lock from a 0 ms timer, after the command).
fn on_hit(name: &[u8], hit: &Hits) {
    hold_index::changed(name);
    (hit.changed)(name);
}

/// `EXEC` runs commands filtered when they were queued, perhaps before what they change was
/// watched: drop the whole index (the caller re-checks every lock with parked clients, after
/// it).
pub fn on_exec() {
    hold_index::clear();
}
