//! The count-down latch (Redisson's `RCountDownLatch`): one string counter.
//!
//! | key `name` (string) | meaning                                                       |
//! |---------------------|---------------------------------------------------------------|
//! | absent              | open: nothing to wait for (never set, or counted down to 0)   |
//! | integer `n > 0`     | closed: `n` count-downs to go                                 |
//! | `0` or below        | open to `AWAIT` only at exactly 0 (a Redisson client may set  |
//! |                     | 0 or less); the next count-down deletes it without a message  |
//! | anything else       | not a latch: `NotInteger`, nothing written                    |
//!
//! Policy: every parked waiter is woken at once when the latch opens (the key is deleted, by a
//! count-down to 0 or by anything else). Messages go to
//! `redisson_countdownlatch__channel__{name}` ([`super::names::latch_channel`]): `1` when a
//! count is set (Redisson's waiters close their local latch), `0` when it reaches zero.

use super::names::{latch_channel, latch_channel_buf};
use super::semaphore::non_negative;
use crate::core::access::Need;
use crate::core::sync::store::SyncStore;
use crate::core::{permit, IntBuf, LockError, Result};

/// Redisson's `CountDownLatchPubSub.NEW_COUNT_MESSAGE`: a count was set (or the latch deleted).
pub const NEW_COUNT: &[u8] = b"1";
/// Redisson's `CountDownLatchPubSub.ZERO_COUNT_MESSAGE`: the count reached zero.
pub const ZERO_COUNT: &[u8] = b"0";

fn publishes(key: &[u8]) -> Vec<Need> {
    vec![Need::Publish(latch_channel(key))]
}

/// `COUNTDOWN.TRYSETCOUNT name count`: if `name` is absent, sets `count` and publishes `1`;
/// true if it did. `trySetCount(count)`: it tests existence (`EXISTS`), so a key of any
/// type counts as present and gets false, as from Redisson.
pub fn try_set_count<S: SyncStore>(s: &mut S, key: &[u8], count: i64) -> Result<bool> {
    non_negative(count, "count")?;
    permit(s, || publishes(key))?;
    if s.exists(key) {
        return Ok(false);
    }
    s.set(key, IntBuf::default().format(count));
    s.publish(&latch_channel_buf(key), NEW_COUNT);
    Ok(true)
}

/// What a count-down did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountDown {
    /// No latch: nothing written. (Redisson's Lua still runs `DECR` and `DEL` here, which
    /// leave no key: the keyspace is the same, only its `decrby`/`del` events are not fired.)
    Absent,
    /// Decremented; this many to go.
    Left(i64),
    /// Reached 0: the key was deleted and `0` published. The latch is open.
    Opened,
    /// The key held 0 or less: deleted, nothing published (Redisson publishes only on exactly
    /// 0). The latch is open.
    Deleted,
}

impl CountDown {
    /// `COUNTDOWN.DECR`'s reply: the count left, 0 once the latch is open or absent.
    pub fn left(self) -> i64 {
        match self {
            CountDown::Left(n) => n,
            _ => 0,
        }
    }

    /// True when parked waiters are to be woken: the key is gone.
    pub fn opened(self) -> bool {
        matches!(self, CountDown::Opened | CountDown::Deleted)
    }
}

/// `COUNTDOWN.DECR name`: `countDown()`. `DECR`; at 0 or below the key is deleted (the effects
/// are `DECRBY` then `DEL`, as the Lua's); at exactly 0, `0` is published.
pub fn count_down<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<CountDown> {
    permit(s, || publishes(key))?;
    let Some(n) = s.get_int(key)? else {
        return Ok(CountDown::Absent);
    };
    let left = n.checked_sub(1).ok_or(LockError::Overflow)?;
    s.decr_by(key, 1)?;
    if left > 0 {
        return Ok(CountDown::Left(left));
    }
    s.del(key);
    if left < 0 {
        return Ok(CountDown::Deleted);
    }
    s.publish(&latch_channel_buf(key), ZERO_COUNT);
    Ok(CountDown::Opened)
}

/// `COUNTDOWN.COUNT name`: the count, 0 when absent. `getCount()` (a plain `GET`).
pub fn count<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<i64> {
    Ok(s.get_int(key)?.unwrap_or(0))
}

/// `COUNTDOWN.AWAIT name` without waiting: true when the count is 0 or `name` absent (the
/// latch is open), as Redisson's `await` tests `getCount() == 0`. False: park, or reply 0.
pub fn is_open<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<bool> {
    Ok(count(s, key)? == 0)
}

/// `delete()` of a latch: deletes `name` (any type, as `DEL`) and, if it existed, publishes
/// `1`, Redisson's new-count message; true if it existed. Parked waiters are then woken: the
/// latch is open. (Issue 26 names no command for it.)
pub fn delete<S: SyncStore>(s: &mut S, key: &[u8]) -> Result<bool> {
    permit(s, || publishes(key))?;
    if !s.del(key) {
        return Ok(false);
    }
    s.publish(&latch_channel_buf(key), NEW_COUNT);
    Ok(true)
}

#[cfg(test)]
#[path = "countdown_tests.rs"]
mod tests;
