//! The fair lock (Redisson's `RedissonFairLock`): a reentrant lock granted in FIFO order.
//!
//! | key                                | type | meaning                                   |
//! |------------------------------------|------|-------------------------------------------|
//! | `name`                             | hash | the holder, as the reentrant lock         |
//! | `redisson_lock_queue:{name}`       | list | waiting owners, first in line at the head |
//! | `redisson_lock_timeout:{name}`     | zset | each waiter's absolute deadline (ms)      |
//!
//! A waiter that misses its deadline is purged by the next command that looks at the queue.
//! Every `now` is the server's clock: Redisson sends the client's, we never trust it.
//! Releases publish `0` on the head waiter's own channel, so only it wakes.

use super::reentrant::{self, Acquired};
use super::{latch_check, latch_record, Latch, Reply, Result, Store};
use crate::names;

/// What a fair acquire did: the reentrant outcomes plus the queue's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairAcquired {
    /// Granted or re-entered.
    Got(Acquired),
    /// `NOQUEUE` and not free: Redisson's tryLock() reply `1`.
    NotQueued,
    /// Already queued: max(0, PTTL of the lock).
    Waiting(i64),
    /// Newly queued; Redisson's reply is the base TTL the deadline was computed from.
    Enqueued(i64),
}

impl FairAcquired {
    pub fn reply(self) -> Reply {
        match self {
            FairAcquired::Got(a) => a.reply(),
            FairAcquired::NotQueued => Reply::Int(1),
            FairAcquired::Waiting(ttl) | FairAcquired::Enqueued(ttl) => Reply::Int(ttl),
        }
    }

    pub fn acquired(self) -> bool {
        matches!(self, FairAcquired::Got(_))
    }
}

/// The three keys of one fair lock.
struct Keys {
    queue: Vec<u8>,
    zset: Vec<u8>,
}

/// Type-checks the lock, the queue and the zset before anything is written.
fn keys<S: Store>(s: &mut S, key: &[u8]) -> Result<Keys> {
    let k = Keys { queue: names::fair_queue(key), zset: names::fair_timeouts(key) };
    s.hash_len(key)?;
    s.list_head(&k.queue)?;
    s.zset_score(&k.zset, b"")?;
    Ok(k)
}

/// Removes queue heads whose deadline is at or before `now`. A head without a deadline stops
/// the purge (Redisson's Lua would fail on it; we leave it for CANCEL).
fn purge<S: Store>(s: &mut S, k: &Keys) -> Result<()> {
    let now = s.now();
    while let Some(head) = s.list_head(&k.queue)? {
        match s.zset_score(&k.zset, &head)? {
            Some(deadline) if deadline <= now => {
                s.zset_rem(&k.zset, &head);
                s.list_pop_head(&k.queue);
            }
            _ => break,
        }
    }
    Ok(())
}

/// Moves the deadline of every member in `members` (that has one) by `-wait`, in one write.
fn pull_forward<S: Store>(s: &mut S, zset: &[u8], members: impl IntoIterator<Item = Vec<u8>>, wait: i64) -> Result<()> {
    let mut moved = Vec::new();
    for m in members {
        if let Some(score) = s.zset_score(zset, &m)? {
            moved.push((m, score - wait));
        }
    }
    s.zset_set_many(zset, &moved);
    Ok(())
}

