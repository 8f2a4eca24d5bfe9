//! How long parked clients waited: one histogram per kind of request, read the way Prometheus
//! reads a histogram (cumulative counts per upper bound `le`, a count and a sum), plus the
//! waits that ended without what they asked for.
//!
//! A wait is measured in whole milliseconds (the clock parked clients are stamped with), so
//! the first bucket, `le` 1 ms, holds every wait shorter than the clock can tell apart. The
//! bounds grow by 2 to 2.5 each step, which keeps a quantile read from them
//! (`histogram_quantile`) within a factor of about 1.5 of the truth, from 1 ms to 5 minutes.
//!
//! Recording is an index lookup and two adds; the cumulative view is built only when read.

/// The finite upper bounds of the buckets, in ms (`+Inf` follows them).
pub const BOUNDS_MS: [i64; 16] =
    [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000];

/// The bounds as `INFO` names them: `le_` and the bound in seconds, as Prometheus' `le` label.
pub const BOUND_NAMES: [&str; 17] = [
    "le_0.001", "le_0.002", "le_0.005", "le_0.01", "le_0.025", "le_0.05", "le_0.1", "le_0.25", "le_0.5", "le_1",
    "le_2.5", "le_5", "le_10", "le_30", "le_60", "le_300", "le_inf",
];

/// What a parked client waited for, as `LOCK.INFO` names its `request`: the histograms' kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    Lock,
    Read,
    Write,
    Fair,
    Semaphore,
    Permits,
    Latch,
    RateLimit,
}

impl WaitKind {
    pub const ALL: [WaitKind; 8] = [
        WaitKind::Lock,
        WaitKind::Read,
        WaitKind::Write,
        WaitKind::Fair,
        WaitKind::Semaphore,
        WaitKind::Permits,
        WaitKind::Latch,
        WaitKind::RateLimit,
    ];

