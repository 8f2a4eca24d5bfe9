//! Long module work reported to Redis' latency monitor (`LATENCY LATEST`, `LATENCY HISTORY`).
//!
//! Redis times commands itself, but not a module's timers or blocked-client callbacks: work
//! done there (cancelling thousands of fair waiters that disconnected together, a grant that
//! moves a long queue) would stall the server invisibly. Each such callback is timed and, at
//! or above `latency-monitor-threshold`, recorded under an event named `lockmod-*`.
//!
//! `RM_LatencyAddSample` compares with the threshold but records everything when it is 0,
//! which means "monitor off" for Redis itself; so the threshold is read (`CONFIG GET`, only
//! for work of a millisecond or more: rare) and nothing is recorded while the monitor is off.

use std::ffi::CStr;
use std::os::raw::c_char;
use std::time::Instant;

use redis_module::raw;

use super::RawCtx;

/// Runs `f`, then reports its duration under `event` if the latency monitor wants it.
pub fn timed<T>(ctx: RawCtx, event: &CStr, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    let ms = started.elapsed().as_millis().min(i64::MAX as u128) as i64;
    if should_record(ms, || threshold(ctx)) {
        // SAFETY: `event` is NUL-terminated; Redis copies the name when it first records it.
        unsafe { api!(RedisModule_LatencyAddSample)(event.as_ptr(), ms) };
    }
    out
}

/// Whether work of `ms` is recorded: Redis' own rule (`threshold && ms >= threshold`), with
/// the threshold read only for work that could pass it.
pub fn should_record(ms: i64, threshold: impl FnOnce() -> i64) -> bool {
    if ms < 1 {
        return false;
    }
    let t = threshold();
    t > 0 && ms >= t
}

/// `latency-monitor-threshold` in ms (0, "off", if it cannot be read).
fn threshold(ctx: RawCtx) -> i64 {
    // RM_Call reads the context's client: a blocked client's callback may have none (a
    // handle released without a client, or a client gone).
    // SAFETY: a live module context; RM_GetClientId checks for a missing client.
    if unsafe { api!(RedisModule_GetClientId)(ctx) } == 0 {
        return 0;
    }
    // SAFETY: a live module context (a timer's or a blocked client's); "cc" passes two
    // NUL-terminated strings. The reply, owned by us, is freed below; the element and the
    // string pointer into it are used only before that.
    unsafe {
        let reply = api!(RedisModule_Call)(
            ctx,
            c"CONFIG".as_ptr(),
            c"cc".as_ptr(),
            c"GET".as_ptr(),
            c"latency-monitor-threshold".as_ptr(),
        );
        if reply.is_null() {
            return 0;
        }
        let value = api!(RedisModule_CallReplyArrayElement)(reply, 1);
        let mut len = 0usize;
        let p: *const c_char =
            if value.is_null() { std::ptr::null() } else { api!(RedisModule_CallReplyStringPtr)(value, &mut len) };
        let t = if p.is_null() {
            0
        } else {
            let bytes = std::slice::from_raw_parts(p as *const u8, len);
            crate::core::parse_i64(bytes).unwrap_or(0)
        };
        api!(RedisModule_FreeCallReply)(reply);
        t
    }
}

// Test code only (compiled under cfg(test)): an unwrap, expect or panic here is a failed test,
// never reachable from the loaded module.
#[cfg(test)]
mod tests {
    use super::should_record;

    #[rustfmt::skip]
    #[test]
    fn work_is_recorded_only_with_the_monitor_on_and_at_its_threshold() {
        for (ms, threshold, want) in [
            (0,   1, false),   // under a millisecond: never (and no CONFIG GET)
            (5,   0, false),   // monitor off
            (5,  10, false),
            (10, 10, true),
            (250, 1, true),
        ] {
            assert_eq!(should_record(ms, || threshold), want, "{ms} ms, threshold {threshold}");
        }
    }

    #[test]
    fn the_threshold_is_not_read_for_work_under_a_millisecond() {
        assert!(!should_record(0, || panic!("read the threshold")));
    }
}
