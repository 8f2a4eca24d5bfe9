//! A rate limiter's window: the grant zset `{name}:permits[:id]` read the way Redisson's
//! bodies use it, without walking members a call does not need. The writes are in
//! `window_write.rs`.
//!
//! | zset member                                   | score                      |
//! |-----------------------------------------------|----------------------------|
//! | `struct.pack('Bc0I', #random, random, n)`:    | grant time (ms, the        |
//! | one length byte, the random bytes (16 since   | window's clock: the        |
//! | Redisson 3.21, 8 before), `n` as 4 bytes LE   | server's, or `NOW`/ARGV)   |
//!
//! A grant scored `t` holds its permits while `t > now - interval` (*live*) and is *expired*
//! from `now - interval` on. Every body since 3.35 reads the zset only through sums over
//! score ranges and the lowest score, so merging grants of one millisecond into one member
//! changes nothing they compute, and bounds the zset to about `interval` members.
//!
//! [`read`] costs O(log N) plus the expired members it walks from the front (at most
//! [`STEP`], which a write then removes) plus, when more than that expired, one bucket of the
//! window's index (`core::rate::index`): never a walk of the window, unless the index is
//! missing or belongs to another zset (a Redisson body wrote, the server restarted), when one
//! walk rebuilds it. Nothing here reads a clock: `now` is the caller's (the server's, `NOW`, or
//! a Redisson body's `ARGV`).

use super::index::{Ends, WindowIndex, STEP};
use crate::core::rate::store::RateStore;
use crate::core::{LockError, Result};

/// Random bytes in a member the module makes (Redisson's `generateIdArray()`).
pub const RANDOM_LEN: usize = 16;
/// The most permits one member holds: Lua's `struct.pack('I')` is 4 bytes.
pub const MAX_PERMITS: i64 = u32::MAX as i64;
/// Beyond this many members, a window that left whole is unlinked (freed in the background)
/// rather than removed member by member (`ZREMRANGEBYSCORE`, which Redisson's bodies use, and
/// whose events a small window keeps).
pub const WHOLE: usize = 64;

/// `struct.pack('Bc0I', #random, random, permits)`. A random longer than 255 bytes keeps its
/// first 255 (the length byte's range; no caller makes one).
pub fn pack(random: &[u8], permits: u32) -> Vec<u8> {
    let random = &random[..random.len().min(255)];
    let mut m = Vec::with_capacity(1 + random.len() + 4);
    m.push(random.len() as u8);
    m.extend_from_slice(random);
    m.extend_from_slice(&permits.to_le_bytes());
    m
}

/// `struct.unpack('Bc0I', member)`: (random, permits), or None when the member is shorter
/// than its length byte says (Lua's "data string too short"). Bytes past the permits are
/// ignored, as Lua ignores them.
pub fn unpack(member: &[u8]) -> Option<(&[u8], u32)> {
    let (&len, rest) = member.split_first()?;
    let len = usize::from(len);
    let random = rest.get(..len)?;
    let n = rest.get(len..len + 4)?;
    Some((random, u32::from_le_bytes([n[0], n[1], n[2], n[3]])))
}

fn permits_of(member: &[u8]) -> Result<u32> {
    unpack(member).map(|(_, p)| p).ok_or(LockError::BadGrant)
}

/// Visits the grants scored `min..=max`, lowest first: `f(member, permits)`. `BadGrant` on a
/// malformed member (Redisson's body fails on it too), where the walk stops.
pub fn scan_grants<S: RateStore>(s: &mut S, z: &[u8], min: f64, max: f64, mut f: impl FnMut(&[u8], u32)) -> Result<()> {
    let mut bad = false;
    s.zset_scan(z, min, max, &mut |m, _| match unpack(m) {
        Some((_, p)) => {
            f(m, p);
            true
        }
        None => {
            bad = true;
            false
        }
    })?;
    if bad {
        return Err(LockError::BadGrant);
    }
    Ok(())
}

/// Sums the permits of the members scored `min..=max` (`BadGrant` on a malformed member).
pub fn sum<S: RateStore>(s: &mut S, z: &[u8], min: f64, max: f64) -> Result<(i128, usize)> {
    let (mut total, mut n) = (0i128, 0usize);
    scan_grants(s, z, min, max, |_, p| {
        total += i128::from(p);
        n += 1;
    })?;
    Ok((total, n))
}