/// `FAIRLOCK.ACQUIRE key owner lease wait [NOQUEUE]`.
pub fn acquire<S: Store>(
    s: &mut S,
    key: &[u8],
    owner: &[u8],
    lease: i64,
    wait: i64,
    noqueue: bool,
) -> Result<FairAcquired> {
    let k = keys(s, key)?;
    s.hash_get_int(key, owner)?;
    purge(s, &k)?;
    let head = s.list_head(&k.queue)?;
    if !s.exists(key) && head.as_deref().is_none_or(|h| h == owner) {
        s.list_pop_head(&k.queue);
        s.zset_rem(&k.zset, owner);
        // Every remaining waiter's deadline had this one's wait in it.
        let rest = s.zset_all(&k.zset)?.into_iter().map(|(m, _)| m);
        pull_forward(s, &k.zset, rest, wait)?;
        s.hash_incr(key, owner, 1);
        let at = s.now() + lease;
        s.pexpire_at(key, at);
        return Ok(FairAcquired::Got(Acquired::New));
    }
    if s.hash_get_int(key, owner)?.is_some() {
        s.hash_incr(key, owner, 1);
        let at = s.now() + lease;
        s.pexpire_at(key, at);
        return Ok(FairAcquired::Got(Acquired::Reentered));
    }
    if noqueue {
        return Ok(FairAcquired::NotQueued);
    }
    if s.zset_score(&k.zset, owner)?.is_some() {
        return Ok(FairAcquired::Waiting(s.pttl(key).max(0)));
    }
    let now = s.now();
    let tail_deadline = match s.list_tail(&k.queue)? {
        Some(tail) if tail != owner => s.zset_score(&k.zset, &tail)?,
        _ => None,
    };
    let base = match tail_deadline {
        Some(d) => d - now,
        None => s.pttl(key),
    };
    if s.zset_add(&k.zset, owner, base + wait + now) {
        s.list_push_tail(&k.queue, owner);
    }
    Ok(FairAcquired::Enqueued(base))
}

/// Publishes `0` on the queue head's own channel, if anyone is queued.
fn notify_head<S: Store>(s: &mut S, key: &[u8], k: &Keys) -> Result<()> {
    if let Some(head) = s.list_head(&k.queue)? {
        s.publish(&names::fair_waiter_channel(key, &head), b"0");
    }
    Ok(())
}

/// `FAIRLOCK.UNLOCK key owner lease [LATCH ...]`: nil not held, 0 holds remain, 1 released.
pub fn unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64, latch: Option<Latch>) -> Result<Reply> {
    let k = keys(s, key)?;
    if let Some(earlier) = latch_check(s, key, latch)? {
        return Ok(earlier);
    }
    let holds = s.hash_get_int(key, owner)?;
    purge(s, &k)?;
    if !s.exists(key) {
        notify_head(s, key, &k)?;
        latch_record(s, key, latch, 1);
        return Ok(Reply::Int(1));
    }
    if holds.is_none() {
        return Ok(Reply::Nil);
    }
    if s.hash_incr(key, owner, -1) > 0 {
        let at = s.now() + lease;
        s.pexpire_at(key, at);
        latch_record(s, key, latch, 0);
        return Ok(Reply::Int(0));
    }
    s.del(key);
    latch_record(s, key, latch, 1);
    notify_head(s, key, &k)?;
    Ok(Reply::Int(1))
}

/// `FAIRLOCK.CANCEL key owner wait`: a waiter gives up. Later waiters move forward by `wait`.
pub fn cancel<S: Store>(s: &mut S, key: &[u8], owner: &[u8], wait: i64) -> Result<Reply> {
    let k = keys(s, key)?;
    let queue = s.list_range(&k.queue)?;
    let later = queue.iter().position(|w| w == owner).map_or(Vec::new(), |i| queue[i + 1..].to_vec());
    pull_forward(s, &k.zset, later, wait)?;
    let in_zset = s.zset_rem(&k.zset, owner);
    let in_queue = s.list_remove(&k.queue, owner) > 0;
    Ok(Reply::Int(i64::from(in_zset || in_queue)))
}

/// `FAIRLOCK.RENEW key owner lease`: exactly `LOCK.RENEW`.
pub fn renew<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Reply> {
    reentrant::renew(s, key, owner, lease)
}

/// `FAIRLOCK.FORCEUNLOCK key`: delete the lock whoever holds it, wake the head waiter.
pub fn force_unlock<S: Store>(s: &mut S, key: &[u8]) -> Result<Reply> {
    let k = keys(s, key)?;
    purge(s, &k)?;
    if !s.del(key) {
        return Ok(Reply::Int(0));
    }
    notify_head(s, key, &k)?;
    Ok(Reply::Int(1))
}

#[cfg(test)]
#[path = "fair_tests.rs"]
mod tests;
