//! Durations from the caller, made safe: no `Duration` ever panics here (deadlines by
//! `checked_add`, sums saturating), and a time the server cannot express is taken as "no
//! limit", as tokio's timers take `Duration::MAX` (the Rust API guidelines: no panic on any
//! argument).
//!
//! The module takes a time in ms whose deadline from now fits an `i64` of ms (Redis' `SET ...
//! PX` rule). [`MAX_MS`] (2^62 ms, some 146 million years) always does, from any clock reading
//! before that far future: a wait at or above it is a wait without limit (`BLOCK 0`), a lease
//! or a latch is sent as that.

use std::time::Duration;

use tokio::time::Instant;

/// The longest time sent to the module, in ms; a wait this long or longer has no limit.
pub(crate) const MAX_MS: u64 = 1 << 62;

/// A duration as the module's millisecond argument, at most [`MAX_MS`].
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).min(MAX_MS)
}

/// Whether a wait of `d` is a wait without limit: longer than the server can express.
pub(crate) fn unlimited(d: Duration) -> bool {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX) >= MAX_MS
}

/// `d` after `from`; `None` (never) when that is past what an `Instant` can hold.
pub(crate) fn after(from: Instant, d: Duration) -> Option<Instant> {
    from.checked_add(d)
}

/// `d` from now; `None` (never) when that is past what an `Instant` can hold.
pub(crate) fn from_now(d: Duration) -> Option<Instant> {
    after(Instant::now(), d)
}

/// Sleeps until `at`, or forever when `at` is `None`.
pub(crate) async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn every_duration_has_a_millisecond_argument_and_a_deadline_or_none() {
        let cases: &[(Duration, u64, bool)] = &[
            (Duration::ZERO,                 0,            false),
            (Duration::from_micros(1500),    1,            false),
            (Duration::from_secs(30),        30_000,       false),
            (Duration::from_millis(MAX_MS - 1), MAX_MS - 1, false),
            (Duration::from_millis(MAX_MS),  MAX_MS,       true),
            (Duration::from_secs(u64::MAX),  MAX_MS,       true),
            (Duration::MAX,                  MAX_MS,       true),
        ];
        for (d, want_ms, no_limit) in cases {
            assert_eq!(ms(*d), *want_ms, "{d:?}");
            assert_eq!(unlimited(*d), *no_limit, "{d:?}");
        }
        let now = Instant::now();
        assert_eq!(after(now, Duration::MAX), None);
        assert_eq!(after(now, Duration::from_secs(1)), Some(now + Duration::from_secs(1)));
    }
}