/// The smallest score above `x` (scores are doubles; a range starts inclusive).
pub fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let bits = x.to_bits();
    f64::from_bits(if x > 0.0 { bits + 1 } else { bits - 1 })
}

/// The lowest score in `z` above `threshold` (the oldest live grant), if any.
pub fn oldest_live<S: RateStore>(s: &mut S, z: &[u8], threshold: i64) -> Result<Option<f64>> {
    let mut first = None;
    s.zset_scan(z, next_up(threshold as f64), f64::INFINITY, &mut |_, score| {
        first = Some(score);
        false
    })?;
    Ok(first)
}

/// One grant zset as a call sees it at `now`, with what its settle will remove and the index
/// it keeps current. Made by [`read`]; written by `window_write`'s methods; its index is
/// given back to the store by [`Window::finish`].
#[derive(Debug)]
pub struct Window {
    /// `now - interval`: a member scored at or below it is expired.
    pub threshold: i64,
    /// Members in the zset.
    pub members: usize,
    /// Permits of the live members.
    pub live: i128,
    /// Permits of the expired members still in the zset (after a settle: those it left).
    pub expired: i128,
    /// Every member expired (and none is live): a settle drops the zset.
    pub(super) whole: bool,
    /// The expired members walked from the front, (score, permits), at most [`STEP`]: what a
    /// settle removes.
    pub(super) walked: Vec<(f64, u32)>,
    /// `walked` holds every expired member.
    pub(super) all_walked: bool,
    /// The member after the walked ones: the zset's first once they are gone (kept only when
    /// some were walked).
    pub(super) next: Option<(f64, Vec<u8>)>,
    /// The lowest live score, when the front walk reached it.
    pub(super) oldest: Option<f64>,
    pub(super) index: Option<WindowIndex>,
    pub(super) interval: i64,
}

impl Window {
    fn empty(threshold: i64, interval: i64) -> Window {
        Window {
            threshold,
            members: 0,
            live: 0,
            expired: 0,
            whole: false,
            walked: Vec::new(),
            all_walked: true,
            next: None,
            oldest: None,
            index: Some(WindowIndex::empty(interval)),
            interval,
        }
    }

    /// The lowest live score (the oldest live grant), looked up when the walk stopped short.
    pub fn oldest_live<S: RateStore>(&self, s: &mut S, z: &[u8]) -> Result<Option<f64>> {
        if self.whole {
            return Ok(None);
        }
        match self.oldest {
            Some(t) if self.all_walked => Ok(Some(t)),
            _ => oldest_live(s, z, self.threshold),
        }
    }

    /// Gives the index back to the store (a window read and not written keeps it as found).
    pub fn finish<S: RateStore>(&mut self, s: &mut S, z: &[u8]) {
        match self.index.take() {
            Some(ix) if ix.ends.count > 0 => s.keep_index(z, ix),
            _ => {}
        }
    }
}

