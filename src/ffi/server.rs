//! Server-wide hooks: the module's allocator (counting what it holds), the `INFO lockmod`
//! section, and the module's one command filter.
//!
//! Redis runs every registered filter before every command from a client, queued in `MULTI`,
//! or called by a script; its own part of that (a context and a list walk) costs about 70
//! instructions per filter per command on the whole server, even when the filter returns at
//! once. So the module registers exactly one, which reads `argv[0]` once and dispatches by its
//! first byte, length and name to what needs it:
//! - `ACL` and `EXEC`: always (`crate::caller` caches ACL verdicts per user);
//! - `CONFIG RESETSTAT`: always (our counters reset with Redis' own);
//! - `EVAL`/`EVALSHA`/`EVAL_RO`: only under `lockmod.redisson-scripts native`
//!   (`super::filter`); `SCRIPT` (what the script cache holds, for it): always;
//! - any other command's keys: only while the read-hold index has entries
//!   (`crate::watch`, `super::watch_filter`).

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::str_bytes;
use crate::stats;

/// Redis' allocator (so the module's memory shows in `used_memory` and `maxmemory` applies),
/// counting the bytes the module holds for `INFO lockmod`.
pub struct CountingAlloc;

// SAFETY: delegates every call to `RedisAlloc` unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // A load and a store, not a locked add: allocation happens on Redis' main thread.
        stats::MEMORY.store(stats::MEMORY.load(Relaxed).wrapping_add(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { redis_module::alloc::RedisAlloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        stats::MEMORY.store(stats::MEMORY.load(Relaxed).wrapping_sub(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { redis_module::alloc::RedisAlloc.dealloc(ptr, layout) }
    }
}

/// Registers the INFO section and the command filter. False if Redis refused either.
pub fn register(ctx: &redis_module::Context) -> bool {
    if raw::register_info_function(ctx.ctx, Some(on_info)) != raw::Status::Ok {
        return false;
    }
    // SAFETY: OnLoad context; the callback has the signature Redis expects. Not NOSELF: the
    // index must see what a script the module runs itself writes (`super::filter` skips its
    // own rewrite there instead).
    let filter = unsafe { api!(RedisModule_RegisterCommandFilter)(ctx.ctx, Some(on_command), 0) };
    !filter.is_null()
}

extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let fields = catch_unwind(|| stats::info_fields(super::wake_ups::parked_now() as u64));
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
    let events = std::ffi::CString::new(super::events::keyspace_subscriptions()).unwrap_or_default();
    // SAFETY: live INFO context; Redis copies both strings.
    unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, c"keyspace_subscriptions".as_ptr(), events.as_ptr()) };
}

/// The module's only command filter. Every name it acts on itself starts with `a` (`ACL`), `c`
/// (`CONFIG`) or `e` (`EXEC`, `EVAL`, `EVALSHA`, `EVAL_RO`), or is `SCRIPT` (six letters from
/// `s`); any other command (`SET`, `GET`, `HSET`, ...) costs one argument fetch and a byte
/// test (two for a six-letter `s...`), and goes to `super::watch_filter` only while something
/// is watched.
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: `fctx` is live for this call; Redis answers NULL past the last argument (here,
    // for a command without arguments), and the argument strings are owned by the client.
    let cmd = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, 0) };
    if cmd.is_null() {
        return;
    }
    let name = str_bytes(cmd);
    let special = match name.first().map(|b| b | 0x20) {
        Some(b'a' | b'c' | b'e') => true,
        Some(b's') => name.len() == 6,
        _ => false,
    };
    if special {
        on_some(fctx, name);
    } else if crate::watch::active() {
        // Its fast path cannot panic; it guards what follows a hit itself.
        super::watch_filter::on_command(fctx, name);
    }
}

/// A command whose name starts with `a`, `c` or `e`, or a six-letter one starting with `s`, out
/// of line (the usual command pays no
/// stack frame for it), a panic logged rather than unwound into Redis.
#[inline(never)]
fn on_some(fctx: *mut raw::RedisModuleCommandFilterCtx, name: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| on_special(fctx, name))).is_err() {
        super::log(c"warning", "lockmod: internal error in the command filter");
    }
}

/// A command whose name starts with `a`, `c` or `e`, or a six-letter one starting with `s`:
/// dispatched by its length and name.
fn on_special(fctx: *mut raw::RedisModuleCommandFilterCtx, name: &[u8]) {
    // SAFETY: `fctx` is live for this call.
    let argc = unsafe { api!(RedisModule_CommandFilterArgsCount)(fctx) };
    let arg1 = || {
        // SAFETY: as above; NULL past the last argument.
        let s = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, 1) };
        (!s.is_null()).then(|| str_bytes(s))
    };
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    match name.len() {
        3 if is(b"acl") => {
            // SAFETY: called, if at all, within this filter call.
            crate::acl::on_command(name, arg1(), || unsafe { super::acl::filter_client(fctx) });
        }
        4 if is(b"exec") => {
            // SAFETY: as above.
            crate::acl::on_command(name, None, || unsafe { super::acl::filter_client(fctx) });
            if crate::watch::active() {
                super::watch_filter::on_exec();
            }
            if crate::core::config::redisson_native() {
                // SAFETY: as above.
                crate::redisson::cache::on_exec(|| unsafe { super::acl::filter_client(fctx) });
            }
        }
        6 if argc == 2 && is(b"config") => {
            if arg1().is_some_and(|s| s.eq_ignore_ascii_case(b"resetstat")) {
                stats::reset();
            }
        }
        // Whatever the setting: a flush queued before `native` is switched on runs after.
        6 if is(b"script") => {
            // SAFETY: `fctx` is live.
            unsafe { super::filter::on_script(fctx, argc) };
        }
        4 | 7 if crate::core::config::redisson_native() && (is(b"eval") || is(b"evalsha") || is(b"eval_ro")) => {
            use super::filter::Form;
            let form = if name.len() == 4 {
                Form::Eval
            } else if name[4] == b'_' {
                Form::EvalRo
            } else {
                Form::EvalSha
            };
            // SAFETY: `fctx` is live; nothing else holds its arguments.
            unsafe { super::filter::rewrite(fctx, argc, form) };
        }
        _ => {
            if crate::watch::active() {
                super::watch_filter::on_command(fctx, name);
            }
        }
    }
}
