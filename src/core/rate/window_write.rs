//! The writes of a rate limiter's window ([`Window`], read by `super::window::read`):
//! removing what left it in bounded steps, folding a millisecond's grants into one member,
//! adding a grant, taking permits off the newest grants. Each keeps the window's index
//! current (its totals and its ends), so the next call need not walk the zset.

use super::index::{before, WindowIndex, FOLD_MIN};
use super::window::{pack, scan_grants, unpack, Window, WHOLE};
use crate::core::rate::store::RateStore;
use crate::core::{LockError, Result};

impl Window {
    /// Removes the expired members the read walked: all of them when at most `STEP` expired,
    /// else the `STEP` oldest (`ZREMRANGEBYRANK`; the next calls remove the rest, and until
    /// then [`Window::expired`] says what they hold). A window that left whole goes at once,
    /// unlinked past [`WHOLE`] members (Redis frees it in the background).
    pub fn settle<S: RateStore>(&mut self, s: &mut S, z: &[u8]) {
        if self.whole {
            if self.members > WHOLE {
                s.zset_unlink(z);
            } else {
                s.zset_rem_range(z, f64::NEG_INFINITY, self.threshold as f64);
            }
            self.whole = false;
            (self.members, self.live, self.expired) = (0, 0, 0);
            self.index = Some(WindowIndex::empty(self.interval));
            return;
        }
        if self.walked.is_empty() {
            return;
        }
        let k = self.walked.len();
        if self.all_walked {
            s.zset_rem_range(z, f64::NEG_INFINITY, self.threshold as f64);
        } else {
            s.zset_rem_first(z, k);
        }
        let gone: i128 = self.walked.iter().map(|&(_, p)| i128::from(p)).sum();
        if let Some(ix) = &mut self.index {
            for &(score, p) in &self.walked {
                ix.remove(score, p);
            }
            ix.ends.count -= k;
            ix.ends.first = self.next.take();
        }
        self.members -= k;
        self.expired -= gone;
        self.walked.clear();
    }

    /// Folds the members of each busy millisecond ([`FOLD_MIN`] grants or more) into one (the
    /// first one's random bytes, the sum of the permits) once it is `FOLD_AFTER_MS` old, a few
    /// a call: a grant adds a member of its own (one `ZADD`, as Redisson's body), and a busy
    /// millisecond ends as one member, so the window holds fewer than `FOLD_MIN` members per
    /// millisecond at any rate (and the newest milliseconds' grants as they came).
    pub fn fold<S: RateStore>(&mut self, s: &mut S, z: &[u8], now: i64) -> Result<()> {
        let Some(ix) = &mut self.index else { return Ok(()) };
        for at in ix.due_folds(now) {
            // One that left the window is the settle's to remove.
            if at > self.threshold as f64 {
                self.fold_at(s, z, at)?;
            }
        }
        Ok(())
    }

    /// Folds the members scored `at`, if they are `FOLD_MIN` or more and their sum fits.
    fn fold_at<S: RateStore>(&mut self, s: &mut S, z: &[u8], at: f64) -> Result<()> {
        let (mut run, mut total) = (Vec::<Vec<u8>>::new(), 0u64);
        scan_grants(s, z, at, at, |m, p| {
            total += u64::from(p);
            run.push(m.to_vec());
        })?;
        let (Some(sum), true) = (u32::try_from(total).ok(), run.len() >= FOLD_MIN) else { return Ok(()) };
        let Some(ix) = &mut self.index else { return Ok(()) };
        let merged = pack(unpack(&run[0]).map_or(&[][..], |(r, _)| r), sum);
        let (first, last) = (ix.ends.first.as_ref().map(|f| f.0), ix.ends.last.as_ref().map(|l| l.0));
        if first == Some(at) && last == Some(at) {
            // The millisecond is the whole zset: the merged member goes in first, so the zset
            // (and its TTL) never vanishes between.
            s.zset_add(z, &merged, at);
            let gone: Vec<&[u8]> = run.iter().map(Vec::as_slice).filter(|m| *m != merged.as_slice()).collect();
            s.zset_rem_many(z, &gone);
        } else {
            // One `ZREMRANGEBYSCORE at at` (the replica holds the same members), then the sum.
            s.zset_rem_range(z, at, at);
            s.zset_add(z, &merged, at);
        }
        ix.ends.count = ix.ends.count + 1 - run.len();
        if first == Some(at) {
            ix.ends.first = Some((at, merged.clone()));
        }
        if last == Some(at) {
            ix.ends.last = Some((at, merged));
        }
        self.members = ix.ends.count;
        Ok(())
    }

