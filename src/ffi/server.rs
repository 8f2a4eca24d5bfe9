//! Server-wide hooks: the module's allocator (counting what it holds), the `INFO lockmod`
//! section, and the command filter that notices `CONFIG RESETSTAT` and ACL changes.

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_int;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

use super::str_bytes;
use crate::stats;

/// Redis' allocator (so the module's memory shows in `used_memory` and `maxmemory` applies),
/// counting the bytes the module holds for `INFO lockmod`.
pub struct CountingAlloc;

// SAFETY: delegates every call to `RedisAlloc` unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        stats::MEMORY.fetch_add(layout.size() as i64, Relaxed);
        // SAFETY: same contract as ours.
        unsafe { RedisAlloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        stats::MEMORY.fetch_sub(layout.size() as i64, Relaxed);
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
}

/// Runs before every command (and before MULTI queues one): resets our counters on
/// `CONFIG RESETSTAT`, as Redis resets its own, and tells `caller` of `ACL` changes and `EXEC`s.
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: `fctx` is live for this call; argument strings are owned by the client.
    unsafe {
        let argc = api!(RedisModule_CommandFilterArgsCount)(fctx);
        let cmd = api!(RedisModule_CommandFilterArgGet)(fctx, 0);
        if argc < 1 || cmd.is_null() {
            return;
        }
        let name = str_bytes(cmd);
        let (acl, exec) = (name.eq_ignore_ascii_case(b"acl"), name.eq_ignore_ascii_case(b"exec"));
        let config = argc == 2 && name.eq_ignore_ascii_case(b"config");
        if !(acl || exec || config) {
            return;
        }
        let sub = if argc >= 2 { api!(RedisModule_CommandFilterArgGet)(fctx, 1) } else { std::ptr::null_mut() };
        let sub = (!sub.is_null()).then(|| str_bytes(sub));
        if acl || exec {
            // SAFETY: called, if at all, within this filter call.
            crate::caller::on_command(name, sub, || unsafe { super::acl::filter_client(fctx) });
        }
        if config && sub.is_some_and(|s| s.eq_ignore_ascii_case(b"resetstat")) {
            stats::reset();
        }
    }
}
