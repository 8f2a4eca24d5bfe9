//! [`RateStore`] on [`RedisStore`]: the rate limiter's walks over its grant zset, its
//! removals (`ZREMRANGEBYSCORE`, `ZREMRANGEBYRANK`, `UNLINK`), and the windows' indexes
//! remembered between commands.
//!
//! **Remembered indexes.** The limiter needs the permits of its whole window on every call,
//! and summing 100,000 members costs milliseconds. So each call hands back the index of the
//! zset it leaves (`core::rate::index`: the total, the permits per span of time, the zset's
//! ends), kept here by database and zset name, and takes it on the next call, which checks the
//! zset's length and ends against it. Redisson's bodies cannot change the zset and keep its
//! ends: every one of them adds a member of fresh random bytes (the length or the last member
//! changes) or removes a prefix of the lowest scores (the first member changes), and deleting
//! the zset empties it. What could fool it is a hand-made edit that swaps a middle member for
//! another while the length and both ends stay: then the next call counts a stale total (it
//! never crashes or writes outside the limiter's keys), until the zset's ends move. `DEBUG
//! RELOAD` and a full sync leave the zset as it was, so a remembered index stays right.
//!
//! Bounded: at most [`MAX_ENTRIES`] zsets and [`MAX_BUCKETS`] buckets in all; one more clears
//! the map (each limiter is summed once more, then remembered again). A rebuild is counted
//! (`lockmod_ratelimiter_window_sums`).

use std::cell::RefCell;
use std::collections::HashMap;

use foldhash::fast::RandomState;

use super::collections::with_score_text;
use super::keys::Name;
use super::{stats, RedisStore, GENERIC};
use crate::core::rate::index::WindowIndex;
use crate::core::rate::store::RateStore;
use crate::core::Result;
use crate::ffi::shared::shared;
use crate::ffi::{Arg, KeyKind};
use redis_module::raw;

const ZSET: u32 = raw::REDISMODULE_NOTIFY_ZSET as u32;
/// `RM_SetAbsExpire`'s "no expiry": the key's TTL is removed.
const NO_EXPIRE: i64 = raw::REDISMODULE_NO_EXPIRE as i64;

/// The most zsets whose indexes are remembered.
pub const MAX_ENTRIES: usize = 1 << 16;
/// The most buckets in all (each about 40 bytes): a 10-minute window keeps about 1,200.
pub const MAX_BUCKETS: usize = 1 << 20;

#[derive(Default)]
struct Indexes {
    /// Per database: zset name -> its index.
    dbs: Vec<HashMap<Vec<u8>, WindowIndex, RandomState>>,
    /// The index kept last, outside the map: a limiter called over and over is taken and kept
    /// without hashing its name.
    hot: Option<(i32, Vec<u8>, WindowIndex)>,
    entries: usize,
    buckets: usize,
}

impl Indexes {
    fn take(&mut self, db: i32, key: &[u8]) -> Option<(Vec<u8>, WindowIndex)> {
        let (name, ix) = match self.hot.take() {
            Some((d, name, ix)) if d == db && name == key => (name, ix),
            other => {
                self.hot = other;
                self.dbs.get_mut(usize::try_from(db).ok()?)?.remove_entry(key)?
            }
        };
        self.entries -= 1;
        self.buckets -= ix.buckets();
        Some((name, ix))
    }

    fn keep(&mut self, db: i32, key: Vec<u8>, ix: WindowIndex) {
        if db < 0 {
            return;
        }
        if self.entries >= MAX_ENTRIES || self.buckets + ix.buckets() > MAX_BUCKETS {
            self.clear();
        }
        if let Some((d, name, old)) = self.hot.take() {
            // Into the map (`d` was checked when it was kept).
            let d = d as usize;
            if self.dbs.len() <= d {
                self.dbs.resize_with(d + 1, HashMap::default);
            }
            if let Some(replaced) = self.dbs[d].insert(name, old) {
                self.entries -= 1;
                self.buckets -= replaced.buckets();
            }
        }
        // `key` is not in the map: it was taken from it (or never there) this command; were a
        // stale copy left, the hot one is found first, and replaces it when it moves in.
        self.entries += 1;
        self.buckets += ix.buckets();
        self.hot = Some((db, key, ix));
    }

