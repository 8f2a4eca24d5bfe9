//! The command filter's part that sees other clients' changes to what the read-hold index
//! depends on. `super::server`'s filter calls it only while `crate::watch` has something to
//! look for (the index has entries, or names are watched), so otherwise the module costs other
//! traffic one flag test. An index no read unlock used for a while is dropped (see
//! `crate::hold_index::IDLE_MS`), and with it this part's cost. `docs/benchmarks.md` part 7b
//! counts what each part costs other commands, in instructions.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use super::str_bytes;
use crate::watch::{self, Keys};

/// Commands looked at so far.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// An argument of the command, or None past the last one.
fn arg<'a>(fctx: *mut raw::RedisModuleCommandFilterCtx, i: c_int) -> Option<&'a [u8]> {
    // SAFETY: `fctx` is live for this filter call and its argument strings are owned by the
    // client; Redis answers NULL for a position past the last argument.
    let s = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i) };
    (!s.is_null()).then(|| str_bytes(s))
}

/// A command (named `cmd`, neither `EXEC` nor one `super::server` handles itself) is about to
/// run or be queued: drop the index entries and serve the parked locks its key arguments may
/// change. The usual command costs one argument fetch, a bit and a byte test on it
/// (`watch::may_matter`), and a bit test on its name (`watch::may_name_later_keys`); the
/// command is classified only when a key matters (so a read of a lock keeps its entry).
pub(super) fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx, cmd: &[u8]) {
    // Now and then, an index nobody uses goes (and with it this part's cost).
    let n = SEEN.load(Relaxed).wrapping_add(1);
    SEEN.store(n, Relaxed);
    if n.is_multiple_of(1024) {
        let mut active = true;
        guarded(|| active = expire_idle());
        if !active {
            return;
        }
    }
    // `GET`, the usual read, changes nothing: not even its key is fetched.
    if cmd.len() == 3 && cmd.eq_ignore_ascii_case(b"get") {
        return;
    }
    let Some(first) = arg(fctx, 1) else { return };
    if watch::may_matter(first) {
        guarded(|| on_first(cmd, first));
    }
    if watch::may_name_later_keys(cmd) {
        // SAFETY: `fctx` is live for this call.
        let argc = unsafe { api!(RedisModule_CommandFilterArgsCount)(fctx) };
        if argc > 2 {
            guarded(|| on_later(fctx, argc));
        }
    }
}

/// Runs `f`, logging a panic instead of letting it unwind into Redis: the filter's fast path
/// (argument fetches and bit tests) cannot panic, what follows a hit might.
#[inline(never)]
fn guarded(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        super::log(c"warning", "lockmod: internal error in the command filter");
    }
}

/// Drops an index nobody uses; whether anything is still watched.
fn expire_idle() -> bool {
    crate::hold_index::expire_idle(super::Ctx::now_ms());
    watch::active()
}

/// `argv[1]` of `cmd` may matter: unless the command only reads it, it is a hit.
#[inline(never)]
fn on_first(cmd: &[u8], first: &[u8]) {
    match watch::classify(cmd) {
        Keys::Ignore => {}
        Keys::Exec => on_exec(),
        Keys::First | Keys::All => on_hit(first),
    }
}

/// A command that changes keys named after `argv[1]`: each of them may be a hit.
#[inline(never)]
fn on_later(fctx: *mut raw::RedisModuleCommandFilterCtx, argc: c_int) {
    for name in (2..argc).filter_map(|i| arg(fctx, i)) {
        if watch::may_matter(name) {
            on_hit(name);
        }
    }
}

/// A command about to run names `name`, which a lock with parked clients or an index entry
/// depends on: drop the entry now (the command runs before anything could read it again) and
/// serve the lock from a 0 ms timer, after the command.
fn on_hit(name: &[u8]) {
    crate::hold_index::changed(name);
    if let Some(ctx) = super::events::module_ctx() {
        super::wake_ups::name_changed(&ctx, name);
    }
}

/// `EXEC` runs commands filtered when they were queued, perhaps before what they change was
/// watched: drop the whole index and re-check every lock with parked clients, after it.
pub(super) fn on_exec() {
    crate::hold_index::clear();
    if let Some(ctx) = super::events::module_ctx() {
        super::wake_ups::recheck_all(&ctx);
    }
}
