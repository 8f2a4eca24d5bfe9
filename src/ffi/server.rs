//! Server-wide hooks: the module's allocator (counting what it holds), the `INFO lockmod`
//! section, and the command filter: it notices `CONFIG RESETSTAT`, and, while a lock has
//! parked clients or read holds are indexed, every command that may change one of them
//! behind the module's back (see `crate::watch`).

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_int;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

use super::str_bytes;
use crate::stats;
use crate::watch::{self, Keys};

/// Redis' allocator (so the module's memory shows in `used_memory` and `maxmemory` applies),
/// counting the bytes the module holds for `INFO lockmod`.
pub struct CountingAlloc;

// SAFETY: delegates every call to `RedisAlloc` unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // A load and a store, not a locked add: allocation happens on Redis' main thread.
        stats::MEMORY.store(stats::MEMORY.load(Relaxed).wrapping_add(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { RedisAlloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        stats::MEMORY.store(stats::MEMORY.load(Relaxed).wrapping_sub(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { RedisAlloc.dealloc(ptr, layout) }
    }
}

/// Registers the INFO section and the RESETSTAT filter. False if Redis refused either.
pub fn register(ctx: &redis_module::Context) -> bool {
    if raw::register_info_function(ctx.ctx, Some(on_info)) != raw::Status::Ok {
        return false;
    }
    // SAFETY: OnLoad context; the callback has the signature Redis expects.
    let filter = unsafe { api!(RedisModule_RegisterCommandFilter)(ctx.ctx, Some(on_command), 0) };
    !filter.is_null()
}

extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let fields = std::panic::catch_unwind(|| stats::info_fields(crate::blocking::parked_now() as u64));
    let Ok(fields) = fields else { return };
    // A section named after the module: `INFO lockmod`.
    if raw::add_info_section(ctx, None) != raw::Status::Ok {
        return;
    }
    for (name, value) in fields {
        raw::add_info_field_long_long(ctx, name, value);
    }
    // What the module subscribes to, so a test (or an operator) can check that ordinary
    // writes never call into it.
    let events = std::ffi::CString::new(super::events::KEYSPACE_EVENT_NAMES).unwrap_or_default();
    // SAFETY: live INFO context; Redis copies both strings.
    unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, c"keyspace_subscriptions".as_ptr(), events.as_ptr()) };
}

/// Runs before every command from a client, queued in `MULTI`, or called by a script.
/// Idle (nothing parked, nothing indexed) it costs an argument count and one thread-local
/// read, `CONFIG RESETSTAT` aside.
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
    if argc == 2 && arg(0).eq_ignore_ascii_case(b"config") && arg(1).eq_ignore_ascii_case(b"resetstat") {
        stats::reset();
    }
    if !watch::active() || argc < 1 {
        return;
    }
    let last = match watch::classify(arg(0)) {
        Keys::Ignore => return,
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