    /// Adds a grant of `permits` scored `now`, a member of `random` bytes.
    pub fn add_grant<S: RateStore>(&mut self, s: &mut S, z: &[u8], now: i64, permits: u32, random: &[u8]) {
        let member = pack(random, permits);
        let at = now as f64;
        if !s.zset_add(z, &member, at) {
            // The very bytes were there (never, with fresh random bytes): its score moved, so
            // the index is no longer this zset's.
            self.index = None;
            return;
        }
        if self.index.is_none() && self.members == 0 {
            self.index = Some(WindowIndex::empty(self.interval));
        }
        self.members += 1;
        self.live += i128::from(permits);
        let Some(ix) = &mut self.index else { return };
        ix.add(at, permits);
        ix.ends.added(at, &member);
        ix.granted_at(at);
    }

    /// Takes `amount` permits off the newest members: a member wholly taken is removed, the
    /// last one touched keeps its random bytes, score and the rest of its permits. What a
    /// release gives back is thereby no longer in the window, so its later expiry credits
    /// nothing. Returns what was taken (less than `amount` only when the zset held less).
    pub fn take_newest<S: RateStore>(&mut self, s: &mut S, z: &[u8], amount: i128) -> Result<i128> {
        if amount <= 0 {
            return Ok(0);
        }
        let mut left = amount;
        let mut gone: Vec<(Vec<u8>, f64, u32)> = Vec::new();
        let mut partial: Option<(Vec<u8>, f64, u32)> = None;
        let mut after: Option<(f64, Vec<u8>)> = None;
        let mut bad = false;
        s.zset_scan_rev(z, f64::NEG_INFINITY, f64::INFINITY, &mut |m, score| {
            if left == 0 {
                // The newest member left untouched: the new last one, or beside the remade one.
                after = Some((score, m.to_vec()));
                return false;
            }
            let Some((_, p)) = unpack(m) else {
                bad = true;
                return false;
            };
            if i128::from(p) <= left {
                left -= i128::from(p);
                gone.push((m.to_vec(), score, p));
            } else {
                partial = Some((m.to_vec(), score, p - left as u32));
                left = 0;
            }
            true
        })?;
        if bad {
            return Err(LockError::BadGrant);
        }
        let refs: Vec<&[u8]> = gone.iter().map(|g| g.0.as_slice()).collect();
        s.zset_rem_many(z, &refs);
        let mut last = after.clone();
        let mut ix = self.index.take();
        if let Some((m, score, rest)) = partial {
            let remade = pack(unpack(&m).map_or(&[][..], |(r, _)| r), rest);
            // Added before the old one goes, so the zset (and its TTL) never vanishes between.
            s.zset_add(z, &remade, score);
            s.zset_rem(z, &m);
            if let (Some(ix), Some((_, p))) = (&mut ix, unpack(&m)) {
                ix.remove(score, p - rest);
            }
            if last.as_ref().is_none_or(|l| before((l.0, &l.1), (score, &remade))) {
                last = Some((score, remade));
            }
        }
        if let Some(ix) = &mut ix {
            for (_, score, p) in &gone {
                ix.remove(*score, *p);
            }
            ix.ends.count -= gone.len();
            if ix.ends.count == 0 {
                ix.ends.first = None;
            } else if after.is_none() {
                // Everything was touched: what is left is the remade member alone.
                ix.ends.first = last.clone();
            }
            ix.ends.last = if ix.ends.count == 0 { None } else { last };
            ix.forget_runs();
            self.members = ix.ends.count;
        }
        self.index = ix;
        let taken = amount - left;
        self.live -= taken;
        Ok(taken)
    }
}
