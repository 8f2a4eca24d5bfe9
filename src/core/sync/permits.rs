//! The expirable semaphore (Redisson's `RPermitExpirableSemaphore`): the semaphore's counter
//! plus a lease per permit taken.
//!
//! | key                      | type   | meaning                                                 |
//! |--------------------------|--------|---------------------------------------------------------|
//! | `name`                   | string | permits available (as [`super::semaphore`])             |
//! | `{name}:timeout` (Z)     | zset   | permit taken: its id (16 raw bytes) -> absolute expiry  |
//! |                          |        | (ms), or [`NO_LEASE`] for one taken without a lease     |
//!
//! Ids are 16 random bytes; clients see them as 32 hex digits ([`id_hex`]), Z holds the bytes
//! (Redisson decodes the hex before sending). A permit whose expiry has passed is still in Z
//! until it is *reclaimed* ([`reclaim`]): `ZRANGEBYSCORE Z 0 now`, `ZREM` of those, `INCRBY
//! name` by their number, and `PUBLISH` of the new count when it is above 0. Redisson's
//! scripts reclaim at the start of most calls, on the client's clock; here `now` is the
//! server's, and the module also reclaims by a timer at [`next_expiry`], with nobody calling.
//! The writes are the same either way, so a Redisson client sharing the semaphore sees a
//! permit come back exactly as one of its own calls would have returned it.
//!
//! Each function is the Lua body of the method it names (docs/redisson-sync-scripts.md):
//! same writes, same order, same messages, with every check made before the first write.

use super::names::{permit_timeouts, semaphore_channel, semaphore_channel_buf};
use super::semaphore::{self, non_negative};
use crate::core::access::{KeyUse, Need};
use crate::core::sync::store::SyncStore;
use crate::core::{incremented, permit, IntBuf, LockError, Result};

/// Bytes in a permit id.
pub const ID_LEN: usize = 16;
/// A permit id, as stored in Z.
pub type PermitId = [u8; ID_LEN];
/// The expiry Redisson gives a permit taken without a lease (`nonExpirableTimeout`, in the
/// year 31197): never reclaimed in practice, and not reported as a time to wait for.
pub const NO_LEASE: i64 = 922_337_203_685_477;
/// The most permits one acquire takes: each is an id in Z and in the reply, and a command must
/// not stall the server building millions of them.
pub const MAX_ACQUIRE: i64 = 1 << 16;

