//! `GCRA` and `CL.THROTTLE` on a fake clock: hand-computed tables, redis-cell 0.2.2's own test
//! table (its arithmetic, case by case), the edge cases, and what reaches the store.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::{MemoryStore, Value};

/// A clock reading in ms (2023-11-14), a whole second so hand arithmetic stays readable.
const T0_MS: i64 = 1_700_000_000_000;
const S: i64 = 1_000_000; // one second in GCRA's microseconds

fn gcra(max_burst: &str, per_period: &str, period: f64, tokens: i64) -> Gcra {
    Gcra {
        limit: Gcra::max_burst(max_burst.as_bytes()).unwrap(),
        tokens_per_period: Gcra::count(per_period.as_bytes()).unwrap(),
        period: Gcra::period(Some(period)).unwrap(),
        tokens,
    }
}

/// (limited, limit, remaining, retry_after, reset_after) of a verdict.
fn five(v: &Verdict) -> (bool, i64, i64, i64, i64) {
    (v.limited, v.limit, v.remaining, v.retry_after, v.reset_after)
}

/// One GCRA step: (ms after T0, tokens, (limited, limit, remaining, retry s, reset s)).
type GcraStep = (i64, i64, (bool, i64, i64, i64, i64));

/// Runs `steps` on one GCRA key through the store.
fn run_gcra(max_burst: &str, per_period: &str, period: f64, steps: &[GcraStep]) {
    let mut s = MemoryStore::at(T0_MS);
    for (i, (at, tokens, want)) in steps.iter().enumerate() {
        s.now = T0_MS + at;
        let v = request(&mut s, b"k", &gcra(max_burst, per_period, period, *tokens)).unwrap();
        assert_eq!(five(&v), *want, "step {i} at +{at} ms");
    }
}

#[rustfmt::skip]
#[test]
fn gcra_replies_as_redis_docs_example_computes_them() {
    // GCRA k 5 10 60: 6 s apart, a burst of 6 (tolerance 36 s).
    run_gcra("5", "10", 60.0, &[
        // +ms,  tokens, (limited, limit, remaining, retry, reset)
        (0,      1, (false, 6, 5, -1, 6)),
        (0,      1, (false, 6, 4, -1, 12)),
        (0,      1, (false, 6, 3, -1, 18)),
        (0,      1, (false, 6, 2, -1, 24)),
        (0,      1, (false, 6, 1, -1, 30)),
        (0,      1, (false, 6, 0, -1, 36)),
        (0,      1, (true,  6, 0,  6, 36)),
        (1,      1, (true,  6, 0,  6, 36)), // 5.999 s rounds up
        (6_000,  1, (false, 6, 0, -1, 36)),
        (7_000,  3, (true,  6, 0, 17, 35)), // 3 tokens need 18 s: 17 from now
        (7_000,  1, (true,  6, 0,  5, 35)),
        (42_000, 3, (false, 6, 3, -1, 18)), // the TAT has passed: a fresh burst
    ]);
}

#[rustfmt::skip]
#[test]
fn gcra_takes_fractional_periods_as_redissons_trysetrate_sends_them() {
    // 4 per 0.25 s ("0.25"): 62.5 ms apart, burst 3; times round up to whole seconds.
    run_gcra("2", "4", 0.25, &[
        (0,   1, (false, 3, 2, -1, 1)),
        (0,   1, (false, 3, 1, -1, 1)),
        (0,   1, (false, 3, 0, -1, 1)),
        (0,   1, (true,  3, 0,  1, 1)),
        (62,  1, (true,  3, 0,  1, 1)),
        (63,  1, (false, 3, 0, -1, 1)),
        (250, 2, (false, 3, 1, -1, 1)),
    ]);
}

#[rustfmt::skip]
#[test]
fn gcra_refuses_a_cost_above_the_burst_without_a_retry_time() {
    run_gcra("5", "1", 60.0, &[
        (0, 7, (true,  6, 6, -1, 0)),  // 7 tokens never fit in 6: no retry, nothing taken
        (0, 6, (false, 6, 0, -1, 360)),
        (0, 7, (true,  6, 0, -1, 360)),
    ]);
    // max_burst 0: one token, then the sustained rate only.
    run_gcra("0", "1", 1.0, &[(0, 1, (false, 1, 0, -1, 1)), (0, 1, (true, 1, 0, 1, 1)), (1_000, 1, (false, 1, 0, -1, 1))]);
}

