//! The semaphore (Redisson's `RSemaphore`): one string counter of available permits.
//!
//! | key `name` (string) | meaning                                                        |
//! |---------------------|----------------------------------------------------------------|
//! | absent              | never set (or deleted): nothing to take, `AVAILABLE` is 0       |
//! | integer `n`         | `n` permits available; below 0 after a negative `ADDPERMITS`    |
//! | anything else       | not a semaphore: `NotInteger`, nothing written                  |
//!
//! Policy: parked waiters are served in strict arrival order ([`servable`]): a waiter for 3 is
//! not overtaken by a later waiter for 1, and a new acquire takes nothing while anyone is parked.
//! Redisson's own clients know nothing of parked waiters; their Lua takes what it finds.
//!
//! Each function is the Lua body Redisson sends for the method (docs/redisson-sync-scripts.md),
//! on the server's data: the same writes in the same order, so a Redisson client and a native
//! one share the state. Where the bodies do arithmetic in Lua doubles, these are exact in i64
//! and refuse to overflow; the table in the docs says where that can differ.
//! Changes that add permits publish the new count on `redisson_sc:{name}`
//! ([`super::names::semaphore_channel`]), where Redisson's waiters listen.

use super::names::{semaphore_channel, semaphore_channel_buf};
use crate::core::access::Need;
use crate::core::sync::store::SyncStore;
use crate::core::{deadline, incremented, permit, IntBuf, LockError, Result};

/// Checks a permit count argument: Redisson's "Permits amount can't be negative".
pub(crate) fn non_negative(n: i64, what: &'static str) -> Result<()> {
    if n < 0 {
        return Err(LockError::Negative(what));
    }
    Ok(())
}

fn publishes(key: &[u8]) -> Vec<Need> {
    vec![Need::Publish(semaphore_channel(key))]
}

/// `SEMAPHORE.TRYSETPERMITS name permits [LEASE ms]`: sets the permits if `name` is absent
/// (with a TTL of `lease_ms` if given) and publishes them; true if it did, false if `name`
/// existed. `trySetPermits(permits[, ttl])`.
pub fn try_set_permits<S: SyncStore>(s: &mut S, key: &[u8], permits: i64, lease_ms: Option<i64>) -> Result<bool> {
    non_negative(permits, "permits")?;
    let at = match lease_ms {
        Some(ms) if ms <= 0 => return Err(LockError::NotPositive("lease")),
        Some(ms) => Some(deadline(s.now(), ms)?),
        None => None,
    };
    permit(s, || publishes(key))?;
    // The Lua only tests presence; a value that is no count is refused here all the same.
    if s.get_int(key)?.is_some() {
        return Ok(false);
    }
    let v = permits.to_string().into_bytes();
    match at {
        Some(at) => s.set_px_at(key, &v, at),
        None => s.set(key, &v),
    }
    s.publish(&semaphore_channel_buf(key), &v);
    Ok(true)
}

/// `SEMAPHORE.ACQUIRE name permits` without waiting: takes `permits` if that many are available
/// and nobody is parked ahead (`queued_ahead`); true if taken. `tryAcquire(permits)`: `DECRBY`,
/// nothing published. 0 permits are "taken" wherever the count is at least 0, as the Lua does.
pub fn acquire<S: SyncStore>(s: &mut S, key: &[u8], permits: i64, queued_ahead: bool) -> Result<bool> {
    non_negative(permits, "permits")?;
    let available = s.get_int(key)?;
    match available {
        Some(n) if n >= permits && !queued_ahead => {
            s.decr_by(key, permits)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// How many of the parked waiters, each wanting `wants[i]` permits in arrival order, can be
/// served from `available` now: strict FIFO, so the count stops at the first one that does not
/// fit even if a later, smaller one would.
pub fn servable(available: i64, wants: impl IntoIterator<Item = i64>) -> usize {
    let mut left = available;
    let mut n = 0;
    for want in wants {
        if want > left {
            break;
        }
        left -= want;
        n += 1;
    }
    n
}

/// `SEMAPHORE.RELEASE name permits`: adds `permits` (creating `name` if absent, keeping its
/// TTL otherwise) and publishes the count now available, which it returns. `release(permits)`.
pub fn release<S: SyncStore>(s: &mut S, key: &[u8], permits: i64) -> Result<i64> {
    non_negative(permits, "permits")?;
    permit(s, || publishes(key))?;
    add(s, key, permits)
}

/// `INCRBY` then publish, after checking the value and the sum: the Lua's `incrby` fails on
/// both before writing, so this writes nothing on either.
fn add<S: SyncStore>(s: &mut S, key: &[u8], permits: i64) -> Result<i64> {
    incremented(s.get_int(key)?.unwrap_or(0), permits)?;
    let v = s.incr_by(key, permits)?;
    s.publish(&semaphore_channel_buf(key), IntBuf::default().format(v));
    Ok(v)
}

/// `releaseIfExists(permits)` (Redisson 4.0+): [`release`] only if `name` exists; None (and
/// nothing written) if it does not.
pub fn release_if_exists<S: SyncStore>(s: &mut S, key: &[u8], permits: i64) -> Result<Option<i64>> {
    non_negative(permits, "permits")?;
    permit(s, || publishes(key))?;
    if s.get_int(key)?.is_none() {
        return Ok(None);
    }
    add(s, key, permits).map(Some)
}

/// `SEMAPHORE.ADDPERMITS name delta`: adds `delta` (negative takes permits away, possibly below
/// 0) and publishes the new count, which it returns. `addPermits(delta)`: Redisson writes it
/// with `SET`, so a TTL `name` had is dropped; so is it here.
pub fn add_permits<S: SyncStore>(s: &mut S, key: &[u8], delta: i64) -> Result<i64> {
    permit(s, || publishes(key))?;
    let next = incremented(s.get_int(key)?.unwrap_or(0), delta)?;
    let v = next.to_string().into_bytes();
    s.set(key, &v);
    s.publish(&semaphore_channel_buf(key), &v);
    Ok(next)
}

/// `SEMAPHORE.DRAIN name`: takes every available permit; returns how many there were (0 if
/// `name` is absent, which stays absent). `drainPermits()`: `SET name 0`, which drops a TTL,
/// and nothing published (draining makes nothing available). A count below 0 is returned as
/// it was and reset to 0, as the Lua does.
pub fn drain<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    let Some(n) = s.get_int(key)? else {
        return Ok(0);
    };
    s.set(key, b"0");
    Ok(n)
}

/// `SEMAPHORE.AVAILABLE name`: the available permits, 0 if `name` is absent.
/// `availablePermits()` (a plain `GET`).
pub fn available<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    Ok(s.get_int(key)?.unwrap_or(0))
}

#[cfg(test)]
#[path = "semaphore_tests.rs"]
mod tests;
