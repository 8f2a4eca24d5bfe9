//! Small statistics: the median and range of per-round figures, percentiles of wait times.

use std::fmt;

/// Median and min-max of one figure over the rounds of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(values: &[f64]) -> Summary {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Summary { median: f64::NAN, min: f64::NAN, max: f64::NAN, n: 0 };
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let mid = v.len() / 2;
        let median = if v.len() % 2 == 1 { v[mid] } else { (v[mid - 1] + v[mid]) / 2.0 };
        Summary { median, min: v[0], max: v[v.len() - 1], n: v.len() }
    }
}

/// A figure with its range, "4.10x (3.9-4.3)": the form every ratio takes in the report.
pub struct Ratio(pub Summary);

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.n == 0 {
            return write!(f, "n/a");
        }
        write!(f, "{} ({}-{})", num(s.median), num(s.min), num(s.max))?;
        Ok(())
    }
}

/// A number with about three significant digits.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// The p-th percentile (0..=100) of unsorted samples; NaN when empty.
pub fn percentile(samples: &mut [f64], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

/// Ratios of paired rounds, a[i] / b[i].
pub fn ratios(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x / y).collect()
}

/// Milliseconds since the epoch (the Lua fair-lock scripts take the clock as an argument).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