#[rustfmt::skip]
#[test]
fn gcra_emission_interval_rounds_to_the_nearest_microsecond_and_is_at_least_one() {
    let cases: &[(&str, f64, i64)] = &[
        // tokens_per_period, period, interval us
        ("3",          1.0,    333_333),
        ("3",          2.0,    666_667),
        ("4",          0.25,   62_500),
        ("1",          1e-7,   1),
        ("3",          1e-6,   1), // 0.33 us
        ("1000000000", 1.0,    1),
        ("1",          86400.0, 86_400 * S),
    ];
    for (tpp, period, want) in cases {
        assert_eq!(gcra("1", tpp, *period, 1).emission_us(), *want, "{tpp} per {period}");
    }
}

#[rustfmt::skip]
#[test]
fn gcra_arguments_get_redis_own_errors() {
    let e = |r: Result<i64>| r.unwrap_err().to_string();
    assert_eq!(e(Gcra::max_burst(b"-1")), "ERR value is out of range, must be positive");
    assert_eq!(e(Gcra::max_burst(b"x")), "ERR value is out of range, must be positive");
    assert_eq!(Gcra::max_burst(b"9223372036854775807"), Ok(i64::MAX), "no + 1 past the range");
    assert_eq!(e(Gcra::count(b"0")), "ERR value is out of range, value must between 1 and 9223372036854775807");
    assert_eq!(e(Gcra::count(b"1.5")), "ERR value is not an integer or out of range");
    let p = |x: Option<f64>| Gcra::period(x).map_err(|e| e.to_string());
    assert_eq!(p(None), Err("ERR value is not a valid float".into()));
    assert_eq!(p(Some(0.0)), Err("ERR period must be > 0 and < 1e12".into()));
    assert_eq!(p(Some(-1.0)), Err("ERR period must be > 0 and < 1e12".into()));
    assert_eq!(p(Some(1e12)), Err("ERR period must be > 0 and < 1e12".into()));
    assert_eq!(p(Some(f64::INFINITY)), Err("ERR period must be > 0 and < 1e12".into()));
    assert_eq!(p(Some(999_999_999_999.0)), Ok(999_999_999_999.0));
}

#[rustfmt::skip]
#[test]
fn gcra_overflows_are_redis_errors_as_its_tests_trigger_them() {
    let tokens = "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow";
    let burst = "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow";
    let now = T0_MS * 1000;
    let cases: &[(Gcra, Option<i64>, &str)] = &[
        (gcra("1", "1", 86400.0, 200_000_000),                None, tokens),
        (gcra("200000000", "1", 86400.0, 1),                  None, burst),
        (gcra("1", "1", 2_147_483_647.0, 2_147_483_647),      None, tokens),
        // A TAT near the end of time: max(TAT, now) + the cost passes i64.
        (gcra("1", "1", 1.0, 1),                              Some(i64::MAX - 10), tokens),
    ];
    for (g, tat, want) in cases {
        assert_eq!(g.decide(*tat, now).unwrap_err().to_string(), *want, "{g:?}");
    }
}

#[test]
fn gcra_rejects_a_key_that_is_not_a_positive_integer_and_writes_nothing() {
    let g = gcra("5", "1", 60.0, 1);
    for (value, want) in [
        (&b"abc"[..], "ERR Invalid GCRA key"),
        (b"1.5", "ERR Invalid GCRA key"),
        (b"0", "ERR Negative time is invalid value for GCRA"),
        (b"-7", "ERR Negative time is invalid value for GCRA"),
    ] {
        let mut s = MemoryStore::at(T0_MS);
        s.data.insert(b"k".to_vec(), (Value::Str(value.to_vec()), None));
        assert_eq!(request(&mut s, b"k", &g).unwrap_err().to_string(), want);
        assert_eq!(s.data.get(&b"k"[..]), Some(&(Value::Str(value.to_vec()), None)));
    }
    let mut s = MemoryStore::at(T0_MS);
    s.data.insert(b"k".to_vec(), (Value::Hash(Default::default()), None));
    assert_eq!(request(&mut s, b"k", &g), Err(LockError::WrongType));
}