    /// Its name in `LOCK.INFO`'s parked list and in `INFO lockmod` (`waits_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Lock => "lock",
            WaitKind::Read => "read",
            WaitKind::Write => "write",
            WaitKind::Fair => "fair",
            WaitKind::Semaphore => "semaphore",
            WaitKind::Permits => "psemaphore",
            WaitKind::Latch => "countdown",
            WaitKind::RateLimit => "ratelimiter",
        }
    }

    /// The `INFO lockmod` field of its histogram.
    pub fn info_field(self) -> &'static str {
        match self {
            WaitKind::Lock => "waits_lock",
            WaitKind::Read => "waits_read",
            WaitKind::Write => "waits_write",
            WaitKind::Fair => "waits_fair",
            WaitKind::Semaphore => "waits_semaphore",
            WaitKind::Permits => "waits_psemaphore",
            WaitKind::Latch => "waits_countdown",
            WaitKind::RateLimit => "waits_ratelimiter",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The waits of one kind since start (or `CONFIG RESETSTAT`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitTimes {
    /// Granted waits per bucket, not cumulative (the last is `+Inf`).
    per_bucket: [u64; 17],
    sum_ms: u64,
    /// Waits that ended without what they asked for.
    gave_up: u64,
}

/// The bucket of a wait of `ms`: the first bound it does not exceed.
fn bucket_of(ms: i64) -> usize {
    BOUNDS_MS.partition_point(|&b| b < ms)
}

impl WaitTimes {
    /// A wait of `ms` that ended with what it asked for.
    pub fn granted(&mut self, ms: i64) {
        let ms = ms.max(0);
        self.per_bucket[bucket_of(ms)] += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms as u64);
    }

    /// A wait that ended without it: its time ran out, its client left or was unblocked, the
    /// server stopped being a primary, or its grant failed with an error.
    pub fn gave_up(&mut self) {
        self.gave_up += 1;
    }

    /// The `INFO` fields: the cumulative count per bound (`le_...`, the last `le_inf`), then
    /// `count`, `sum_ms` and `gave_up`.
    pub fn fields(&self) -> Vec<(&'static str, i64)> {
        let mut total = 0u64;
        let mut out = Vec::with_capacity(BOUND_NAMES.len() + 3);
        for (name, n) in BOUND_NAMES.iter().zip(self.per_bucket) {
            total += n;
            out.push((*name, total as i64));
        }
        out.push(("count", total as i64));
        out.push(("sum_ms", self.sum_ms as i64));
        out.push(("gave_up", self.gave_up as i64));
        out
    }
}

/// One histogram per kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllWaitTimes([WaitTimes; 8]);

impl AllWaitTimes {
    pub fn of(&mut self, kind: WaitKind) -> &mut WaitTimes {
        &mut self.0[kind.index()]
    }

    pub fn get(&self, kind: WaitKind) -> &WaitTimes {
        &self.0[kind.index()]
    }
}

// Test code only (compiled under cfg(test)): an unwrap, expect or panic here is a failed test,
// never reachable from the loaded module.
#[cfg(test)]
mod tests {
    use super::*;

    fn field(w: &WaitTimes, name: &str) -> i64 {
        w.fields().into_iter().find(|(n, _)| *n == name).map(|(_, v)| v).expect("a field")
    }

    #[rustfmt::skip]
    #[test]
    fn each_wait_lands_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let cases: &[(i64, &str)] = &[
            (0, "le_0.001"), (1, "le_0.001"), (2, "le_0.002"), (3, "le_0.005"), (10, "le_0.01"),
            (11, "le_0.025"), (1_000, "le_1"), (1_001, "le_2.5"), (300_000, "le_300"),
            (300_001, "le_inf"), (i64::MAX, "le_inf"), (-5, "le_0.001"),
        ];
        for &(ms, want) in cases {
            let mut w = WaitTimes::default();
            w.granted(ms);
            let i = BOUND_NAMES.iter().position(|n| *n == want).expect("a bound");
            let fields = w.fields();
            assert_eq!(fields[i].1, 1, "{ms} ms in {want}");
            if i > 0 {
                assert_eq!(fields[i - 1].1, 0, "{ms} ms below {want}");
            }
        }
    }

    #[test]
    fn counts_are_cumulative_and_end_with_count_sum_and_the_waits_given_up() {
        let mut w = WaitTimes::default();
        for ms in [0, 4, 4, 40, 70_000] {
            w.granted(ms);
        }
        w.gave_up();
        w.gave_up();
        assert_eq!(field(&w, "le_0.001"), 1);
        assert_eq!(field(&w, "le_0.005"), 3);
        assert_eq!(field(&w, "le_0.05"), 4);
        assert_eq!(field(&w, "le_60"), 4);
        assert_eq!(field(&w, "le_300"), 5);
        assert_eq!(field(&w, "le_inf"), 5);
        assert_eq!(field(&w, "count"), 5);
        assert_eq!(field(&w, "sum_ms"), 70_048);
        assert_eq!(field(&w, "gave_up"), 2, "given up: not in the buckets, the count or the sum");
        let names: Vec<&str> = w.fields().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), 20);
        assert_eq!(&names[17..], ["count", "sum_ms", "gave_up"]);
    }

    #[test]
    fn bound_names_are_the_bounds_in_seconds() {
        for (ms, name) in BOUNDS_MS.iter().zip(BOUND_NAMES) {
            let secs: f64 = name.trim_start_matches("le_").parse().expect("a number");
            assert_eq!((secs * 1000.0).round() as i64, *ms);
        }
        assert_eq!(BOUND_NAMES[16], "le_inf");
        assert!(BOUNDS_MS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn each_kind_has_its_own_histogram_and_its_own_name() {
        let mut all = AllWaitTimes::default();
        all.of(WaitKind::Fair).granted(7);
        all.of(WaitKind::RateLimit).gave_up();
        assert_eq!(field(all.get(WaitKind::Fair), "count"), 1);
        assert_eq!(field(all.get(WaitKind::Lock), "count"), 0);
        assert_eq!(field(all.get(WaitKind::RateLimit), "gave_up"), 1);
        let names: Vec<&str> = WaitKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["lock", "read", "write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"]);
        for k in WaitKind::ALL {
            assert_eq!(k.info_field(), format!("waits_{}", k.name()));
        }
    }
}