/// `id` as Redisson shows it: lowercase hex.
pub fn id_hex(id: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(id.len() * 2);
    for &b in id {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// The bytes of a hex permit id (either case, as Redisson's `decodeHexDump` reads it).
pub fn parse_id(hex: &[u8]) -> Result<Vec<u8>> {
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return Err(LockError::BadPermitId);
    }
    let digit = |c: u8| (c as char).to_digit(16).ok_or(LockError::BadPermitId);
    hex.chunks(2).map(|p| Ok((digit(p[0])? * 16 + digit(p[1])?) as u8)).collect()
}

/// What the commands that touch Z need beyond `name`: Z itself, and the channel.
fn needs(key: &[u8], z_use: KeyUse) -> Vec<Need> {
    vec![Need::Key(permit_timeouts(key), z_use), Need::Publish(semaphore_channel(key))]
}

/// Type-checks both keys before any write: Z's name and `name`'s count.
fn check<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<(Vec<u8>, Option<i64>)> {
    let z = permit_timeouts(key);
    let available = s.get_int(key)?;
    s.zset_len(&z)?;
    Ok((z, available))
}

/// Returns the permits whose expiry is at or before `now` (at most `limit` of them, earliest
/// first): the new count if any came back, None if none had expired. The caller has checked
/// the ACL; the timer calls this with no user.
pub fn reclaim<S: SyncStore>(s: &mut S, key: &[u8], now: i64, limit: Option<usize>) -> Result<Option<i64>> {
    let z = permit_timeouts(key);
    let expired = s.zset_range_by_score(&z, 0.0, now as f64, limit)?;
    if expired.is_empty() {
        return Ok(None);
    }
    let n = expired.len() as i64;
    incremented(s.get_int(key)?.unwrap_or(0), n)?;
    let members: Vec<&[u8]> = expired.iter().map(|(m, _)| m.as_slice()).collect();
    s.zset_rem_many(&z, &members);
    let v = s.incr_by(key, n)?;
    if v > 0 {
        s.publish(&semaphore_channel_buf(key), IntBuf::default().format(v));
    }
    Ok(Some(v))
}

/// The earliest expiry the timer must reclaim at (ms), if any permit has a lease: the lowest
/// score in `0..NO_LEASE` (below 0 is never reclaimed, so never waited for). At or before
/// `now` means at once.
pub fn next_expiry<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<Option<i64>> {
    let first = s.zset_range_by_score(&permit_timeouts(key), 0.0, NO_LEASE as f64, Some(1))?;
    Ok(first.first().map(|(_, t)| *t).filter(|t| *t < NO_LEASE as f64).map(|t| t.ceil() as i64))
}

/// Whether `name` looks like an expirable semaphore with a permit leased: its count is an
/// integer, and its earliest lease (a score from 0 below [`NO_LEASE`]) is held by an id of
/// [`ID_LEN`] bytes, as the module and Redisson write them. Asked of a name found by its lease
/// zset alone (a keyspace walk, someone else's `ZADD`) before the module reclaims into it: a
/// pair of keys that merely share the layout's names is left alone.
pub fn has_leases<S: SyncStore>(s: &mut S, name: &[u8]) -> bool {
    if !matches!(s.get_int(name), Ok(Some(_))) {
        return false;
    }
    let first = s.zset_range_by_score(&permit_timeouts(name), 0.0, NO_LEASE as f64, Some(1));
    matches!(first.as_deref(), Ok([(id, t)]) if id.len() == ID_LEN && *t < NO_LEASE as f64)
}

/// What an acquire did.
#[derive(Clone, Debug, PartialEq)]
pub enum Acquire {
    /// Taken: the new permits' ids.
    Granted(Vec<PermitId>),
    /// Not enough permits, or someone parked ahead. `next_expiry`: the lowest score in Z
    /// unless it is [`NO_LEASE`], when a held permit may come back (Redisson's `:<score>`).
    Refused { next_expiry: Option<f64> },
}

/// `PSEMAPHORE.ACQUIRE name permits lease_ms` without waiting: `tryAcquire(permits, lease)`.
/// Reclaims up to `permits` expired permits (the Lua's limit), then, if at least `permits` are
/// available and nobody is parked ahead, takes them: `DECRBY`, one id from `new_id` per permit
/// into Z with expiry `until` (absolute ms: `core::deadline(now, lease_ms)`, or [`NO_LEASE`]),
/// and Z gets `name`'s TTL if it has one.
pub fn acquire<S: SyncStore>(
    s: &mut S,
    key: &[u8],
    permits: i64,
    until: i64,
    queued_ahead: bool,
    mut new_id: impl FnMut() -> PermitId,
) -> Result<Acquire> {
    non_negative(permits, "permits")?;
    if permits > MAX_ACQUIRE {
        return Err(LockError::NotInteger);
    }
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, _) = check(s, key)?;
    reclaim(s, key, now, Some(permits as usize))?;
    let available = s.get_int(key)?;
    if !queued_ahead && available.is_some_and(|n| n >= permits) {
        s.decr_by(key, permits)?;
        let ids: Vec<PermitId> = (0..permits).map(|_| new_id()).collect();
        for id in &ids {
            s.zset_add(&z, id, until as f64);
        }
        let ttl = s.pttl(key);
        if ttl > 0 {
            s.pexpire_at(&z, now + ttl);
        }
        return Ok(Acquire::Granted(ids));
    }
    let next_expiry = s.zset_first(&z)?.map(|(_, t)| t).filter(|t| *t != NO_LEASE as f64);
    Ok(Acquire::Refused { next_expiry })
}

/// What releasing one id did (`tryRelease(id)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseOne {
    /// Not in Z (never taken, released, or reclaimed): nothing written.
    Unknown,
    /// In Z but expired, not yet reclaimed: the permit went back all the same, reply 0.
    Late,
    /// Released: reply 1.
    Released,
}

impl ReleaseOne {
    /// The reply: 1 only for a permit released within its lease.
    pub fn reply(self) -> i64 {
        i64::from(self == ReleaseOne::Released)
    }
}