#[test]
fn a_grant_stores_the_tat_expiring_at_its_millisecond_rounded_up_and_a_refusal_writes_nothing() {
    // 4 per second with no burst: 250 ms apart; 3 per second: 333.333 ms, not a whole ms.
    let mut s = MemoryStore::at(T0_MS);
    request(&mut s, b"k", &gcra("0", "3", 1.0, 1)).unwrap();
    let tat = T0_MS * 1000 + 333_333;
    assert_eq!(s.data.get(&b"k"[..]), Some(&(Value::Str(tat.to_string().into_bytes()), Some(T0_MS + 334))));
    let before = s.data.clone();
    let v = request(&mut s, b"k", &gcra("0", "3", 1.0, 1)).unwrap();
    assert!(v.limited && v.tat.is_none());
    assert_eq!(s.data, before, "a refusal writes nothing");
    // CL.THROTTLE: nanoseconds, expiry in ms rounded up.
    let mut s = MemoryStore::at(T0_MS);
    let cell = Cell::new(0, 3, 1, 1).unwrap();
    request(&mut s, b"c", &cell).unwrap();
    let tat = T0_MS * 1_000_000 + 333_333_333;
    assert_eq!(s.data.get(&b"c"[..]), Some(&(Value::Str(tat.to_string().into_bytes()), Some(T0_MS + 334))));
}

/// One CL.THROTTLE step: (ns after start, quantity, (limited, remaining, retry s, reset s)).
type CellStep = (i64, i64, (bool, i64, i64, i64));

/// Runs `steps` on `Cell::decide` with a nanosecond clock, carrying the TAT as the key would.
fn run_cell(max_burst: i64, count: i64, period: i64, start: i64, steps: &[CellStep]) {
    let mut tat: Option<i64> = None;
    for (i, (at, quantity, (limited, remaining, retry, reset))) in steps.iter().enumerate() {
        let cell = Cell::new(max_burst, count, period, *quantity).unwrap();
        let v = cell.decide(tat, start + at).unwrap();
        let want = (*limited, max_burst + 1, *remaining, *retry, *reset);
        assert_eq!(five(&v), want, "step {i} at +{at} ns");
        tat = v.tat.or(tat);
    }
}

#[rustfmt::skip]
#[test]
fn cl_throttle_replies_as_redis_cells_own_test_table() {
    // redis-cell 0.2.2's `it_rate_limits`: max_burst 4 (a limit of 5), 1 per second; its
    // durations as CL.THROTTLE replies them, whole seconds truncated (`num_seconds`).
    let start = T0_MS * 1_000_000 + 123_456_789;
    run_cell(4, 1, 1, start, &[
        // ns after start,  quantity, (limited, remaining, retry, reset)
        (0,                 6, (true,  5, -1, 0)), // never more than the maximum
        (0,                 1, (false, 4, -1, 1)),
        (0,                 1, (false, 3, -1, 2)),
        (0,                 1, (false, 2, -1, 3)),
        (0,                 1, (false, 1, -1, 4)),
        (0,                 1, (false, 0, -1, 5)),
        (0,                 1, (true,  0,  1, 5)),
        (3_000_000_000,     1, (false, 2, -1, 3)),
        (3_100_000_000,     1, (false, 1, -1, 3)), // 3.9 s truncates to 3
        (4_000_000_000,     1, (false, 1, -1, 4)),
        (8_000_000_000,     1, (false, 4, -1, 1)),
        (9_500_000_000,     1, (false, 4, -1, 1)),
        (9_500_000_000,     0, (false, 4, -1, 1)), // a peek
        (9_500_000_000,     2, (false, 2, -1, 3)),
        (9_500_000_000,     5, (true,  2,  3, 3)),
    ]);
}

