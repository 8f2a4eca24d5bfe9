//! The filter's part that notes what may change this server's script cache (`super::cache`):
//! `SCRIPT LOAD` and `SCRIPT FLUSH`, and the `EVAL`s left to Redis, which cache their body
//! (and, where Redis evicts scripts, may evict another).

use std::sync::atomic::Ordering::Relaxed;

use super::strings::READY;
use super::{cache, table};
use crate::core::parse_i64;
use crate::ffi::filter::FilterCall;

/// `SCRIPT ...` (whatever `lockmod.redisson-scripts` is: a flush queued in `MULTI` before it
/// is switched to `native` may run after): `LOAD` of a known body may add it; `FLUSH` removes
/// every script (now, or at its client's `EXEC` if queued).
pub fn on_script(call: FilterCall) {
    if !READY.load(Relaxed) {
        return;
    }
    let argc = call.argc();
    let Some(sub) = call.arg(1) else { return };
    if sub.eq_ignore_ascii_case(b"flush") {
        cache::flushed(call.client());
    } else if argc == 3 && sub.eq_ignore_ascii_case(b"load") {
        if let Some(row) = call.arg(2).and_then(table::by_body) {
            cache::may_load(row, || call.client());
        }
    }
}

/// An `EVAL` or `EVAL_RO` the filter left to Redis. Redis caches its body once its key count
/// is valid, before it runs it (so even if it then fails). `row`: the body's table row if the
/// filter looked it up already.
pub(super) fn eval_left_to_redis(call: FilterCall, row: Option<Option<usize>>) {
    let argc = call.argc() as i64;
    let numkeys = call.arg(2).and_then(parse_i64);
    if !numkeys.is_some_and(|n| n >= 0 && n <= argc - 3) {
        return;
    }
    let row = row.unwrap_or_else(|| call.arg(1).and_then(table::by_body));
    if let Some(row) = row {
        cache::may_load(row, || call.client());
    }
    cache::eval_may_create(|| call.client());
}
