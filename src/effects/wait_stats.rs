//! How long parked clients waited, per kind of request (`core::wait_times`), shown by
//! `INFO lockmod` as one dictionary field per kind and reset by `CONFIG RESETSTAT`.
//!
//! Recorded by the wake-up path once per wait, when the parked client leaves: never on the
//! path of an acquire that does not park.

use std::cell::RefCell;

use crate::core::wait_times::{AllWaitTimes, WaitKind};

thread_local! {
    // Redis runs every module callback, `INFO` included, on its main thread.
    static WAITS: RefCell<AllWaitTimes> = RefCell::default();
}

/// A parked client of `kind` left after `waited_ms`, with what it asked for (`granted`) or
/// without.
pub fn ended(kind: WaitKind, waited_ms: i64, granted: bool) {
    WAITS.with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            let w = w.of(kind);
            if granted {
                w.granted(waited_ms);
            } else {
                w.gave_up();
            }
        }
    });
}

/// The `INFO lockmod` dictionary fields: `waits_<kind>` with its cumulative buckets, `count`,
/// `sum_ms` and `gave_up`, for every kind, waited on or not (a series that comes and goes
/// reads as a reset).
pub fn info_fields() -> Vec<(&'static str, Vec<(&'static str, i64)>)> {
    let w = WAITS.with(|w| w.try_borrow().map(|w| *w).unwrap_or_default());
    WaitKind::ALL.iter().map(|&k| (k.info_field(), w.get(k).fields())).collect()
}

/// `CONFIG RESETSTAT`: every histogram back to empty.
pub fn reset() {
    WAITS.with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            *w = AllWaitTimes::default();
        }
    });
}