#[rustfmt::skip]
#[test]
fn cl_throttle_truncates_where_redis_cell_does() {
    let start = T0_MS * 1_000_000;
    // CL.THROTTLE user123 15 30 60 (redis-cell's README): 2 s apart, burst 16.
    run_cell(15, 30, 60, start, &[
        (0,             1,  (false, 15, -1, 2)),
        (1,             1,  (false, 14, -1, 3)),  // 4 s - 1 ns
        (1,             0,  (false, 14, -1, 3)),  // a peek takes nothing
        (2_000_000_001, 13, (false, 2,  -1, 27)), // 28 s - 1 ns; 1 token came back meanwhile
        (2_000_000_001, 2,  (false, 0,  -1, 31)),
        (2_000_000_001, 1,  (true,  0,   1, 31)), // 2 s - 1 ns to wait: 1
    ]);
}

#[rustfmt::skip]
#[test]
fn cl_throttle_edge_cases_follow_redis_cell_or_are_errors_where_it_breaks() {
    let now = T0_MS * 1_000_000;
    let v = |b, c, p, q, tat| Cell::new(b, c, p, q).and_then(|cell| cell.decide(tat, now)).map(|v| five(&v));
    // A peek on a fresh key: the whole burst, nothing stored.
    assert_eq!(v(15, 30, 60, 0, None), Ok((false, 16, 16, -1, 0)));
    assert_eq!(Cell::new(15, 30, 60, 0).unwrap().decide(None, now).unwrap().tat, None);
    // Exactly the burst fits; one more never does (no retry time).
    assert_eq!(v(4, 1, 1, 5, None), Ok((false, 5, 0, -1, 5)));
    assert_eq!(v(4, 1, 1, 6, None), Ok((true, 5, 5, -1, 0)));
    // A stored TAT in the past counts as none; a key at the epoch too.
    assert_eq!(v(4, 1, 1, 1, Some(now - 1)), v(4, 1, 1, 1, None));
    assert_eq!(v(4, 1, 1, 1, Some(0)), v(4, 1, 1, 1, None));
    // Float division, truncated to whole ns: 10 s / 7 = 1428571428.57 ns.
    assert_eq!(Cell::new(0, 7, 10, 1).unwrap().emission_ns(), Ok(1_428_571_428));
    // An interval under 1 us: redis-cell divides whole us by 0 (a saturated i64::MAX, 0 for 0/0).
    assert_eq!(v(10, 1_500_000, 1, 1, None), Ok((false, 11, i64::MAX, -1, 0)));
    assert_eq!(v(0, 1_500_000, 1, 1, None), Ok((false, 1, 0, -1, 0)));
    // Errors where redis-cell replies nonsense, wraps or crashes.
    let e = |b, c, p, q, tat| v(b, c, p, q, tat).unwrap_err().to_string();
    assert_eq!(e(-1, 1, 1, 1, None), "ERR max_burst must be a non-negative integer");
    assert_eq!(e(1, 0, 1, 1, None), "ERR count must be a positive integer");
    assert_eq!(e(1, -3, 1, 1, None), "ERR count must be a positive integer");
    assert_eq!(e(1, 1, 0, 1, None), "ERR period must be a positive integer");
    assert_eq!(e(1, 1, 1, -1, None), "ERR quantity must be a non-negative integer");
    assert_eq!(e(1, 2_000_000_000, 1, 1, None), "ERR CL.THROTTLE rate too fast: period / count is below 1 ns");
    assert_eq!(e(1, 1, 9_223_372_037, 1, None), "ERR CL.THROTTLE arguments overflow its nanosecond arithmetic");
    assert_eq!(e(i64::MAX, 1, 1, 1, None), "ERR CL.THROTTLE arguments overflow its nanosecond arithmetic");
    assert_eq!(e(10, 1, 1_000_000_000, 1, None), "ERR CL.THROTTLE arguments overflow its nanosecond arithmetic");
    assert_eq!(e(1, 1, 1, 1, Some(-1)), "ERR Invalid CL.THROTTLE key: not a non-negative integer arrival time");
    // The longest period that fits: 292 years in ns.
    assert!(Cell::new(0, 1, 9_223_372_036, 1).unwrap().emission_ns().is_ok());
}
