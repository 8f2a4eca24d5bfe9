//! `INFO lockmod`: the section's fields, gathered from the layers that count (`ffi` hands
//! this to Redis at load), and `CONFIG RESETSTAT` of the counters.

use crate::effects::stats::{self, Counter};
use crate::effects::wait_stats;
use crate::{blocking, ffi, redisson, watch};

/// The `INFO lockmod` fields, in order (Redis prefixes each with `lockmod_`).
pub fn info_fields() -> Vec<(&'static str, i64)> {
    let g = |c: &Counter| c.get() as i64;
    let mut fields = vec![
        ("acquired", g(&stats::ACQUIRED)),
        ("refused", g(&stats::REFUSED)),
        ("reentries", g(&stats::REENTRIES)),
        ("released", g(&stats::RELEASED)),
        ("forced", g(&stats::FORCED)),
        ("renewed", g(&stats::RENEWED)),
        ("blocked_now", blocking::parked_now() as i64),
        ("blocked_total", g(&stats::PARKED)),
        ("handoffs", g(&stats::HANDOFFS)),
        ("block_timeouts", g(&stats::TIMEOUTS)),
        ("block_disconnects", g(&stats::DISCONNECTS)),
        ("expired_while_held", g(&stats::EXPIRED_HELD)),
        ("serve_timers", g(&stats::SERVE_TIMERS)),
        ("memory_bytes", ffi::alloc::held_bytes()),
        ("indexed_read_holds", watch::hold_index::positions() as i64),
        ("watched_names", watch::names::watched() as i64),
        ("command_filter", i64::from(watch::active())),
    ];
    fields.extend(redisson::stats::info_fields());
    // The synchronizers' (issue 26), after every earlier field.
    fields.extend([
        ("sync_calls", g(&stats::SYNC_CALLS)),
        ("sync_granted", g(&stats::SYNC_GRANTED)),
        ("sync_refused", g(&stats::SYNC_REFUSED)),
        ("sync_blocked_now", blocking::parked_sync_now() as i64),
        ("sync_blocked_total", g(&stats::SYNC_PARKED)),
        ("sync_handoffs", g(&stats::SYNC_HANDOFFS)),
        ("permits_reclaimed", g(&stats::PERMITS_RECLAIMED)),
    ]);
    // The rate limiter's (issue 30). Its waits are served by the synchronizers' FIFO, so they
    // also count in sync_granted, sync_refused, sync_blocked_* and sync_handoffs.
    fields.extend([
        ("ratelimiter_calls", g(&stats::RATE_CALLS)),
        ("ratelimiter_granted", g(&stats::RATE_GRANTED)),
        ("ratelimiter_refused", g(&stats::RATE_REFUSED)),
        ("ratelimiter_blocked_now", blocking::parked_rate_now() as i64),
        ("ratelimiter_blocked_total", g(&stats::RATE_PARKED)),
        ("ratelimiter_handoffs", g(&stats::RATE_HANDOFFS)),
        ("ratelimiter_window_sums", g(&stats::RATE_WINDOW_SUMS)),
        ("ratelimiter_windows_remembered", crate::effects::rate_windows::remembered() as i64),
    ]);
    // Issue 29: the work of looking up a long command's own argument strings.
    fields.push(("args_probed", ffi::args_probed() as i64));
    // Grants whose reply was lost, given back (issue 29), after every earlier field.
    fields.push(("grants_given_back", g(&stats::GIVEN_BACK)));
    // Issue 37: how many locks are held and how many names have parked clients
    // (`LOCK.CONTENDED` lists them).
    fields.push(("held_locks", stats::held_now(ffi::Ctx::now_ms()) as i64));
    fields.push(("contended_names", blocking::contended_names() as i64));
    // Fencing eras (issue 35), after every earlier field.
    let (moved, events) = crate::core::lock::era::counts();
    fields.extend([
        ("fencing_era", crate::core::lock::era::era()),
        ("fencing_moving", i64::from(crate::core::lock::era::moving())),
        ("fencing_moved", moved as i64),
        ("fencing_events", events as i64),
    ]);
    // The node's era file: durable writes, failed reads or writes, the last write's µs.
    let (writes, errors, usec) = crate::effects::era::file::counts();
    fields.extend([
        ("fencing_era_file_writes", writes as i64),
        ("fencing_era_file_errors", errors as i64),
        ("fencing_era_file_last_usec", usec),
    ]);
    fields
}

/// The `INFO lockmod` dictionary fields, after the integer ones: how long parked clients
/// waited, per kind (`waits_<kind>:le_0.001=..,...,le_inf=..,count=..,sum_ms=..,gave_up=..`).
pub fn info_dicts() -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    wait_stats::info_fields()
}

/// `CONFIG RESETSTAT`: our counters reset with Redis' own.
pub fn reset() {
    stats::reset();
    wait_stats::reset();
    redisson::stats::reset();
    ffi::reset_args_probed();
    crate::core::lock::era::reset_counts();
    crate::effects::era::file::reset_counts();
}
