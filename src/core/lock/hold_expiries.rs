//! The read holds of one read-write lock, with their expiries kept in order.
//!
//! Redisson's read unlock sets the lock's TTL to the largest remaining lease over every hold
//! the lock hash records: for each integer field `f` with count `c`, the timeout keys
//! `T(f):1..=c`. Scanning them costs O(holds) per unlock. This structure mirrors exactly that
//! set (positions `1..=c` of every integer field, each with its key's state) and keeps the
//! absolute expiries in an ordered multiset, so the largest is found in O(log N).
//!
//! It is a cache of the keyspace, never a source of truth: whoever keeps one must update it on
//! every write it makes and discard it when anything else may have written (`crate::watch::hold_index`).
//! Expiry needs no update: an expired hold's time lies in the past, so it never counts.

use std::collections::{BTreeMap, HashMap};

use crate::core::store::MAX_HOLDS_PER_FIELD;
use crate::core::store::{TTL_MISSING, TTL_PERSISTENT};

/// The state of one hold's timeout key: an absolute expiry (ms), or [`TTL_MISSING`] /
/// [`TTL_PERSISTENT`] (neither ever counts: Redisson only takes a positive `PTTL`).
pub type HoldState = i64;

fn counts(state: HoldState) -> bool {
    state != TTL_MISSING && state != TTL_PERSISTENT
}

#[derive(Default, Debug)]
pub struct HoldExpiries {
    /// Per integer field of the lock hash: the state of `T(field):i` at index `i - 1`.
    fields: HashMap<Vec<u8>, Vec<HoldState>>,
    /// Multiset of the expiries that count: expiry -> how many holds have it.
    ordered: BTreeMap<i64, u32>,
    positions: usize,
}

impl HoldExpiries {
    /// How many holds are tracked (the memory this costs grows with it).
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Sets `field`'s count to `count` (non-integer fields and counts below 1 track nothing),
    /// reading the state of each newly covered hold `i` with `state_of(i)`.
    pub fn set_count(&mut self, field: &[u8], count: i64, mut state_of: impl FnMut(i64) -> HoldState) {
        let count = count.clamp(0, MAX_HOLDS_PER_FIELD) as usize;
        let mut states = self.fields.remove(field).unwrap_or_default();
        while states.len() > count {
            if let Some(s) = states.pop() {
                self.forget(s);
            }
        }
        while states.len() < count {
            let s = state_of(states.len() as i64 + 1);
            self.remember(s);
            states.push(s);
        }
        if !states.is_empty() {
            self.fields.insert(field.to_vec(), states);
        }
    }

    /// The current count of `field` (0 when untracked).
    pub fn count(&self, field: &[u8]) -> i64 {
        self.fields.get(field).map_or(0, |s| s.len() as i64)
    }

    /// The field is gone from the hash (`HDEL`), or no longer holds an integer.
    pub fn remove_field(&mut self, field: &[u8]) {
        self.set_count(field, 0, |_| TTL_MISSING);
    }

    /// `T(field):i` now has `state`; nothing if the hash does not count that hold.
    pub fn set_hold(&mut self, field: &[u8], i: i64, state: HoldState) {
        let Some(old) = self.slot(field, i).map(|s| std::mem::replace(s, state)) else { return };
        self.forget(old);
        self.remember(state);
    }

    /// The largest `PTTL` over the tracked holds at `now`, or 0 when none has time left
    /// (what the unlock tests is only whether it is positive).
    pub fn max_pttl(&self, now: i64) -> i64 {
        match self.ordered.last_key_value() {
            Some((&at, _)) if at > now => at - now,
            _ => 0,
        }
    }

    fn slot(&mut self, field: &[u8], i: i64) -> Option<&mut HoldState> {
        let index = usize::try_from(i.checked_sub(1)?).ok()?;
        self.fields.get_mut(field)?.get_mut(index)
    }

    fn remember(&mut self, s: HoldState) {
        self.positions += 1;
        if counts(s) {
            *self.ordered.entry(s).or_default() += 1;
        }
    }

    fn forget(&mut self, s: HoldState) {
        self.positions = self.positions.saturating_sub(1);
        if !counts(s) {
            return;
        }
        if let Some(n) = self.ordered.get_mut(&s) {
            *n -= 1;
            if *n == 0 {
                self.ordered.remove(&s);
            }
        }
    }
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000;

    fn with(holds: &[(&str, &[HoldState])]) -> HoldExpiries {
        let mut h = HoldExpiries::default();
        for (field, states) in holds {
            h.set_count(field.as_bytes(), states.len() as i64, |i| states[i as usize - 1]);
        }
        h
    }

    #[test]
    fn the_largest_expiry_of_any_field_sets_the_ttl() {
        let h = with(&[("a", &[NOW + 10, NOW + 500]), ("b", &[NOW + 300])]);
        assert_eq!(h.max_pttl(NOW), 500);
        assert_eq!(h.positions(), 3);
    }

    #[test]
    fn missing_persistent_and_past_holds_never_count() {
        let h = with(&[("a", &[TTL_MISSING, TTL_PERSISTENT, NOW - 5, NOW])]);
        assert_eq!(h.max_pttl(NOW), 0);
    }

    #[test]
    fn lowering_a_count_drops_the_holds_above_it() {
        let mut h = with(&[("a", &[NOW + 10, NOW + 500])]);
        h.set_count(b"a", 1, |_| unreachable!("nothing new is covered"));
        assert_eq!((h.max_pttl(NOW), h.count(b"a"), h.positions()), (10, 1, 1));
        h.remove_field(b"a");
        assert_eq!((h.max_pttl(NOW), h.count(b"a"), h.positions()), (0, 0, 0));
    }

    #[test]
    fn raising_a_count_reads_the_newly_covered_keys() {
        let mut h = with(&[("a", &[NOW + 10])]);
        let mut asked = Vec::new();
        h.set_count(b"a", 3, |i| {
            asked.push(i);
            NOW + 100 * i
        });
        assert_eq!(asked, [2, 3]);
        assert_eq!(h.max_pttl(NOW), 300);
    }

    #[test]
    fn equal_expiries_are_counted_separately() {
        let mut h = with(&[("a", &[NOW + 50, NOW + 50])]);
        h.set_hold(b"a", 2, TTL_MISSING);
        assert_eq!(h.max_pttl(NOW), 50);
        h.set_hold(b"a", 1, TTL_MISSING);
        assert_eq!(h.max_pttl(NOW), 0);
    }

    #[test]
    fn holds_the_hash_does_not_count_are_ignored() {
        let mut h = with(&[("a", &[NOW + 50])]);
        h.set_hold(b"a", 2, NOW + 900);
        h.set_hold(b"a", 0, NOW + 900);
        h.set_hold(b"b", 1, NOW + 900);
        assert_eq!((h.max_pttl(NOW), h.positions()), (50, 1));
    }
}
