//! [`RateStore`] on [`RedisStore`]: the rate limiter's walks over its grant zset, its
//! `ZREMRANGEBYSCORE`, and the window totals remembered between commands.
//!
//! **Remembered totals.** The limiter needs the permits of every member of its zset on every
//! call (`core::ratelimiter`: what the value should be), and summing 100,000 members costs
//! milliseconds. So after each call the total it leaves is kept here, keyed by database and
//! zset name, with a fingerprint of the zset: its length, and its first and last members with
//! their scores. The next call gets the total back only if the fingerprint still matches.
//! Redisson's bodies cannot change the zset and keep that fingerprint: every one of them
//! adds a member of fresh random bytes (the length or the last member changes) or removes a
//! prefix of the lowest scores (the first member changes), and deleting the zset empties it.
//! What could fool it is a hand-made edit that swaps a middle member for another while the
//! length and both ends stay: then the next call counts a stale total (it never crashes or
//! writes outside the limiter's keys), until the zset's ends move. `DEBUG RELOAD` and a full
//! sync leave the zset as it was, so a remembered total stays right.
//!
//! Bounded: at most [`MAX_ENTRIES`] zsets; one more clears the map (each limiter is summed
//! once more, then remembered again). A miss is counted (`lockmod_ratelimiter_window_sums`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::RandomState;

use super::collections::score_text;
use super::{stats, RedisStore};
use crate::core::store::RateStore;
use crate::core::Result;
use crate::ffi::{Arg, Key, KeyKind};
use redis_module::raw;

const ZSET: u32 = raw::REDISMODULE_NOTIFY_ZSET as u32;
const GENERIC: u32 = raw::REDISMODULE_NOTIFY_GENERIC as u32;
/// `RM_SetAbsExpire`'s "no expiry": the key's TTL is removed.
const NO_EXPIRE: i64 = raw::REDISMODULE_NO_EXPIRE as i64;

/// The most zsets whose totals are remembered (about 80 bytes each, plus the name).
pub const MAX_ENTRIES: usize = 1 << 16;

#[derive(Default)]
struct Totals {
    state: RandomState,
    /// (database, zset name) -> (fingerprint, total).
    map: HashMap<(i32, Vec<u8>), (u64, u64), RandomState>,
}

thread_local! {
    // Redis runs every module command and callback on its main thread.
    static TOTALS: RefCell<Totals> = RefCell::default();
}

/// The zset's length and its first and last members with their scores, hashed.
fn fingerprint(state: &RandomState, key: &Key) -> u64 {
    let mut h = state.build_hasher();
    h.write_usize(key.len());
    let mut end = |m: &[u8], score: f64| {
        h.write(m);
        h.write_u64(score.to_bits());
        false
    };
    key.zset_walk(f64::NEG_INFINITY, f64::INFINITY, &mut end);
    key.zset_walk_rev(f64::NEG_INFINITY, f64::INFINITY, &mut end);
    h.finish()
}

/// How many zsets have a remembered total (for `INFO lockmod`).
pub fn remembered() -> usize {
    TOTALS.with(|t| t.try_borrow().map(|t| t.map.len()).unwrap_or(0))
}

/// The module was loaded again: nothing is remembered.
pub fn forget_all() {
    TOTALS.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            t.map.clear();
        }
    });
}

impl RateStore for RedisStore<'_> {
    fn zset_scan(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        if let Some(k) = self.typed(key, KeyKind::Zset)? {
            k.key.zset_walk(min, max, f);
        }
        Ok(())
    }

    fn zset_scan_rev(&mut self, key: &[u8], min: f64, max: f64, f: &mut dyn FnMut(&[u8], f64) -> bool) -> Result<()> {
        if let Some(k) = self.typed(key, KeyKind::Zset)? {
            k.key.zset_walk_rev(min, max, f);
        }
        Ok(())
    }

    fn zset_rem_range(&mut self, key: &[u8], min: f64, max: f64) -> usize {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::Zset {
            return 0;
        }
        let gone = k.key.zset_members_in(min, max);
        for m in &gone {
            k.key.zset_rem(m.as_ref());
        }
        if gone.is_empty() {
            return 0;
        }
        // Replayed as the range: the replica holds the same zset, so it removes the same
        // members, and the command is one line however many they are.
        let (lo, hi) = (score_text(min), score_text(max));
        let args = [Arg::S(k.name.raw()), Arg::B(lo.as_bytes()), Arg::B(hi.as_bytes())];
        self.effect(ZSET, c"zremrangebyscore", k.name.raw(), c"ZREMRANGEBYSCORE", &args);
        self.notify_if_deleted(i);
        gone.len()
    }

    fn known_total(&mut self, key: &[u8]) -> Option<u64> {
        let db = self.db;
        let k = self.typed(key, KeyKind::Zset).ok().flatten()?;
        let known = TOTALS.with(|t| {
            let t = t.try_borrow().ok()?;
            let &(fp, total) = t.map.get(&(db, key.to_vec()))?;
            (fp == fingerprint(&t.state, &k.key)).then_some(total)
        });
        if known.is_none() {
            stats::RATE_WINDOW_SUMS.inc();
        }
        known
    }

    fn persist(&mut self, key: &[u8]) -> bool {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty || k.key.expire_at().is_none() || !k.key.set_expire_at(NO_EXPIRE) {
            return false;
        }
        let name = k.name.raw();
        self.effect(GENERIC, c"persist", name, c"PERSIST", &[Arg::S(name)]);
        true
    }

    fn note_total(&mut self, key: &[u8], total: u64) {
        let db = self.db;
        let i = self.slot(key);
        let k = &self.keys[i];
        TOTALS.with(|t| {
            let Ok(mut t) = t.try_borrow_mut() else { return };
            if k.key.kind() != KeyKind::Zset {
                t.map.remove(&(db, key.to_vec()));
                return;
            }
            if t.map.len() >= MAX_ENTRIES {
                t.map.clear();
            }
            let fp = fingerprint(&t.state, &k.key);
            t.map.insert((db, key.to_vec()), (fp, total));
        });
    }
}
