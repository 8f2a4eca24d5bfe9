//! GCRA rate limiting on one plain string, the theoretical arrival time (TAT): `GCRA` (Redis'
//! command of that name) and `CL.THROTTLE` (redis-cell's). Two arithmetics, one skeleton.
//!
//! | key (string)            | meaning                                                        |
//! |-------------------------|----------------------------------------------------------------|
//! | absent                  | the full burst is available (as a TAT at or before now)         |
//! | integer TAT, PXAT above | the time the bucket is empty again; expires once it has passed |
//! | anything else           | not a limiter: an error, nothing written                       |
//!
//! A request of cost `n` moves the TAT to `max(TAT, now) + n * emission interval` if that is
//! within the burst's tolerance of now, and is refused (nothing written) otherwise. The key
//! expires at the first whole millisecond at or after its TAT, so it never vanishes while its
//! TAT is ahead (a TAT at or before now means the same as no key). The write is one
//! `SET key <tat> PXAT <ms>`: a replica and the AOF get the value and the absolute expiry, never
//! a clock reading of their own.
//!
//! - `GCRA` ([`Gcra`]) follows Redis' implementation (redis/redis#14826, held out of the 8.8
//!   release): the TAT in microseconds, the clock read in whole milliseconds (Redis'
//!   `commandTimeSnapshot() * 1000`), the emission interval rounded to the nearest microsecond
//!   (at least 1), the two times in the reply rounded up to whole seconds.
//! - `CL.THROTTLE` ([`Cell`]) follows redis-cell 0.2.2, its crates.io release: the TAT in
//!   nanoseconds on its clock (the real-time clock read at each call, not the server's cached
//!   one: two calls in one millisecond, or one `EXEC`, read two instants), the emission interval `period * 1e9 / count` in floating point truncated to
//!   whole nanoseconds, the remaining tokens from whole microseconds in floating point, the two
//!   times truncated to whole seconds. Where redis-cell wraps, panics or divides by zero (a
//!   zero count, arithmetic past 64 bits) this replies an error instead; where it writes on a
//!   peek (`quantity` 0) or a refusal, this writes nothing (no state changes).

use crate::core::error::LockError;
use crate::core::reply::{Reply, Result};
use crate::core::sync::store::SyncStore;
use crate::core::IntBuf;

/// What a request was told, and what it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Refused: nothing was taken.
    pub limited: bool,
    /// The burst: `max_burst + 1`.
    pub limit: i64,
    /// Tokens a request could take right now.
    pub remaining: i64,
    /// Seconds until this request could succeed; -1 when it succeeded or never can.
    pub retry_after: i64,
    /// Seconds until the full burst is available again.
    pub reset_after: i64,
    /// The new TAT to store; `None` when nothing changes (refused, or a peek).
    pub tat: Option<i64>,
}

impl Verdict {
    /// The 5-integer reply of both commands (Redisson's `GcraResultDecoder` reads it).
    pub fn reply(&self) -> Reply {
        Reply::Array(vec![
            Reply::Int(i64::from(self.limited)),
            Reply::Int(self.limit),
            Reply::Int(self.remaining),
            Reply::Int(self.retry_after),
            Reply::Int(self.reset_after),
        ])
    }
}

/// One of the two arithmetics: how it reads the clock, keeps the TAT and decides.
pub trait Limiter {
    /// TAT units per millisecond (the key's expiry is in ms).
    const PER_MS: i64;
    /// The error for a key whose string is not a TAT.
    const NOT_A_TAT: LockError;
    /// Now, in TAT units, from the store's clock.
    fn now<S: SyncStore>(s: &S) -> i64;
    /// The verdict for a request at `now` on a limiter whose TAT is `tat` (None: no key).
    fn decide(&self, tat: Option<i64>, now: i64) -> Result<Verdict>;
}

/// Runs one request on `key`: reads the TAT, decides, and writes the new TAT with its expiry
/// only when it changes. Every check comes before the write, so an error writes nothing.
pub fn request<S: SyncStore, L: Limiter>(s: &mut S, key: &[u8], limiter: &L) -> Result<Verdict> {
    let tat = match s.get_int(key) {
        Err(LockError::NotInteger) => return Err(L::NOT_A_TAT),
        other => other?,
    };
    let verdict = limiter.decide(tat, L::now(s))?;
    if let Some(tat) = verdict.tat {
        // A new TAT lies after now, so this expiry does too.
        let at = tat.div_euclid(L::PER_MS) + i64::from(tat.rem_euclid(L::PER_MS) != 0);
        s.set_px_at(key, IntBuf::default().format(tat), at);
    }
    Ok(verdict)
}