/// Reads the window of zset `z` at `now` for a limiter of `interval` ms: `WrongType` if `z` is
/// no zset, `BadGrant` if a member it reads is malformed. The store's index of `z` is taken
/// (and kept in the window), or rebuilt if it is not `z`'s: its length and first member are
/// compared (every body of Redisson's that writes the zset changes one of them), and its last
/// member says whether the whole window left.
pub fn read<S: RateStore>(s: &mut S, z: &[u8], now: i64, interval: i64) -> Result<Window> {
    let threshold = now.saturating_sub(interval);
    let thr = threshold as f64;
    let members = s.zset_len(z)?;
    let mut index = s.take_index(z).filter(|ix| ix.ends.count == members);
    let mut w = Window::empty(threshold, interval);
    if members == 0 {
        return Ok(w);
    }
    w.members = members;
    // A window the index says left whole: once its first member confirms the index, nothing
    // more is walked.
    let newest = index.as_ref().and_then(|ix| ix.ends.last.as_ref()).map(|l| l.0);
    let left_whole = newest.is_some_and(|t| t <= thr);
    let (mut first_known, mut seen, mut bad) = (false, false, false);
    let (walked, next, oldest) = (&mut w.walked, &mut w.next, &mut w.oldest);
    s.zset_scan(z, f64::NEG_INFINITY, f64::INFINITY, &mut |m, score| {
        if !seen {
            seen = true;
            first_known =
                index.as_ref().and_then(|ix| ix.ends.first.as_ref()).is_some_and(|f| f.0 == score && f.1 == m);
            if first_known && left_whole {
                return false;
            }
        }
        if score <= thr && walked.len() < STEP {
            match unpack(m) {
                Some((_, p)) => walked.push((score, p)),
                None => bad = true,
            }
            return !bad;
        }
        if !walked.is_empty() {
            *next = Some((score, m.to_vec()));
        }
        if score > thr {
            *oldest = Some(score);
        }
        false
    })?;
    if bad {
        return Err(LockError::BadGrant);
    }
    if !first_known {
        index = None;
    }
    w.all_walked = w.oldest.is_some();
    let whole = match (w.walked.len() == members, w.all_walked, &index) {
        (true, _, _) => true,
        (_, true, _) => false,
        (_, _, Some(_)) => newest.is_some_and(|t| t <= thr),
        // Unknown zset, more than a step expired: its newest member says whether all left.
        (_, _, None) => newest_score(s, z)?.is_some_and(|t| t <= thr),
    };
    if whole {
        // The whole window left (a quiet spell longer than the interval): nothing is live, and
        // nothing need be summed; a settle drops the zset.
        w.whole = true;
        w.index = None;
        (w.walked, w.next, w.oldest) = (Vec::new(), None, None);
        return Ok(w);
    }
    let ix = match index {
        Some(ix) => ix,
        None => rebuild(s, z, interval)?,
    };
    let expired = if w.all_walked {
        w.walked.iter().map(|&(_, p)| u128::from(p)).sum()
    } else {
        ix.expired(threshold, |from, to| sum(s, z, from, to).map(|(t, _)| t as u128))?
    };
    w.expired = expired as i128;
    w.live = ix.total() as i128 - w.expired;
    w.index = Some(ix);
    Ok(w)
}

/// The highest score in `z`, if any.
fn newest_score<S: RateStore>(s: &mut S, z: &[u8]) -> Result<Option<f64>> {
    let mut last = None;
    s.zset_scan_rev(z, f64::NEG_INFINITY, f64::INFINITY, &mut |_, score| {
        last = Some(score);
        false
    })?;
    Ok(last)
}

/// One walk of the whole zset: its index from scratch (counted by the store).
fn rebuild<S: RateStore>(s: &mut S, z: &[u8], interval: i64) -> Result<WindowIndex> {
    s.index_rebuilt();
    let mut ix = WindowIndex::empty(interval);
    let mut ends = Ends::default();
    let mut bad = false;
    s.zset_scan(z, f64::NEG_INFINITY, f64::INFINITY, &mut |m, score| {
        let Ok(p) = permits_of(m) else {
            bad = true;
            return false;
        };
        ix.add(score, p);
        // Walked in order: the first stays, the last is this one.
        if ends.first.is_none() {
            ends.first = Some((score, m.to_vec()));
        }
        ends.count += 1;
        match &mut ends.last {
            Some(l) => {
                l.0 = score;
                l.1.clear();
                l.1.extend_from_slice(m);
            }
            None => ends.last = Some((score, m.to_vec())),
        }
        true
    })?;
    if bad {
        return Err(LockError::BadGrant);
    }
    // No millisecond of a zset someone else wrote is folded: its grants leave as they are.
    ix.ends = ends;
    Ok(ix)
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod window_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_luas_struct_pack() {
        let m = pack(&[7u8; 16], 0x0102_0304);
        assert_eq!(m.len(), 21);
        assert_eq!(m[0], 16);
        assert_eq!(&m[17..], &[4, 3, 2, 1]);
        assert_eq!(unpack(&m), Some((&[7u8; 16][..], 0x0102_0304)));
        // Redisson before 3.21: 8 random bytes.
        assert_eq!(unpack(&pack(b"12345678", 5)), Some((&b"12345678"[..], 5)));
        // Trailing bytes are ignored, a short member is malformed.
        let mut long = pack(b"ab", 9);
        long.push(0xff);
        assert_eq!(unpack(&long), Some((&b"ab"[..], 9)));
        assert_eq!(unpack(&[16, 1, 2, 3]), None);
        assert_eq!(unpack(&[]), None);
    }

    #[test]
    fn next_up_is_the_next_double() {
        for x in [-5.0, -1.0, 0.0, 1.0, 1.7e12] {
            let y = next_up(x);
            let mid = x / 2.0 + y / 2.0;
            assert!(y > x && (mid == x || mid == y), "no double between {x} and {y}");
        }
    }
}
