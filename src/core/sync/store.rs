//! The synchronizers' store: the string-counter and sorted-set operations their algorithms
//! need beyond the shared [`Store`](crate::core::Store).

use crate::core::{parse_i64, LockError, Result, Store};

/// The string-counter and sorted-set operations of Redisson's synchronizers (the semaphores and
/// the count-down latch, `core::sync::semaphore`, `core::sync::permits`, `core::sync::countdown`).
///
/// A trait of its own beside [`Store`] so that a store implements it only when it serves the
/// synchronizers: the lock store compiles unchanged, and a synchronizer cannot be run on a
/// store that lacks these (the compiler says so, no default write pretends to work). The reads
/// have exact default bodies over [`Store`]'s, which a store may replace with cheaper ones.
pub trait SyncStore: Store {
    /// `GET` of a counter: `NotInteger` when the value is not an integer in Redis' canonical
    /// form (what `INCRBY` accepts), `WrongType` when the key is not a string.
    fn get_int(&mut self, key: &[u8]) -> Result<Option<i64>> {
        match self.get(key)? {
            None => Ok(None),
            Some(v) => parse_i64(&v).map(Some).ok_or(LockError::NotInteger),
        }
    }
    /// `SET key value`, with no expiry: a TTL the key had is dropped, as `SET` drops it
    /// (Redisson's `drainPermits`, `addPermits` and `trySetPermits` write this way).
    fn set(&mut self, key: &[u8], value: &[u8]);
    /// `INCRBY key by` (`by` may be negative), on a key known to be absent or to hold an
    /// integer; keeps the key's TTL. The new value, or `Overflow` (writing nothing).
    fn incr_by(&mut self, key: &[u8], by: i64) -> Result<i64>;
    /// `DECRBY key by` (replicated as such; its keyspace event is `incrby`, as Redis fires for
    /// `DECR` and `DECRBY` alike); otherwise as [`SyncStore::incr_by`] with `-by`.
    fn decr_by(&mut self, key: &[u8], by: i64) -> Result<i64>;
    /// `ZRANGEBYSCORE key min max WITHSCORES [LIMIT 0 n]`: members with `min <= score <= max`,
    /// lowest score first (ties by member), at most `limit` of them (`Some(0)`: none).
    fn zset_range_by_score(
        &mut self,
        key: &[u8],
        min: f64,
        max: f64,
        limit: Option<usize>,
    ) -> Result<Vec<(Vec<u8>, f64)>> {
        let mut v: Vec<_> = self.zset_all(key)?.into_iter().filter(|(_, s)| min <= *s && *s <= max).collect();
        v.truncate(limit.unwrap_or(usize::MAX));
        Ok(v)
    }
    /// `ZCOUNT key min max`.
    fn zset_count(&mut self, key: &[u8], min: f64, max: f64) -> Result<usize> {
        Ok(self.zset_all(key)?.iter().filter(|(_, s)| min <= *s && *s <= max).count())
    }
    /// `ZRANGE key 0 0 WITHSCORES`: the member with the lowest score.
    fn zset_first(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, f64)>> {
        Ok(self.zset_all(key)?.into_iter().next())
    }
}