    fn clear(&mut self) {
        self.dbs.clear();
        self.hot = None;
        (self.entries, self.buckets) = (0, 0);
    }
}

thread_local! {
    // Redis runs every module command and callback on its main thread.
    static INDEXES: RefCell<Indexes> = RefCell::default();
}

/// How many zsets have a remembered index (for `INFO lockmod`).
pub fn remembered() -> usize {
    INDEXES.with(|t| t.try_borrow().map(|t| t.entries).unwrap_or(0))
}

/// The module was loaded again: nothing is remembered.
pub fn forget_all() {
    INDEXES.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            t.clear();
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
        with_score_text(min, |lo| {
            with_score_text(max, |hi| {
                let args = [Arg::S(k.name.raw()), Arg::B(lo), Arg::B(hi)];
                self.effect(ZSET, c"zremrangebyscore", k.name.raw(), c"ZREMRANGEBYSCORE", &args);
            })
        });
        self.notify_if_deleted(i);
        gone.len()
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

    fn zset_rem_first(&mut self, key: &[u8], n: usize) {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::Zset || n == 0 {
            return;
        }
        let gone = k.key.zset_first_members(n);
        for m in &gone {
            k.key.zset_rem(m.as_ref());
        }
        // Replayed as the rank range: the replica holds the same zset.
        let last = gone.len() as i64 - 1;
        self.effect(
            ZSET,
            c"zremrangebyrank",
            k.name.raw(),
            c"ZREMRANGEBYRANK",
            &[Arg::S(k.name.raw()), Arg::I(0), Arg::I(last)],
        );
        self.notify_if_deleted(i);
    }

    fn zset_unlink(&mut self, key: &[u8]) {
        self.remove(key, true);
    }

    fn hash_get4(&mut self, key: &[u8], fields: [&[u8]; 4], f: &mut dyn FnMut(usize, &[u8])) -> Result<()> {
        // The limiter's field names are shared strings: no string is made for them.
        let names = fields.map(|b| match shared(b) {
            Some(s) => Name::Shared(s),
            None => Name::Own(self.ctx.string(b)),
        });
        if let Some(k) = self.typed(key, KeyKind::Hash)? {
            let values = k.key.hash_get4([names[0].raw(), names[1].raw(), names[2].raw(), names[3].raw()]);
            for (i, v) in values.iter().enumerate() {
                if let Some(v) = v {
                    f(i, v.bytes());
                }
            }
        }
        Ok(())
    }

    fn decr_known(&mut self, key: &[u8], current: i64, by: i64) -> Result<i64> {
        let neg = by.checked_neg().ok_or(crate::core::LockError::Overflow)?;
        // Known to be a string holding `current`: typed, so a wrong type still errs, not read.
        self.typed(key, KeyKind::String)?;
        self.add_to_known(key, current, neg, true)
    }

    fn take_index(&mut self, key: &[u8]) -> Option<WindowIndex> {
        let db = self.db;
        let (name, ix) = INDEXES.with(|t| t.try_borrow_mut().ok()?.take(db, key))?;
        // The map's copy of the name, handed back with the index.
        self.index_name = Some(name);
        Some(ix)
    }

    fn keep_index(&mut self, key: &[u8], index: WindowIndex) {
        let db = self.db;
        let name = match self.index_name.take() {
            Some(n) if n == key => n,
            _ => key.to_vec(),
        };
        INDEXES.with(|t| {
            if let Ok(mut t) = t.try_borrow_mut() {
                t.keep(db, name, index);
            }
        });
    }

    fn index_rebuilt(&mut self) {
        stats::RATE_WINDOW_SUMS.inc();
    }
}
