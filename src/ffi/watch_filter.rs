//! The command filter that sees other clients' changes to what the module depends on.
//!
//! Redis runs every registered filter before every command from a client, queued in `MULTI`,
//! or called by a script; its own part of that (a context and a list walk) costs about 70
//! instructions per command even when the filter returns at once, some 1.5% of a `SET`. So the
//! filter is registered only while the read-hold index has entries (`crate::watch`) and
//! unregistered when it has none: otherwise, the module costs
//! other traffic no filter at all. An index no read unlock used for a while is dropped (see
//! `crate::hold_index::IDLE_MS`), so the filter's cost lasts as long as the index is of use.
//! `CONFIG RESETSTAT` is noticed here while registered, and by `INFO lockmod` otherwise
//! (`crate::stats`).

use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use super::str_bytes;
use crate::stats;
use crate::watch::{self, Keys};

/// The registered filter, or null.
static FILTER: AtomicPtr<raw::RedisModuleCommandFilter> = AtomicPtr::new(std::ptr::null_mut());
/// Commands filtered so far.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// The module was loaded (again): Redis dropped any filter of an earlier load.
pub fn reload() {
    FILTER.store(std::ptr::null_mut(), Relaxed);
}

/// Registers the filter (`on`) or unregisters it. Called when `crate::watch` turns active or
/// idle, before the state that needs the filter exists and after the last of it is gone. Safe
/// from inside the filter itself: Redis' list walk allows removing the element it is on.
pub fn set(on: bool) {
    let Some(ctx) = super::events::module_ctx() else { return };
    let current = FILTER.load(Relaxed);
    if on && current.is_null() {
        // SAFETY: the module's detached context; the callback has the signature Redis expects.
        let f = unsafe { api!(RedisModule_RegisterCommandFilter)(ctx.0, Some(on_command), 0) };
        if f.is_null() {
            super::log(c"warning", "lockmod: could not register the command filter");
        }
        FILTER.store(f, Relaxed);
    } else if !on && !current.is_null() {
        FILTER.store(std::ptr::null_mut(), Relaxed);
        // SAFETY: `current` is this module's live filter, unregistered once (Redis frees it).
        unsafe { api!(RedisModule_UnregisterCommandFilter)(ctx.0, current) };
    }
}

/// Whether the filter is registered (for `INFO lockmod`).
pub fn registered() -> bool {
    !FILTER.load(Relaxed).is_null()
}

extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: `fctx` is live for this call; argument strings are owned by the client.
    let argc = unsafe { api!(RedisModule_CommandFilterArgsCount)(fctx) };
    let arg = |i: c_int| -> &[u8] {
        // SAFETY: as above; `i` < `argc`.
        let s = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i) };
        if s.is_null() {
            &[]
        } else {
            str_bytes(s)
        }
    };
    if argc < 1 {
        return;
    }
    // Now and then, an index nobody uses goes (and with it this filter).
    let n = SEEN.load(Relaxed).wrapping_add(1);
    SEEN.store(n, Relaxed);
    if n.is_multiple_of(1024) {
        guarded(|| crate::hold_index::expire_idle(super::Ctx::now_ms()));
        if !watch::active() {
            return;
        }
    }
    let cmd = arg(0);
    let last = match watch::classify(cmd) {
        Keys::Ignore => {
            if argc == 2
                && cmd.len() == 6
                && cmd.eq_ignore_ascii_case(b"config")
                && arg(1).eq_ignore_ascii_case(b"resetstat")
            {
                stats::reset();
                stats::reset_seen_now();
            }
            return;
        }
        Keys::Exec => return guarded(on_exec),
        Keys::First => 1.min(argc - 1),
        Keys::All => argc - 1,
    };
    for i in 1..=last {
        let name = arg(i);
        if watch::is_watched(name) || (watch::indexed() && watch::looks_like_timeout_key(name)) {
            guarded(|| on_hit(name));
        }
    }
}

/// A command about to run names `name`, which a lock with parked clients or an index entry
/// depends on: drop the entry now (the command runs before anything could read it again) and
/// serve the lock from a 0 ms timer, after the command.
fn on_hit(name: &[u8]) {
    crate::hold_index::changed(name);
    if let Some(ctx) = super::events::module_ctx() {
        crate::blocking::changed(&ctx, None, name);
    }
}

/// `EXEC` runs commands filtered when they were queued, perhaps before what they change was
/// watched: drop the whole index and re-check every lock with parked clients, after it.
fn on_exec() {
    crate::hold_index::clear();
    if let Some(ctx) = super::events::module_ctx() {
        crate::blocking::recheck_all(&ctx);
    }
}

/// No panic may unwind into Redis from a filter.
fn guarded(f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        super::log(c"warning", "lockmod: internal error in the command filter");
    }
}
