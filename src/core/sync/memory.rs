//! [`SyncStore`] on the in-memory [`MemoryStore`]: the string counters and sorted-set ranges
//! of the synchronizers, with Redis' rules (a counter keeps its TTL through `INCRBY`, `SET`
//! drops it, an empty sorted set is no key).
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use crate::core::memory::{MemoryStore, Value};
use crate::core::store::Store;
use crate::core::sync::store::SyncStore;
use crate::core::{incremented, parse_i64, LockError, Result};

impl MemoryStore {
    /// `INCRBY` with Redis' checks: a string holding an integer (or no key), no overflow.
    fn add_to_counter(&mut self, key: &[u8], by: i64) -> Result<i64> {
        self.expire_if_needed(key);
        let (current, ttl) = match self.data.get(key) {
            None => (0, None),
            Some((Value::Str(v), ttl)) => (parse_i64(v).ok_or(LockError::NotInteger)?, *ttl),
            Some(_) => return Err(LockError::WrongType),
        };
        let next = incremented(current, by)?;
        self.data.insert(key.to_vec(), (Value::Str(next.to_string().into_bytes()), ttl));
        Ok(next)
    }

    /// The string at `key`, for assertions (None: no key, or not a string).
    pub fn string(&mut self, key: &str) -> Option<String> {
        match self.value(key.as_bytes()) {
            Some(Value::Str(v)) => Some(String::from_utf8_lossy(v).into()),
            _ => None,
        }
    }
}

// The sorted-set reads use the trait's default bodies (over `zset_all`), which are exact.
impl SyncStore for MemoryStore {
    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.data.insert(key.to_vec(), (Value::Str(value.to_vec()), None));
    }

    fn incr_by(&mut self, key: &[u8], by: i64) -> Result<i64> {
        self.add_to_counter(key, by)
    }

    fn decr_by(&mut self, key: &[u8], by: i64) -> Result<i64> {
        // `DECRBY i64::MIN` is Redis' overflow error too: its negation does not fit.
        self.add_to_counter(key, by.checked_neg().ok_or(LockError::Overflow)?)
    }
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incr_by_keeps_the_ttl_and_set_drops_it() {
        let mut s = MemoryStore::at(1_000);
        s.set_px_at(b"k", b"5", 2_000);
        assert_eq!(s.incr_by(b"k", 3), Ok(8));
        assert_eq!(s.pttl(b"k"), 1_000);
        assert_eq!(s.decr_by(b"k", 10), Ok(-2));
        assert_eq!(s.pttl(b"k"), 1_000);
        s.set(b"k", b"0");
        assert_eq!(s.pttl(b"k"), -1);
    }

    #[test]
    fn counters_refuse_what_incrby_refuses_and_write_nothing() {
        let mut s = MemoryStore::at(0);
        s.set(b"k", b"x");
        assert_eq!(s.incr_by(b"k", 1), Err(LockError::NotInteger));
        assert_eq!(s.get_int(b"k"), Err(LockError::NotInteger));
        s.set(b"k", &i64::MAX.to_string().into_bytes());
        assert_eq!(s.incr_by(b"k", 1), Err(LockError::Overflow));
        s.set(b"k", b"0");
        assert_eq!(s.decr_by(b"k", i64::MIN), Err(LockError::Overflow));
        assert_eq!(s.string("k").as_deref(), Some("0"));
        s.zset_add(b"z", b"m", 1.0);
        assert_eq!(s.incr_by(b"z", 1), Err(LockError::WrongType));
        assert_eq!(s.get_int(b"z"), Err(LockError::WrongType));
    }

    #[test]
    fn score_ranges_are_inclusive_ordered_and_limited() {
        let mut s = MemoryStore::at(0);
        for (m, score) in [("c", 3.0), ("a", 1.0), ("b", 1.0), ("d", 4.0)] {
            s.zset_add(b"z", m.as_bytes(), score);
        }
        let names =
            |v: Vec<(Vec<u8>, f64)>| v.into_iter().map(|(m, _)| String::from_utf8(m).unwrap()).collect::<Vec<_>>();
        assert_eq!(names(s.zset_range_by_score(b"z", 1.0, 3.0, None).unwrap()), ["a", "b", "c"]);
        assert_eq!(names(s.zset_range_by_score(b"z", 0.0, 9.0, Some(2)).unwrap()), ["a", "b"]);
        assert!(s.zset_range_by_score(b"z", 0.0, 9.0, Some(0)).unwrap().is_empty());
        assert_eq!(s.zset_count(b"z", 2.0, f64::INFINITY), Ok(2));
        assert_eq!(s.zset_first(b"z"), Ok(Some((b"a".to_vec(), 1.0))));
        assert_eq!(s.zset_first(b"none"), Ok(None));
    }
}
