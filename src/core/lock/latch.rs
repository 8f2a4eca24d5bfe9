//! The unlock latch: Redisson's guard against a retried unlock being applied twice.

use crate::core::names;
use crate::core::numbers::{deadline, parse_i64};
use crate::core::reply::{Reply, Result};
use crate::core::store::Store;

/// The unlock latch of an unlock request: Redisson's guard against a retried unlock being
/// applied twice. The latch key records the first attempt's outcome for `ttl_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Latch<'a> {
    pub request_id: &'a [u8],
    pub ttl_ms: i64,
}

/// Returns the recorded outcome of an earlier unlock with the same request id, if any. Checks
/// the latch's own expiry first: it is written last, after the unlock's other writes.
pub fn latch_check<S: Store>(s: &mut S, key: &[u8], latch: Option<Latch>) -> Result<Option<Reply>> {
    let Some(l) = latch else { return Ok(None) };
    deadline(s.now(), l.ttl_ms)?;
    let name = names::unlock_latch(key, l.request_id);
    // Redisson replies `tonumber(value)`: nil for anything that is not a number.
    Ok(s.get(&name)?.map(|v| parse_i64(&v).map_or(Reply::Nil, Reply::Int)))
}

/// Records an unlock's outcome (`0` still held, `1` released) under its latch key.
pub fn latch_record<S: Store>(s: &mut S, key: &[u8], latch: Option<Latch>, outcome: i64) {
    if let Some(l) = latch {
        let name = names::unlock_latch(key, l.request_id);
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
