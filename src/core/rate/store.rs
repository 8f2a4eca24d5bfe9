//! The rate limiter's store: what its window needs beyond the synchronizers' store.

use super::index::WindowIndex;
use crate::core::sync::store::SyncStore;
use crate::core::Result;

/// What the rate limiter (`core::rate::limiter`) needs beyond [`SyncStore`]: walks over a score
/// range that allocate nothing per member, the removals it makes, and its windows' indexes
/// remembered between commands.
///
/// The limiter's zset holds about one member per millisecond of its window; a command must
/// not re-read every member to learn how many permits the window holds (Redisson's recompute
/// does, at 50-130 ms per call past 100,000 members). So the algorithm hands the store an
/// index of the zset it leaves behind ([`RateStore::keep_index`]), and takes it back on the
/// next call ([`RateStore::take_index`]), checking it is still that zset's. The defaults
/// remember nothing: every call then walks the zset, which is exact and slow.
pub trait RateStore: SyncStore {
    /// Visits the members with `min <= score <= max`, lowest score first (ties by member),
    /// while `f(member, score)` returns true. `WrongType` if the key is not a zset.
    fn zset_scan(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        for (m, score) in self.zset_range_by_score(key, min, max, None)? {
            if !f(&m, score) {
                break;
            }
        }
        Ok(())
    }
    /// [`RateStore::zset_scan`] from the highest score down.
    fn zset_scan_rev(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        for (m, score) in self.zset_range_by_score(key, min, max, None)?.into_iter().rev() {
            if !f(&m, score) {
                break;
            }
        }
        Ok(())
    }
    /// `ZREMRANGEBYSCORE key min max` on a key known to be a zset (or absent): how many went.
    fn zset_rem_range(&mut self, key: &[u8], min: f64, max: f64) -> usize {
        let gone: Vec<Vec<u8>> =
            self.zset_range_by_score(key, min, max, None).unwrap_or_default().into_iter().map(|(m, _)| m).collect();
        let refs: Vec<&[u8]> = gone.iter().map(Vec::as_slice).collect();
        self.zset_rem_many(key, &refs)
    }
    /// `ZREMRANGEBYRANK key 0 n-1` on a key known to be a zset (or absent): its `n` lowest
    /// members go.
    fn zset_rem_first(&mut self, key: &[u8], n: usize) {
        let gone: Vec<Vec<u8>> = self
            .zset_range_by_score(key, f64::NEG_INFINITY, f64::INFINITY, Some(n))
            .unwrap_or_default()
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let refs: Vec<&[u8]> = gone.iter().map(Vec::as_slice).collect();
        self.zset_rem_many(key, &refs);
    }
    /// `HGET` of four fields at once: `f(i, value)` for each field the hash holds. One lookup of
    /// the hash where a store can; `WrongType` if the key is not a hash.
    fn hash_get4(&mut self, key: &[u8], fields: [&[u8]; 4], f: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        for (i, field) in fields.iter().enumerate() {
            if let Some(v) = self.hash_get(key, field)? {
                f(i, &v);
            }
        }
        Ok(())
    }
    /// `DECRBY key by` on a key the caller knows holds the integer `current` (it just read or
    /// wrote it): a store need not read it again.
    fn decr_known(&mut self, key: &[u8], current: i64, by: i64) -> Result<i64> {
        let _ = current;
        self.decr_by(key, by)
    }
    /// `UNLINK key`: `DEL`, the memory freed in the background.
    fn zset_unlink(&mut self, key: &[u8]) {
        self.del(key);
    }
    /// The index remembered for the zset at `key`, taken out of the store (the caller gives
    /// it back with [`RateStore::keep_index`], or it is forgotten). The caller checks that it
    /// is still this zset's.
    fn take_index(&mut self, _key: &[u8]) -> Option<WindowIndex> {
        None
    }
    /// Remembers `index` for the zset at `key` until the next [`RateStore::take_index`].
    fn keep_index(&mut self, _key: &[u8], _index: WindowIndex) {}
    /// A window's index was rebuilt by walking its zset (`INFO lockmod` counts these).
    fn index_rebuilt(&mut self) {}
    /// `PERSIST key` on a key known to have an expiry: true if it had one (Redisson's
    /// `clearExpire` over the limiter's keys).
    fn persist(&mut self, key: &[u8]) -> bool;
}