const fn err(text: &'static str) -> LockError {
    LockError::Invalid(text)
}

/// `GCRA key max_burst tokens_per_period period [TOKENS n]`: Redis' arithmetic (microseconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gcra {
    /// `max_burst + 1` (Redis leaves `i64::MAX` as it is).
    pub limit: i64,
    pub tokens_per_period: i64,
    /// Seconds, `0 < period < 1e12`.
    pub period: f64,
    /// The request's cost, at least 1.
    pub tokens: i64,
}

/// Redis' error for a `TOKENS` or `tokens_per_period` outside 1..=i64::MAX.
const NOT_1_TO_MAX: LockError = err("value is out of range, value must between 1 and 9223372036854775807");
const TOKENS_OVERFLOW: LockError = err(
    "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow",
);
const BURST_OVERFLOW: LockError = err(
    "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow",
);

impl Gcra {
    /// `max_burst`: an integer from 0 (a non-integer gets the same error, as in Redis).
    pub fn max_burst(b: &[u8]) -> Result<i64> {
        let n = crate::core::parse_i64(b).filter(|n| *n >= 0).ok_or(err("value is out of range, must be positive"))?;
        Ok(if n < i64::MAX { n + 1 } else { n })
    }

    /// `tokens_per_period` or `TOKENS n`: an integer from 1.
    pub fn count(b: &[u8]) -> Result<i64> {
        let n = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
        if n < 1 {
            return Err(NOT_1_TO_MAX);
        }
        Ok(n)
    }

    /// `period`: a float as the server reads one (None: it does not), `0 < period < 1e12`.
    pub fn period(p: Option<f64>) -> Result<f64> {
        let p = p.ok_or(err("value is not a valid float"))?;
        if p <= 0.0 || p >= 1e12 {
            return Err(err("period must be > 0 and < 1e12"));
        }
        Ok(p)
    }

    /// The emission interval, microseconds: the period over the rate, to the nearest, at least 1.
    pub fn emission_us(&self) -> i64 {
        // `as` truncates like C's cast; the period's bound keeps it far below i64::MAX.
        ((self.period * 1_000_000.0 / self.tokens_per_period as f64 + 0.5) as i64).max(1)
    }
}

/// Seconds from microseconds, rounded up (Redis' `ceil(us / 1000000.)`).
fn ceil_seconds(us: i128) -> i64 {
    (us as f64 / 1_000_000.0).ceil() as i64
}

impl Limiter for Gcra {
    const PER_MS: i64 = 1000;
    const NOT_A_TAT: LockError = err("Invalid GCRA key");

    fn now<S: SyncStore>(s: &S) -> i64 {
        s.now().saturating_mul(1000)
    }

    fn decide(&self, tat: Option<i64>, now: i64) -> Result<Verdict> {
        let tat = match tat {
            Some(t) if t <= 0 => return Err(err("Negative time is invalid value for GCRA")),
            Some(t) => t,
            None => now,
        };
        let emission = self.emission_us();
        if emission > i64::MAX / self.tokens {
            return Err(TOKENS_OVERFLOW);
        }
        if emission > i64::MAX / self.limit {
            return Err(BURST_OVERFLOW);
        }
        let variance = emission * self.limit;
        let increment = emission * self.tokens;
        let new_tat = now.max(tat).checked_add(increment).ok_or(TOKENS_OVERFLOW)?;
        // Wider than i64 from here: a TAT far ahead of now must not wrap what Redis computes.
        let (now_w, tat_w, emission_w) = (i128::from(now), i128::from(tat), i128::from(emission));
        let diff = now_w - (i128::from(new_tat) - i128::from(variance));
        let (limited, ttl) = if diff < 0 { (true, tat_w - now_w) } else { (false, i128::from(new_tat) - now_w) };
        let next = i128::from(variance) - ttl;
        // Within i64 (the new TAT fits, so burst + now does), but saturated, never wrapped.
        let remaining = if next > -emission_w { i64::try_from(next / emission_w).unwrap_or(i64::MAX) } else { 0 };
        // A cost above the whole burst can never succeed: no retry time then.
        let retry_after = if limited && increment <= variance { ceil_seconds(-diff) } else { -1 };
        Ok(Verdict {
            limited,
            limit: self.limit,
            remaining,
            retry_after,
            reset_after: ceil_seconds(ttl),
            tat: (!limited).then_some(new_tat),
        })
    }
}

