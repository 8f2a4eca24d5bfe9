//! The filter's part that notes what may change this server's script cache
//! (`crate::redisson::cache`): `SCRIPT LOAD` and `SCRIPT FLUSH`, and the `EVAL`s left to
//! Redis, which cache their body (and, where Redis evicts scripts, may evict another).

use std::os::raw::c_int;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::{Fctx, READY};
use crate::core::parse_i64;
use crate::ffi::acl::filter_client;
use crate::ffi::str_bytes;
use crate::redisson::cache;
use crate::redisson::table;

/// `argv[i]`, if there.
///
/// # Safety
/// `fctx` must be the live filter context of this call, with `argc` arguments.
unsafe fn arg<'a>(fctx: Fctx, argc: c_int, i: c_int) -> Option<&'a [u8]> {
    if i >= argc {
        return None;
    }
    // SAFETY: `fctx` is live and `i < argc`; the string is the client's, alive for the call.
    let s = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i) };
    (!s.is_null()).then(|| str_bytes(s))
}

/// `SCRIPT ...` (whatever `lockmod.redisson-scripts` is: a flush queued in `MULTI` before it
/// is switched to `native` may run after): `LOAD` of a known body may add it; `FLUSH` removes
/// every script (now, or at its client's `EXEC` if queued).
///
/// # Safety
/// `fctx` must be the live filter context of this call, with `argc` arguments.
pub(in crate::ffi) unsafe fn on_script(fctx: Fctx, argc: c_int) {
    if !READY.load(Relaxed) {
        return;
    }
    // SAFETY: as this function's.
    let Some(sub) = (unsafe { arg(fctx, argc, 1) }) else { return };
    if sub.eq_ignore_ascii_case(b"flush") {
        // SAFETY: called within this filter call.
        cache::flushed(unsafe { filter_client(fctx) });
    } else if argc == 3 && sub.eq_ignore_ascii_case(b"load") {
        // SAFETY: as this function's.
        if let Some(row) = unsafe { arg(fctx, argc, 2) }.and_then(table::by_body) {
            // SAFETY: called, if at all, within this filter call.
            cache::may_load(row, || unsafe { filter_client(fctx) });
        }
    }
}

/// An `EVAL` or `EVAL_RO` the filter left to Redis. Redis caches its body once its key count
/// is valid, before it runs it (so even if it then fails). `row`: the body's table row if the
/// filter looked it up already.
///
/// # Safety
/// `fctx` must be the live filter context of this call, with `argc` arguments.
pub(super) unsafe fn eval_left_to_redis(fctx: Fctx, argc: c_int, row: Option<Option<usize>>) {
    // SAFETY: as this function's.
    let numkeys = unsafe { arg(fctx, argc, 2) }.and_then(parse_i64);
    if !numkeys.is_some_and(|n| n >= 0 && n <= i64::from(argc) - 3) {
        return;
    }
    // SAFETY: as this function's.
    let row = row.unwrap_or_else(|| unsafe { arg(fctx, argc, 1) }.and_then(table::by_body));
    if let Some(row) = row {
        // SAFETY: called, if at all, within this filter call.
        cache::may_load(row, || unsafe { filter_client(fctx) });
    }
    // SAFETY: called, if at all, within this filter call.
    cache::eval_may_create(|| unsafe { filter_client(fctx) });
}