/// `tryRelease(id)`: removes `id` from Z, `INCRBY name 1`, publishes the count now available.
/// No reclaim of the others, as the Lua.
pub fn release_one<S: SyncStore>(s: &mut S, key: &[u8], id: &[u8]) -> Result<ReleaseOne> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, available) = check(s, key)?;
    let Some(expiry) = s.zset_score(&z, id)? else {
        return Ok(ReleaseOne::Unknown);
    };
    incremented(available.unwrap_or(0), 1)?;
    s.zset_rem(&z, id);
    let v = s.incr_by(key, 1)?;
    s.publish(&semaphore_channel_buf(key), IntBuf::default().format(v));
    Ok(if expiry <= now as f64 { ReleaseOne::Late } else { ReleaseOne::Released })
}

/// Checks that returning the expired permits plus `more` fits in the count, before any write.
fn fits<S: SyncStore>(s: &mut S, z: &[u8], available: Option<i64>, more: usize) -> Result<()> {
    let expired = s.zset_count(z, 0.0, s.now() as f64)?;
    incremented(available.unwrap_or(0), (expired + more) as i64).map(drop)
}

/// The distinct ids among `ids` (Z holds each once, `ZREM` counts each once).
fn distinct<'a>(ids: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// `tryRelease(ids)` since Redisson 3.41: all or nothing. If any id is unknown or expired,
/// replies 0 and writes nothing; else reclaims the expired permits, removes the ids, `INCRBY`
/// their number and publishes that number (not the count available), which it returns.
pub fn release_all<S: SyncStore>(s: &mut S, key: &[u8], ids: &[&[u8]]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, available) = check(s, key)?;
    for id in ids {
        match s.zset_score(&z, id)? {
            Some(expiry) if expiry > now as f64 => {}
            _ => return Ok(0),
        }
    }
    let ids = distinct(ids);
    fits(s, &z, available, ids.len())?;
    give_back(s, key, &z, now, &ids)
}

/// Reclaims, removes `ids` from Z, and gives their permits back: the tail both list releases
/// share. Replies the number removed.
fn give_back<S: SyncStore>(s: &mut S, key: &[u8], z: &[u8], now: i64, ids: &[&[u8]]) -> Result<i64> {
    reclaim(s, key, now, None)?;
    let removed = s.zset_rem_many(z, ids) as i64;
    if removed == 0 {
        return Ok(0);
    }
    s.incr_by(key, removed)?;
    s.publish(&semaphore_channel_buf(key), IntBuf::default().format(removed));
    Ok(removed)
}

/// `tryRelease(ids)` in Redisson 3.23.4 to 3.40.2: reclaims, then releases whichever ids are
/// still held; publishes and returns their number (0: nothing more written).
pub fn release_each<S: SyncStore>(s: &mut S, key: &[u8], ids: &[&[u8]]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, available) = check(s, key)?;
    let ids = distinct(ids);
    // What the `ZREM` after the reclaim will find: held ids the reclaim leaves (any score
    // outside `0..=now`, a negative one included).
    let mut left = 0;
    for id in &ids {
        left += usize::from(s.zset_score(&z, id)?.is_some_and(|t| !(0.0..=now as f64).contains(&t)));
    }
    fits(s, &z, available, left)?;
    give_back(s, key, &z, now, &ids)
}

/// `PSEMAPHORE.RELEASE name id [id ...]`: one id as `release(id)` ([`release_one`], its reply),
/// several as `release(ids)` ([`release_all`]), so each publishes what a Redisson client
/// releasing the same ids would.
pub fn release<S: SyncStore>(s: &mut S, key: &[u8], ids: &[&[u8]]) -> Result<i64> {
    match ids {
        [id] => release_one(s, key, id).map(ReleaseOne::reply),
        _ => release_all(s, key, ids),
    }
}

/// `PSEMAPHORE.UPDATELEASE name id lease_ms`: `updateLeaseTime`. Reclaims, then gives a held
/// `id` the expiry `until` (absolute ms); true if `id` was held.
pub fn update_lease<S: SyncStore>(s: &mut S, key: &[u8], id: &[u8], until: i64) -> Result<bool> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, _) = check(s, key)?;
    reclaim(s, key, now, None)?;
    if s.zset_score(&z, id)?.is_none() {
        return Ok(false);
    }
    s.zset_add(&z, id, until as f64);
    Ok(true)
}

