//! [`RateStore`] on the in-memory [`MemoryStore`]: the walks use the trait's defaults (over
//! `zset_all`, exact); the windows' indexes are kept, and each one handed back is checked
//! against a rebuild of the zset it claims to be, so an index the rate limiter keeps wrongly
//! fails the unit tests.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::index::WindowIndex;
use crate::core::memory::MemoryStore;
use crate::core::rate::store::RateStore;
use crate::core::store::Store;
use crate::core::sync::store::SyncStore;
use crate::core::Result;

impl RateStore for MemoryStore {
    fn zset_scan(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        for (m, score) in self.zset_range_by_score(key, min, max, None)? {
            self.visited += 1;
            if !f(&m, score) {
                break;
            }
        }
        Ok(())
    }

    fn zset_scan_rev(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        for (m, score) in self.zset_range_by_score(key, min, max, None)?.into_iter().rev() {
            self.visited += 1;
            if !f(&m, score) {
                break;
            }
        }
        Ok(())
    }

    fn take_index(&mut self, key: &[u8]) -> Option<WindowIndex> {
        self.rate_index.remove(key)
    }

    fn keep_index(&mut self, key: &[u8], index: WindowIndex) {
        let members = self.zset_all(key).expect("a kept index is a zset's");
        let want = index.of(&members);
        assert_eq!(index, want, "the rate limiter kept an index its zset does not match");
        self.rate_index.insert(key.to_vec(), index);
    }

    fn index_rebuilt(&mut self) {
        self.index_rebuilds += 1;
    }

    fn persist(&mut self, key: &[u8]) -> bool {
        self.expire_if_needed(key);
        self.data.get_mut(key).is_some_and(|e| e.1.take().is_some())
    }
}
