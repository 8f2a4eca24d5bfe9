//! A rate limiter's window: the grant zset `{name}:permits[:id]` read and written the way
//! Redisson's bodies use it, without re-reading members a call does not need.
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
//! ([`add_grant`] with `fold`) changes nothing they compute, and bounds the zset to
//! `interval` members.
//!
//! [`scan`] reads what a call needs: the permits of the expired members (a walk over them,
//! which the call removes anyway) and the total of every member, which the store remembers
//! between calls (`RateStore::known_total`), so only a zset someone else changed is summed
//! again. Nothing here reads a clock: `now` is the caller's (the server's, `NOW`, or a
//! Redisson body's `ARGV`).

use super::store::RateStore;
use super::{LockError, Result};

/// Random bytes in a member the module makes (Redisson's `generateIdArray()`).
pub const RANDOM_LEN: usize = 16;
/// The most permits one member holds: Lua's `struct.pack('I')` is 4 bytes.
pub const MAX_PERMITS: i64 = u32::MAX as i64;

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

/// What a window holds at `now`, read without writing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Permits of every member.
    pub total: i128,
    /// Permits of the expired members (scored at or below `threshold`).
    pub expired: i128,
    /// How many members are expired (a grant of 0 permits counts, and goes).
    pub expired_members: usize,
    /// `now - interval`: a member scored at or below it is expired.
    pub threshold: i64,
}

impl Window {
    /// Permits of the live members.
    pub fn live(&self) -> i128 {
        self.total - self.expired
    }
}

/// Sums the permits of the members scored `min..=max` (`BadGrant` on a malformed member).
pub fn sum<S: RateStore>(s: &mut S, z: &[u8], min: f64, max: f64) -> Result<(i128, usize)> {
    let (mut total, mut n, mut bad) = (0i128, 0usize, false);
    s.zset_scan(z, min, max, &mut |m, _| match unpack(m) {
        Some((_, p)) => {
            total += i128::from(p);
            n += 1;
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
    Ok((total, n))
}

/// Reads the window of zset `z` at `now` for a limiter of `interval` ms: `WrongType` if `z`
/// is no zset, `BadGrant` if a member it reads is malformed. Walks the expired members, and
/// every member only when the store does not know the total.
pub fn scan<S: RateStore>(s: &mut S, z: &[u8], now: i64, interval: i64) -> Result<Window> {
    let threshold = now.saturating_sub(interval);
    // Also type-checks `z` before the store's remembered total is trusted.
    let members = s.zset_len(z)?;
    if members > WHOLE && newest(s, z)?.is_some_and(|t| t <= threshold as f64) {
        // The whole window left (a quiet spell longer than the interval): with the total
        // known, nothing need be walked, and [`drop_expired`] drops the zset whole.
        if let Some(t) = s.known_total(z) {
            let total = i128::from(t);
            return Ok(Window { total, expired: total, expired_members: members, threshold });
        }
    }
    let (expired, expired_members) = sum(s, z, f64::NEG_INFINITY, threshold as f64)?;
    let total = match (members, s.known_total(z)) {
        (0, _) => 0,
        (_, Some(t)) => i128::from(t),
        // Summed from just past the expired ones, which were summed above.
        _ => expired + sum(s, z, next_up(threshold as f64), f64::INFINITY)?.0,
    };
    Ok(Window { total, expired, expired_members, threshold })
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

/// Beyond this many members, a window that left whole is deleted (`DEL`, one free of the
/// zset) rather than removed member by member (`ZREMRANGEBYSCORE`, which Redisson's bodies
/// use, and whose events a small window keeps).
pub const WHOLE: usize = 64;

/// The highest score in `z`, if any.
fn newest<S: RateStore>(s: &mut S, z: &[u8]) -> Result<Option<f64>> {
    let mut last = None;
    s.zset_scan_rev(z, f64::NEG_INFINITY, f64::INFINITY, &mut |_, score| {
        last = Some(score);
        false
    })?;
    Ok(last)
}

/// Removes the expired members (`ZREMRANGEBYSCORE z -inf threshold`), if any; a large zset
/// whose every member expired goes with `DEL`.
pub fn drop_expired<S: RateStore>(s: &mut S, z: &[u8], w: &Window) {
    if w.expired_members > WHOLE && w.expired == w.total && s.zset_len(z).is_ok_and(|n| n == w.expired_members) {
        s.del(z);
    } else if w.expired_members > 0 {
        s.zset_rem_range(z, f64::NEG_INFINITY, w.threshold as f64);
    }
}

/// Takes `amount` permits off the newest members of `z`: a member wholly taken is removed, the
/// last one touched keeps its random bytes, score and the rest of its permits. What a release
/// gives back is thereby no longer in the window, so its later expiry credits nothing.
/// Returns what was taken (less than `amount` only when `z` held less).
pub fn take_newest<S: RateStore>(s: &mut S, z: &[u8], amount: i128) -> Result<i128> {
    if amount <= 0 {
        return Ok(0);
    }
    let mut left = amount;
    let mut gone: Vec<Vec<u8>> = Vec::new();
    let mut partial: Option<(Vec<u8>, f64, u32)> = None;
    let mut bad = false;
    s.zset_scan_rev(z, f64::NEG_INFINITY, f64::INFINITY, &mut |m, score| {
        let Some((_, p)) = unpack(m) else {
            bad = true;
            return false;
        };
        if i128::from(p) <= left {
            left -= i128::from(p);
            gone.push(m.to_vec());
            left > 0
        } else {
            partial = Some((m.to_vec(), score, p - left as u32));
            left = 0;
            false
        }
    })?;
    if bad {
        return Err(LockError::BadGrant);
    }
    let refs: Vec<&[u8]> = gone.iter().map(Vec::as_slice).collect();
    s.zset_rem_many(z, &refs);
    if let Some((m, score, rest)) = partial {
        let random = unpack(&m).map_or(&[][..], |(r, _)| r).to_vec();
        // Added before the old one goes, so the zset (and its TTL) never vanishes between.
        s.zset_add(z, &pack(&random, rest), score);
        s.zset_rem(z, &m);
    }
    Ok(amount - left)
}

/// How a grant enters the zset.
#[derive(Clone, Copy, Debug)]
pub struct Grant<'a> {
    /// The random bytes of a new member (the module's own, or a Redisson body's ARGV[3]).
    pub random: &'a [u8],
    /// Merge into a member scored at the same millisecond, if one has room: the module's
    /// commands do; a Redisson body run natively must not (its member is `random`'s).
    pub fold: bool,
}

/// Adds a grant of `permits` scored `now`: folded into a member of the same score when
/// `grant.fold` and the sum fits in 4 bytes (that member keeps its random bytes), else a new
/// member of `grant.random`. True if it was folded.
pub fn add_grant<S: RateStore>(s: &mut S, z: &[u8], now: i64, permits: u32, grant: Grant) -> Result<bool> {
    let at = now as f64;
    if grant.fold {
        let mut same: Option<Vec<u8>> = None;
        s.zset_scan(z, at, at, &mut |m, _| {
            same = Some(m.to_vec());
            false
        })?;
        if let Some(m) = same {
            let (random, had) = unpack(&m).ok_or(LockError::BadGrant)?;
            if let Some(sum) = had.checked_add(permits) {
                let merged = pack(random, sum);
                s.zset_add(z, &merged, at);
                s.zset_rem(z, &m);
                return Ok(true);
            }
        }
    }
    s.zset_add(z, &pack(grant.random, permits), at);
    Ok(false)
}

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