/// `getLeaseTime(id)` (Redisson 3.41+): reclaims, then the ms `id` has left, -1 if it has no
/// lease, 0 if it is not held.
pub fn lease_time<S: SyncStore>(s: &mut S, key: &[u8], id: &[u8]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, _) = check(s, key)?;
    reclaim(s, key, now, None)?;
    Ok(match s.zset_score(&z, id)? {
        None => 0,
        Some(t) if t == NO_LEASE as f64 => -1,
        // Lua's number to integer reply: truncated toward 0.
        Some(t) => (t - now as f64) as i64,
    })
}

/// `PSEMAPHORE.AVAILABLE name`: `availablePermits()`. Reclaims, then the count (0 if absent).
pub fn available<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    check(s, key)?;
    reclaim(s, key, now, None)?;
    Ok(s.get_int(key)?.unwrap_or(0))
}

/// `PSEMAPHORE.ACQUIRED name`: `acquiredPermits()`. Reclaims, then the permits held (Z's
/// members with an expiry from 0 up).
pub fn acquired<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, _) = check(s, key)?;
    reclaim(s, key, now, None)?;
    Ok(s.zset_count(&z, 0.0, f64::INFINITY)? as i64)
}

/// `getPermits()` (Redisson 3.19.1+): reclaims, then available plus held; 0 if `name` is absent.
pub fn total<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    permit(s, || needs(key, KeyUse::ReadWrite))?;
    let now = s.now();
    let (z, _) = check(s, key)?;
    reclaim(s, key, now, None)?;
    let Some(available) = s.get_int(key)? else {
        return Ok(0);
    };
    incremented(available, s.zset_count(&z, 0.0, f64::INFINITY)? as i64)
}

/// `PSEMAPHORE.TRYSETPERMITS name permits`: `trySetPermits` (the semaphore's body).
pub fn try_set_permits<S: SyncStore>(s: &mut S, key: &[u8], permits: i64) -> Result<bool> {
    semaphore::try_set_permits(s, key, permits, None)
}

/// `PSEMAPHORE.SETPERMITS name permits`: `setPermits`. Makes available + held equal `permits`
/// (no reclaim first: expired permits still in Z count as held) by `INCRBY` of the difference,
/// and publishes `permits` (the new total, as Redisson does); an absent `name` is `SET`. True
/// if anything was written; an unchanged total writes and publishes nothing.
pub fn set_permits<S: SyncStore>(s: &mut S, key: &[u8], permits: i64) -> Result<bool> {
    non_negative(permits, "permits")?;
    permit(s, || needs(key, KeyUse::Read))?;
    let (z, available) = check(s, key)?;
    let v = permits.to_string().into_bytes();
    let Some(available) = available else {
        s.set(key, &v);
        s.publish(&semaphore_channel_buf(key), &v);
        return Ok(true);
    };
    let total = incremented(available, s.zset_count(&z, 0.0, f64::INFINITY)? as i64)?;
    if total == permits {
        return Ok(false);
    }
    let delta = permits.checked_sub(total).ok_or(LockError::Overflow)?;
    s.incr_by(key, delta)?;
    s.publish(&semaphore_channel_buf(key), &v);
    Ok(true)
}

/// `addPermits(delta)` of the expirable semaphore: `SET` of the sum (a TTL is dropped), and
/// `delta` published only when positive (the plain semaphore publishes the sum). Returns the
/// sum. (Issue 26 names no `PSEMAPHORE` command for it.)
pub fn add_permits<S: SyncStore>(s: &mut S, key: &[u8], delta: i64) -> Result<i64> {
    permit(s, || vec![Need::Publish(semaphore_channel(key))])?;
    let next = incremented(s.get_int(key)?.unwrap_or(0), delta)?;
    s.set(key, IntBuf::default().format(next));
    if delta > 0 {
        s.publish(&semaphore_channel_buf(key), IntBuf::default().format(delta));
    }
    Ok(next)
}

#[cfg(test)]
#[path = "permits_tests.rs"]
mod tests;
