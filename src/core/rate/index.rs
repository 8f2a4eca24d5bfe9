//! What the rate limiter remembers about one grant zset between commands ([`WindowIndex`]),
//! so that no call walks the window: the permits of every member, the permits per span of
//! scores (buckets), and the zset's two ends with its length, to know it again.
//!
//! A call needs the permits still live, `total - expired`. It walks the expired members from
//! the front anyway, at most [`STEP`] of them (it removes what it walked); when more than that
//! expired, their sum comes from the buckets: every bucket wholly at or before the threshold,
//! plus a walk of the one bucket the threshold falls in (at most [`MAX_WIDTH`] ms of grants).
//! So a call costs O(STEP + MAX_WIDTH + buckets) whatever the window's length.
//!
//! The index is a cache, never the truth: it belongs to the zset whose [`Ends`] it records.
//! Every zset a Redisson body (or anyone) writes changes its ends (each body adds a member of
//! fresh random bytes, or removes the lowest scores), so the next call finds them different
//! and rebuilds the index with one walk. The store holds indexes (`RateStore::take_index`);
//! this file is the pure part.

use std::collections::{BTreeMap, VecDeque};

/// The most expired members one call removes (and walks from the front).
pub const STEP: usize = 512;
/// The widest bucket, ms: the walk of the bucket the threshold falls in covers at most this
/// many milliseconds of grants (at most `FOLD_MIN - 1` members each, or one folded).
pub const MAX_WIDTH: i64 = 64;
/// A millisecond's grants fold into one member once there are this many: below it, folding
/// (one more `ZADD` and its replication) would cost more than the members it saves.
pub const FOLD_MIN: usize = 16;
/// A busy millisecond is folded once it is this old (ms): a burst of grants is not slowed by
/// folds, and a release (off the newest grants) finds them as they were made.
pub const FOLD_AFTER_MS: i64 = 16;
/// The most milliseconds folded by one call (more come due only after a lull, when calls are
/// few; what is not folded before it leaves the window is removed as it is).
pub const FOLDS_PER_CALL: usize = 2;
/// The newest milliseconds whose grant counts are kept (older ones are past folding).
const RUNS: usize = 64;

/// A member with its score, in the zset's order: by score, then by the member's bytes.
pub type Entry = (f64, Vec<u8>);

/// True if `a` comes before `b` in a zset (ties on the score go by bytes, as `sdscmp`).
pub fn before(a: (f64, &[u8]), b: (f64, &[u8])) -> bool {
    a.0 < b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// How a zset is recognised: its length and its first and last members with their scores.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ends {
    pub count: usize,
    pub first: Option<Entry>,
    pub last: Option<Entry>,
}

impl Ends {
    /// A member was added.
    pub fn added(&mut self, score: f64, member: &[u8]) {
        self.count += 1;
        if self.first.as_ref().is_none_or(|f| before((score, member), (f.0, &f.1))) {
            self.first = Some((score, member.to_vec()));
        }
        if self.last.as_ref().is_none_or(|l| before((l.0, &l.1), (score, member))) {
            self.last = Some((score, member.to_vec()));
        }
    }
}

/// One zset's totals (see the module's header).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowIndex {
    pub ends: Ends,
    /// The newest scores the module granted at, with how many grants each got, oldest first:
    /// the milliseconds that may fold. A cache within the cache: a count that is wrong only
    /// makes a fold look at a millisecond, or not.
    runs: VecDeque<(f64, usize)>,
    total: u128,
    /// Bucket width, ms: fixed for the index's life.
    width: i64,
    /// Permits per bucket (`floor(score / width)`); empty buckets are dropped.
    buckets: BTreeMap<i64, u128>,
}

impl WindowIndex {
    /// An index of an empty zset, for a window of `interval` ms: about 64 buckets a window,
    /// at most [`MAX_WIDTH`] ms each (a short walk of the boundary).
    pub fn empty(interval: i64) -> WindowIndex {
        WindowIndex {
            ends: Ends::default(),
            runs: VecDeque::new(),
            total: 0,
            width: (interval / 64).clamp(1, MAX_WIDTH),
            buckets: BTreeMap::new(),
        }
    }

    fn bucket(&self, score: f64) -> i64 {
        // Saturating: -inf and +inf land in the end buckets.
        (score / self.width as f64).floor() as i64
    }

    /// Permits of every member.
    pub fn total(&self) -> u128 {
        self.total
    }

    /// How many buckets are kept (what the store's memory bound counts).
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// `permits` scored `score` joined the zset (the ends are the caller's to update).
    pub fn add(&mut self, score: f64, permits: u32) {
        self.total += u128::from(permits);
        *self.buckets.entry(self.bucket(score)).or_default() += u128::from(permits);
    }

