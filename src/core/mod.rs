//! Pure lock logic: Redisson's algorithms over a small [`Store`] trait.
//!
//! Nothing here imports `redis_module`. The module's store (`crate::effects`) applies every
//! write to the keyspace and propagates it; the unit tests use `memory::MemoryStore` with a
//! fake clock. Each lock operation reads and type-checks every key it will touch *before* its
//! first write, so an error (`WRONGTYPE`, a corrupt hold count) leaves the keyspace unchanged.

pub mod error;
pub mod fair;
pub mod fencing;
pub mod hold_expiries;
pub mod holds;
pub mod info;
pub mod kinds;
pub mod latch;
pub mod permits;
pub mod reentrant;
pub mod rwlock;
pub mod semaphore;
pub mod store;
pub mod sync_names;

#[cfg(test)]
pub mod memory;
#[cfg(test)]
pub mod memory_sync;

#[cfg(test)]
mod access_tests;

pub use error::{Denied, LockError};
pub use store::Store;

pub type Result<T> = std::result::Result<T, LockError>;

/// A command's reply, written to the client by the command layer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Array(Vec<Reply>),
    /// A map under RESP3, a flat field/value array under RESP2.
    Map(Vec<(Reply, Reply)>),
    /// An error line, code first (for replies decided outside a command, e.g. a BLOCK grant).
    Error(String),
}

/// The unlock latch of an unlock request: Redisson's guard against a retried unlock being
/// applied twice. The latch key records the first attempt's outcome for `ttl_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Latch<'a> {
    pub request_id: &'a [u8],
    pub ttl_ms: i64,
}

/// The absolute time `ms` after `now`, or `InvalidExpire` where Redis' `SET ... PX` would
/// refuse it: past `i64::MAX` ms (what `PEXPIREAT` and `SET ... PXAT` accept), or not after
/// the epoch. Every deadline a command writes is computed here before its first write, so an
/// overflow is an error that changes nothing, never a wrapped or saturated expiry.
pub fn deadline(now: i64, ms: i64) -> Result<i64> {
    match now.checked_add(ms) {
        Some(at) if at > 0 => Ok(at),
        _ => Err(LockError::InvalidExpire("")),
    }
}

/// Checks that one more hold (or token) fits: `HINCRBY`'s overflow rule, before any write.
pub fn incremented(count: i64, by: i64) -> Result<i64> {
    count.checked_add(by).ok_or(LockError::Overflow)
}

/// Returns the recorded outcome of an earlier unlock with the same request id, if any. Checks
/// the latch's own expiry first: it is written last, after the unlock's other writes.
pub fn latch_check<S: Store>(s: &mut S, key: &[u8], latch: Option<Latch>) -> Result<Option<Reply>> {
    let Some(l) = latch else { return Ok(None) };
    deadline(s.now(), l.ttl_ms)?;
    let name = crate::names::unlock_latch(key, l.request_id);
    // Redisson replies `tonumber(value)`: nil for anything that is not a number.
    Ok(s.get(&name)?.map(|v| parse_i64(&v).map_or(Reply::Nil, Reply::Int)))
}

/// Records an unlock's outcome (`0` still held, `1` released) under its latch key.
pub fn latch_record<S: Store>(s: &mut S, key: &[u8], latch: Option<Latch>, outcome: i64) {
    if let Some(l) = latch {
        let name = crate::names::unlock_latch(key, l.request_id);
        // Checked by `latch_check`, which every unlock calls first, on the same clock reading.
        let at = s.now().saturating_add(l.ttl_ms);
        s.set_px_at(&name, if outcome == 0 { b"0" } else { b"1" }, at);
    }
}

/// Records the outcome of an unlock that released nothing (the lock was absent or free), except
/// over `maxmemory`: the unlock still runs and replies, but a new key that frees nothing is not
/// written into a full server. A retry then runs again and finds nothing to release either.
pub fn latch_record_unreleased<S: Store>(s: &mut S, key: &[u8], latch: Option<Latch>, outcome: i64) {
    if latch.is_some() && !s.over_maxmemory() {
        latch_record(s, key, latch, outcome);
    }
}

/// Checks that the caller's ACL allows `needs` (see `crate::access`), before any write. The
/// list is built only for a caller the ACL may deny something: an unrestricted one pays for
/// no names, even where the list is O(N).
pub fn permit<S: Store>(s: &mut S, needs: impl FnOnce() -> Vec<crate::access::Need>) -> Result<()> {
    if s.restricted() {
        s.permit(&needs())
    } else {
        Ok(())
    }
}

/// Parses a decimal integer the way Redis does (no spaces, no `+`, no leading zeros).
/// Every acquire parses its lease with it, so it allocates nothing.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || negative)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        // Accumulated with the sign, so i64::MIN parses and one past it does not.
        v = v.checked_mul(10)?;
        v = if negative { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

#[cfg(test)]
mod parse_tests {
    use super::parse_i64;

    /// The canonical form: what `i64::to_string` prints back, and nothing else.
    #[test]
    fn integers_parse_only_in_their_canonical_form() {
        let reference = |s: &str| s.parse::<i64>().ok().filter(|v| v.to_string() == s);
        for s in [
            "0",
            "1",
            "-1",
            "30000",
            "007",
            "-0",
            "+5",
            "",
            "-",
            " 1",
            "1 ",
            "1a",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "00",
            "10",
            "-10",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), reference(s), "{s:?}");
        }
    }
}

#[cfg(test)]
mod kinds_tests;
#[cfg(test)]
mod times_tests;
