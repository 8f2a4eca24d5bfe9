//! Server-wide hooks: the module's allocator (counting what it holds) and the `INFO lockmod`
//! section, which also notices a `CONFIG RESETSTAT` that the command filter
//! (`super::watch_filter`, registered only while something is watched) did not see.

use std::alloc::{GlobalAlloc, Layout};
use std::os::raw::c_int;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::alloc::RedisAlloc;
use redis_module::raw;

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
        unsafe { RedisAlloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        stats::MEMORY.store(stats::MEMORY.load(Relaxed).wrapping_sub(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { RedisAlloc.dealloc(ptr, layout) }
    }
}

/// Registers the INFO section. False if Redis refused it.
pub fn register(ctx: &redis_module::Context) -> bool {
    COMMANDS.with(|c| c.borrow_mut().clear());
    raw::register_info_function(ctx.ctx, Some(on_info)) == raw::Status::Ok
}

thread_local! {
    /// `cmdstat_<name>` of every command the module registered.
    static COMMANDS: std::cell::RefCell<Vec<std::ffi::CString>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Remembers a command the module registered, whose calls `INFO commandstats` counts.
pub(super) fn note_command(name: &std::ffi::CStr) {
    let field = format!("cmdstat_{}", name.to_string_lossy().to_lowercase());
    if let Ok(field) = std::ffi::CString::new(field) {
        COMMANDS.with(|c| c.borrow_mut().push(field));
    }
}

/// Calls of the module's commands since the last `CONFIG RESETSTAT`, as `INFO commandstats`
/// counts them; None if it cannot be read.
fn commandstats_calls() -> Option<u64> {
    // SAFETY: a null context is allowed (no automatic memory); the data is freed below.
    let info = unsafe { api!(RedisModule_GetServerInfo)(std::ptr::null_mut(), c"commandstats".as_ptr()) };
    if info.is_null() {
        return None;
    }
    let total = COMMANDS.with(|c| {
        c.borrow()
            .iter()
            .map(|field| {
                // SAFETY: `info` is live; the returned C string is owned by it.
                let v = unsafe { api!(RedisModule_ServerInfoGetFieldC)(info, field.as_ptr()) };
                if v.is_null() {
                    return 0;
                }
                // SAFETY: a NUL-terminated string owned by `info`, alive until it is freed.
                let line = unsafe { std::ffi::CStr::from_ptr(v) }.to_bytes();
                let calls = line.split(|&b| b == b',').find_map(|kv| kv.strip_prefix(b"calls="));
                calls.and_then(crate::core::parse_i64).unwrap_or(0).max(0) as u64
            })
            .sum()
    });
    // SAFETY: `info` came from RM_GetServerInfo and is freed once.
    unsafe { api!(RedisModule_FreeServerInfo)(std::ptr::null_mut(), info) };
    Some(total)
}

extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    let fields = std::panic::catch_unwind(|| {
        let parked = crate::blocking::parked_now() as u64;
        // A reset the filter could not see (it is registered only while read holds are
        // indexed) shows as fewer calls of our commands in Redis' own statistics than we ran.
        if for_crash_report == 0 {
            if let Some(calls) = commandstats_calls() {
                stats::reset_happened(calls, parked);
            }
        }
        stats::info_fields(parked)
    });
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