    /// The module granted at `score`: counted in its millisecond's run if that is the newest
    /// (a grant at an older time is left out: never folded).
    pub fn granted_at(&mut self, score: f64) {
        match self.runs.back_mut() {
            Some(r) if r.0 == score => r.1 += 1,
            Some(r) if r.0 > score => {}
            _ => {
                self.runs.push_back((score, 1));
                if self.runs.len() > RUNS {
                    self.runs.pop_front();
                }
            }
        }
    }

    /// The milliseconds due to fold at `now`: [`FOLD_AFTER_MS`] old, with [`FOLD_MIN`]
    /// grants or more, at most [`FOLDS_PER_CALL`] of them; the ones looked at are forgotten.
    pub fn due_folds(&mut self, now: i64) -> Vec<f64> {
        let due_at = now.saturating_sub(FOLD_AFTER_MS) as f64;
        let mut out = Vec::new();
        while out.len() < FOLDS_PER_CALL {
            match self.runs.front() {
                Some(&(at, n)) if at <= due_at => {
                    self.runs.pop_front();
                    if n >= FOLD_MIN {
                        out.push(at);
                    }
                }
                _ => break,
            }
        }
        out
    }

    /// The newest grants changed (a release): which milliseconds may fold is no longer known.
    pub fn forget_runs(&mut self) {
        self.runs.clear();
    }

    /// `permits` scored `score` left the zset.
    pub fn remove(&mut self, score: f64, permits: u32) {
        let p = u128::from(permits);
        self.total = self.total.saturating_sub(p);
        let b = self.bucket(score);
        if let Some(sum) = self.buckets.get_mut(&b) {
            *sum = sum.saturating_sub(p);
            if *sum == 0 {
                self.buckets.remove(&b);
            }
        }
    }

    /// Permits scored at or below `threshold`: the buckets wholly below the threshold's, plus
    /// `walk(from, threshold)`, the sum of the members from that bucket's start up to it.
    pub fn expired<E>(&self, threshold: i64, walk: impl FnOnce(f64, f64) -> Result<u128, E>) -> Result<u128, E> {
        let b = self.bucket(threshold as f64);
        let whole: u128 = self.buckets.range(..b).map(|(_, p)| p).sum();
        let from = b.saturating_mul(self.width) as f64;
        Ok(whole + walk(from, threshold as f64)?)
    }
}

#[cfg(test)]
impl WindowIndex {
    /// The index a rebuild makes of the zset given in order (member, score), with this
    /// index's width and runs (a cache of its own, never wrong but for what folds): what a
    /// kept index must equal (a store double checks every one).
    pub fn of(&self, members: &[(Vec<u8>, f64)]) -> WindowIndex {
        let mut ix = WindowIndex { width: self.width, runs: self.runs.clone(), ..WindowIndex::empty(1) };
        for (m, score) in members {
            // The member's permits: 4 bytes after its length byte and random bytes.
            let at = 1 + usize::from(m.first().copied().unwrap_or(0));
            let p = m.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            ix.add(*score, p);
            ix.ends.added(*score, m);
        }
        ix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_permits_are_whole_buckets_and_a_walk_of_the_boundary() {
        let mut ix = WindowIndex::empty(64 * 10);
        assert_eq!(ix.width, 10);
        for (score, p) in [(1.0, 1), (9.0, 2), (10.0, 4), (25.0, 8), (31.0, 16)] {
            ix.add(score, p);
        }
        assert_eq!(ix.total(), 31);
        // Threshold 27: buckets 0 and 1 whole (1 + 2 + 4), bucket 2 walked from 20 to 27.
        let mut asked = None;
        let e: Result<u128, ()> = ix.expired(27, |from, to| {
            asked = Some((from, to));
            Ok(8)
        });
        assert_eq!((e, asked), (Ok(15), Some((20.0, 27.0))));
        ix.remove(9.0, 2);
        ix.remove(1.0, 1);
        assert_eq!((ix.total(), ix.buckets()), (28, 3));
        let e: Result<u128, ()> = ix.expired(10, |_, _| Ok(4));
        assert_eq!(e, Ok(4));
    }

    #[test]
    fn widths_follow_the_interval_within_bounds() {
        assert_eq!(WindowIndex::empty(1).width, 1);
        assert_eq!(WindowIndex::empty(1_000).width, 15);
        assert_eq!(WindowIndex::empty(60_000).width, MAX_WIDTH);
        let mut ix = WindowIndex::empty(1_000);
        ix.add(f64::NEG_INFINITY, 3);
        ix.add(f64::INFINITY, 5);
        let e: Result<u128, ()> = ix.expired(0, |_, _| Ok(0));
        assert_eq!(e, Ok(3));
    }

    #[test]
    fn ends_follow_the_zset_order() {
        let mut e = Ends::default();
        e.added(5.0, b"b");
        e.added(5.0, b"a");
        e.added(7.0, b"a");
        e.added(7.0, b"c");
        e.added(1.0, b"z");
        assert_eq!(e.count, 5);
        assert_eq!(e.first, Some((1.0, b"z".to_vec())));
        assert_eq!(e.last, Some((7.0, b"c".to_vec())));
    }
}
