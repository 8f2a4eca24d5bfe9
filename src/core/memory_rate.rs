//! [`RateStore`] on the in-memory [`MemoryStore`]: the walks use the trait's defaults (over
//! `zset_all`, exact); the remembered totals are kept with a copy of the zset they belong to,
//! and given back only while the zset is that copy, so a total the rate limiter notes wrongly,
//! or trusts after a change, fails the unit tests.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use std::collections::BTreeMap;

use super::memory::{MemoryStore, Value};
use super::rate_window::unpack;
use super::store::RateStore;

impl MemoryStore {
    fn zset_now(&mut self, key: &[u8]) -> BTreeMap<Vec<u8>, f64> {
        match self.value(key) {
            Some(Value::Zset(z)) => z.clone(),
            _ => BTreeMap::new(),
        }
    }
}

impl RateStore for MemoryStore {
    fn known_total(&mut self, key: &[u8]) -> Option<u64> {
        let now = self.zset_now(key);
        match self.rate_totals.get(key) {
            Some((total, then)) if *then == now => Some(*total),
            _ => None,
        }
    }

    fn note_total(&mut self, key: &[u8], total: u64) {
        let now = self.zset_now(key);
        let sum: u64 = now.keys().map(|m| u64::from(unpack(m).map_or(0, |(_, p)| p))).sum();
        assert_eq!(total, sum, "the rate limiter noted a total its zset does not hold");
        self.rate_totals.insert(key.to_vec(), (total, now));
    }

    fn persist(&mut self, key: &[u8]) -> bool {
        self.expire_if_needed(key);
        self.data.get_mut(key).is_some_and(|e| e.1.take().is_some())
    }
}