/// `CL.THROTTLE key max_burst count period [quantity]`: redis-cell 0.2.2's arithmetic
/// (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub max_burst: i64,
    /// Requests per period, at least 1.
    pub count: i64,
    /// Whole seconds, at least 1.
    pub period: i64,
    /// The request's cost; 0 peeks.
    pub quantity: i64,
}

const NS_PER_S: i64 = 1_000_000_000;
const CELL_OVERFLOW: LockError = err("CL.THROTTLE arguments overflow its nanosecond arithmetic");

impl Cell {
    /// Checks the ranges redis-cell leaves unchecked (it then replies nonsense or crashes).
    pub fn new(max_burst: i64, count: i64, period: i64, quantity: i64) -> Result<Cell> {
        if max_burst < 0 {
            return Err(LockError::Negative("max_burst"));
        }
        if count < 1 {
            return Err(LockError::NotPositive("count"));
        }
        if period < 1 {
            return Err(LockError::NotPositive("period"));
        }
        if quantity < 0 {
            return Err(LockError::Negative("quantity"));
        }
        Ok(Cell { max_burst, count, period, quantity })
    }

    /// The emission interval, ns: redis-cell's `Rate::per_period`, in floating point, truncated.
    pub fn emission_ns(&self) -> Result<i64> {
        let period_ns = self.period.checked_mul(NS_PER_S).ok_or(CELL_OVERFLOW)?;
        match (period_ns as f64 / self.count as f64) as i64 {
            0 => Err(err("CL.THROTTLE rate too fast: period / count is below 1 ns")),
            e => Ok(e),
        }
    }
}

impl Limiter for Cell {
    const PER_MS: i64 = 1_000_000;
    const NOT_A_TAT: LockError = err("Invalid CL.THROTTLE key: not a non-negative integer arrival time");

    fn now<S: SyncStore>(s: &S) -> i64 {
        s.wall_ns()
    }

    fn decide(&self, tat: Option<i64>, now: i64) -> Result<Verdict> {
        let tat = match tat {
            Some(t) if t < 0 => return Err(Self::NOT_A_TAT),
            Some(t) => t,
            None => now,
        };
        let emission = self.emission_ns()?;
        let limit = self.max_burst.checked_add(1).ok_or(CELL_OVERFLOW)?;
        let dvt = emission.checked_mul(limit).ok_or(CELL_OVERFLOW)?;
        let increment = emission.checked_mul(self.quantity).ok_or(CELL_OVERFLOW)?;
        let new_tat = now.max(tat).checked_add(increment).ok_or(CELL_OVERFLOW)?;
        // new_tat >= now, so this is at most dvt: no overflow.
        let diff = now - (new_tat - dvt);
        let (limited, ttl, retry_ns) = if diff < 0 {
            (true, tat - now, if increment <= dvt { -diff } else { -NS_PER_S })
        } else {
            (false, new_tat - now, -NS_PER_S)
        };
        let next = dvt.checked_sub(ttl).ok_or(CELL_OVERFLOW)?;
        // redis-cell divides whole microseconds as floats: an interval under 1 us divides by 0,
        // which Rust's saturating cast turns into i64::MAX (or 0 for 0/0). Kept as it replies.
        let remaining = if next > -emission { ((next / 1000) as f64 / (emission / 1000) as f64) as i64 } else { 0 };
        Ok(Verdict {
            limited,
            limit,
            remaining,
            retry_after: retry_ns / NS_PER_S,
            reset_after: ttl / NS_PER_S,
            tat: (!limited && self.quantity > 0).then_some(new_tat),
        })
    }
}

#[cfg(test)]
#[path = "gcra_tests.rs"]
mod tests;
