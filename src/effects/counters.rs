//! [`SyncStore`] on [`RedisStore`]: the synchronizers' string counters and score ranges, each
//! write as the key API call, the keyspace event and the replicated command of the Redis
//! command it stands for (`SET`, `INCRBY`, `DECRBY`: the last two fire `incrby`, as in Redis),
//! as Redisson's Lua would make them.
//!
//! `INCRBY` and `DECRBY` are deterministic on the state they find, so they are replicated as
//! they are; the key keeps its TTL (its string is rewritten in place, as Redis' `INCRBY` never
//! touches the TTL). `SET` drops a TTL on both sides.

use super::{RedisStore, STRING};
use crate::core::sync::store::SyncStore;
use crate::core::{incremented, LockError, Result};
use crate::ffi::{Arg, IntBuf, KeyKind};

impl RedisStore<'_> {
    /// `INCRBY key by` (or `DECRBY key -by` when `decr`): checked before the write (a value
    /// that is no integer, a sum past the 64-bit range: `INCRBY`'s errors, nothing written).
    fn add_to_counter(&mut self, key: &[u8], by: i64, decr: bool) -> Result<i64> {
        let current = self.get_int(key)?.unwrap_or(0);
        self.add_to_known(key, current, by, decr)
    }

    /// [`RedisStore::add_to_counter`] on a counter known to hold `current` (read or written in
    /// this command).
    pub(super) fn add_to_known(&mut self, key: &[u8], current: i64, by: i64, decr: bool) -> Result<i64> {
        let next = incremented(current, by)?;
        // `DECRBY i64::MIN` is Redis' overflow error too: its negation does not fit.
        let step = if decr { by.checked_neg().ok_or(LockError::Overflow)? } else { by };
        let i = self.slot(key);
        let k = &self.keys[i];
        let mut buf = IntBuf::default();
        let digits = buf.format(next);
        // An existing counter is rewritten in place (its object, so its TTL, stay); an absent
        // one is created, with no TTL.
        if !k.key.string_overwrite(digits) {
            k.key.string_set(self.ctx.string(digits).as_ref());
        }
        // Redis fires `incrby` for all four of `INCR`, `INCRBY`, `DECR` and `DECRBY` (one
        // function serves them): so do Redisson's Lua and a replica replaying `DECRBY`.
        let cmd = if decr { c"DECRBY" } else { c"INCRBY" };
        self.effect(STRING, c"incrby", k.name.raw(), cmd, &[Arg::S(k.name.raw()), Arg::I(step)]);
        Ok(next)
    }

    /// The first members of a zset in a score range, for the reads below.
    fn zset_range(&mut self, key: &[u8], min: f64, max: f64, limit: usize) -> Result<Vec<(Vec<u8>, f64)>> {
        let mut out = Vec::new();
        if limit == 0 {
            // Still type-checked, as `ZRANGEBYSCORE ... LIMIT 0 0` is.
            self.typed(key, KeyKind::Zset)?;
            return Ok(out);
        }
        if let Some(k) = self.typed(key, KeyKind::Zset)? {
            k.key.zset_walk(min, max, |m, s| {
                out.push((m.to_vec(), s));
                out.len() < limit
            });
        }
        Ok(out)
    }
}

impl SyncStore for RedisStore<'_> {
    fn get_int(&mut self, key: &[u8]) -> Result<Option<i64>> {
        // Parsed where Redis keeps the bytes: no copy.
        match self.typed(key, KeyKind::String)? {
            None => Ok(None),
            Some(k) => match k.key.string_with(crate::core::parse_i64) {
                Some(Some(n)) => Ok(Some(n)),
                _ => Err(LockError::NotInteger),
            },
        }
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        // The key keeps the value's object itself: never a shared one (see `ffi::shared`).
        let v = self.ctx.string(value);
        let i = self.slot(key);
        let k = &self.keys[i];
        k.key.string_set(v.as_ref());
        self.last_int = None;
        self.effect(STRING, c"set", k.name.raw(), c"SET", &[Arg::S(k.name.raw()), Arg::S(v.as_ref())]);
    }

    fn incr_by(&mut self, key: &[u8], by: i64) -> Result<i64> {
        self.add_to_counter(key, by, false)
    }

    fn decr_by(&mut self, key: &[u8], by: i64) -> Result<i64> {
        let neg = by.checked_neg().ok_or(LockError::Overflow)?;
        self.add_to_counter(key, neg, true)
    }

    fn zset_range_by_score(
        &mut self,
        key: &[u8],
        min: f64,
        max: f64,
        limit: Option<usize>,
    ) -> Result<Vec<(Vec<u8>, f64)>> {
        self.zset_range(key, min, max, limit.unwrap_or(usize::MAX))
    }

    fn zset_count(&mut self, key: &[u8], min: f64, max: f64) -> Result<usize> {
        let Some(k) = self.typed(key, KeyKind::Zset)? else { return Ok(0) };
        // `0 .. +inf` (held permits): the members less those below 0, which are none in
        // practice, so it costs O(log N), not a walk of every permit.
        if min == 0.0 && max == f64::INFINITY {
            let len = k.key.len();
            let mut below = 0;
            k.key.zset_walk(f64::NEG_INFINITY, 0.0, |_, s| {
                below += usize::from(s < 0.0);
                s < 0.0
            });
            return Ok(len - below.min(len));
        }
        let mut n = 0;
        k.key.zset_walk(min, max, |_, _| {
            n += 1;
            true
        });
        Ok(n)
    }

    fn zset_first(&mut self, key: &[u8]) -> Result<Option<(Vec<u8>, f64)>> {
        Ok(self.zset_range(key, f64::NEG_INFINITY, f64::INFINITY, 1)?.pop())
    }
}
