//! The fair lock (Redisson's `RedissonFairLock`): the reentrant lock's hash, plus a FIFO of
//! waiting owners with a deadline each.
//!
//! | key                                  | type | meaning                                      |
//! |--------------------------------------|------|----------------------------------------------|
//! | `name`                               | hash | holder -> hold count, TTL = lease            |
//! | `redisson_lock_queue:{name}` (Q)     | list | waiting owners, first in line at the head    |
//! | `redisson_lock_timeout:{name}` (Z)   | zset | waiting owner -> absolute deadline (ms)      |
//!
//! A waiter that stops retrying is dropped once its deadline passes and it reaches the head
//! ("purge"). A waiter's deadline is the one before it plus `wait`, so each grant pulls every
//! remaining deadline forward by `wait`. A release publishes `0` only to the channel of the
//! waiter at the head, `redisson_lock__channel:{name}:<owner>`.
//!
//! Every `now` is the server's clock (Redisson sends the client's), read once per command.
//! Scores are doubles, as in Redis: Redisson's arithmetic on them is reproduced in `f64`.

use super::kinds;
use super::latch::{latch_check, latch_record, latch_record_unreleased, Latch};
use super::reentrant;
use crate::core::reply::Acquired;
use crate::core::{access, names};
use crate::core::{deadline, incremented, permit, Reply, Result, Store};
use std::collections::{HashMap, HashSet};

/// The largest deadline a waiter gets: the largest expiry time, in ms since the epoch.
const MAX_DEADLINE: f64 = i64::MAX as f64;

/// The derived keys of a fair lock.
struct Keys {
    queue: Vec<u8>,
    deadlines: Vec<u8>,
}

/// Type-checks every key a fair-lock command may write, before its first write.
fn keys<S: Store>(s: &mut S, key: &[u8]) -> Result<Keys> {
    let k = Keys { queue: names::fair_queue(key), deadlines: names::fair_timeouts(key) };
    s.hash_len(key)?;
    s.list_len(&k.queue)?;
    s.zset_len(&k.deadlines)?;
    Ok(k)
}

/// Drops the waiters at the head whose deadline has passed (a head without a deadline stays).
fn purge<S: Store>(s: &mut S, k: &Keys, now: f64) -> Result<()> {
    while let Some(head) = s.list_index(&k.queue, 0)? {
        match s.zset_score(&k.deadlines, &head)? {
            Some(deadline) if deadline <= now => {
                s.zset_rem(&k.deadlines, &head);
                s.list_pop_head(&k.queue);
            }
            _ => break,
        }
    }
    Ok(())
}

/// The waiter [`purge`] would leave at the head, found by reading only: a release wakes it, so
/// its channel is checked before the purge writes anything.
fn head_after_purge<S: Store>(s: &mut S, k: &Keys, now: f64) -> Result<Option<Vec<u8>>> {
    // A name queued twice loses its deadline with its first place, and then stops the purge.
    let mut dropped: Vec<Vec<u8>> = Vec::new();
    while let Some(head) = s.list_index(&k.queue, dropped.len() as i64)? {
        match s.zset_score(&k.deadlines, &head)? {
            Some(deadline) if deadline <= now && !dropped.contains(&head) => dropped.push(head),
            _ => return Ok(Some(head)),
        }
    }
    Ok(None)
}

/// Checks the channel of the waiter a release would wake, if the caller may be denied it.
fn permit_wake<S: Store>(s: &mut S, key: &[u8], k: &Keys, now: f64) -> Result<()> {
    if s.restricted() {
        if let Some(head) = head_after_purge(s, k, now)? {
            s.permit(&access::fair_head(key, &head))?;
        }
    }
    Ok(())
}

/// Publishes `0` to the waiter at the head of the queue, if any.
fn wake_head<S: Store>(s: &mut S, key: &[u8], k: &Keys) -> Result<()> {
    if let Some(head) = s.list_index(&k.queue, 0)? {
        s.publish(&names::fair_waiter_channel(key, &head), b"0");
    }
    Ok(())
}

/// What an acquire that is not granted does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfRefused {
    /// Join the queue (or stay in it): Redisson's `tryLock(wait, ...)`.
    Queue,
    /// Leave the queue alone and reply 1: Redisson's `tryLock()`.
    NoQueue,
}

/// `FAIRLOCK.ACQUIRE key owner lease wait [NOQUEUE]`. Refused with Redisson's reply: 1 for
/// NOQUEUE; the lock's PTTL (at least 0) for an owner already queued; else the time the owner
/// ahead (or the lock) has left, the base of the new deadline.
pub fn acquire<S: Store>(
    s: &mut S,
    key: &[u8],
    owner: &[u8],
    lease: i64,
    wait: i64,
    if_refused: IfRefused,
) -> Result<Acquired> {
    permit(s, || access::fair(key))?;
    let k = keys(s, key)?;
    let now = s.now();
    let at = deadline(now, lease)?;
    // A read-write lock under this name is held by someone else, whoever asks.
    let held = if kinds::is_rwlock(s, key) { None } else { s.hash_get_int(key, owner)? };
    if let Some(n) = held {
        incremented(n, 1)?;
    }
    purge(s, &k, now as f64)?;
    let free = s.hash_len(key)? == 0;
    if free && (s.list_len(&k.queue)? == 0 || s.list_index(&k.queue, 0)?.as_deref() == Some(owner)) {
        s.list_pop_head(&k.queue);
        s.zset_rem(&k.deadlines, owner);
        // Everyone still waiting moves up one place: their deadlines come `wait` closer.
        s.zset_shift_all(&k.deadlines, -(wait as f64));
        s.hash_set(key, owner, b"1");
        s.pexpire_at(key, at);
        return Ok(Acquired::New);
    }
    if held.is_some() {
        s.hash_incr(key, owner, 1)?;
        s.pexpire_at(key, at);
        return Ok(Acquired::Reentered);
    }
    if if_refused == IfRefused::NoQueue {
        return Ok(Acquired::Refused(1));
    }
    if s.zset_score(&k.deadlines, owner)?.is_some() {
        return Ok(Acquired::Refused(s.pttl(key).max(0)));
    }
    let tail = s.list_index(&k.queue, -1)?.filter(|t| t != owner);
    let ahead = match tail {
        Some(t) => s.zset_score(&k.deadlines, &t)?,
        None => None,
    };
    let base = match ahead {
        Some(deadline) => deadline - now as f64,
        None => s.pttl(key) as f64,
    };
    // In doubles, as Redisson's: no overflow. A base planted huge (or `inf`) is clamped to the
    // largest expiry time, so every deadline stays a valid ms timestamp.
    let own = (base + wait as f64 + now as f64).min(MAX_DEADLINE);
    if s.zset_add(&k.deadlines, owner, own) {
        s.list_push_tail(&k.queue, owner);
    }
    // Lua hands a number back as an integer by truncation.
    Ok(Acquired::Refused(base as i64))
}

/// `FAIRLOCK.UNLOCK key owner lease [LATCH ...]`: nil if `owner` does not hold the lock, 0 if
/// holds remain, 1 if released (or if the lock was already free); a release wakes the head.
pub fn unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64, latch: Option<Latch>) -> Result<Reply> {
    let now = s.now();
    let at = deadline(now, lease)?;
    permit(s, || access::fair_unlock(key, latch.map(|l| l.request_id)))?;
    if let Some(earlier) = latch_check(s, key, latch)? {
        return Ok(earlier);
    }
    let k = keys(s, key)?;
    // Not a fair lock's hash to release: a read-write lock's.
    if kinds::is_rwlock(s, key) {
        return Ok(Reply::Nil);
    }
    let held = s.hash_get_int(key, owner)?;
    if let Some(n) = held {
        incremented(n, -1)?;
    }
    permit_wake(s, key, &k, now as f64)?;
    purge(s, &k, now as f64)?;
    if s.hash_len(key)? == 0 {
        wake_head(s, key, &k)?;
        latch_record_unreleased(s, key, latch, 1);
        return Ok(Reply::Int(1));
    }
    if held.is_none() {
        return Ok(Reply::Nil);
    }
    if s.hash_incr(key, owner, -1)? > 0 {
        s.pexpire_at(key, at);
        latch_record(s, key, latch, 0);
        return Ok(Reply::Int(0));
    }
    s.del(key);
    latch_record(s, key, latch, 1);
    wake_head(s, key, &k)?;
    Ok(Reply::Int(1))
}

/// `FAIRLOCK.CANCEL key owner wait`: a waiter gives up. Everyone queued behind it moves up
/// (their deadlines come `wait` closer) and it leaves the queue; 1 if it was queued.
pub fn cancel<S: Store>(s: &mut S, key: &[u8], owner: &[u8], wait: i64) -> Result<Reply> {
    permit(s, || access::fair(key))?;
    let k = keys(s, key)?;
    let queue = s.list_all(&k.queue)?;
    if let Some(i) = queue.iter().position(|w| w == owner) {
        let behind: Vec<(Vec<u8>, f64)> = queue[i + 1..].iter().map(|w| (w.clone(), -(wait as f64))).collect();
        s.zset_incr_many(&k.deadlines, &behind);
    }
    let had_deadline = s.zset_rem(&k.deadlines, owner);
    let was_queued = s.list_remove(&k.queue, owner) > 0;
    Ok(Reply::Int(i64::from(had_deadline || was_queued)))
}

/// [`cancel`] of each `(owner, wait)` in turn, in one pass whatever their number: every waiter
/// behind a cancelled one moves up by that one's `wait` (the sum, behind several), and the
/// cancelled leave the queue and the deadlines in one write each. The same keyspace as
/// cancelling them one by one (the first `wait` given for an owner counts, as a second
/// cancel of it would find it gone), at O(queue + cancels) instead of O(queue * cancels):
/// parked waiters that give up together (a client pool disconnecting) leave this way.
pub fn cancel_many<S: Store>(s: &mut S, key: &[u8], cancels: &[(&[u8], i64)]) -> Result<()> {
    permit(s, || access::fair(key))?;
    let k = keys(s, key)?;
    let mut waits: HashMap<&[u8], i64> = HashMap::with_capacity(cancels.len());
    for &(owner, wait) in cancels {
        waits.entry(owner).or_insert(wait);
    }
    let queue = s.list_all(&k.queue)?;
    let mut gone: HashSet<&[u8]> = HashSet::with_capacity(cancels.len());
    let mut shift = 0.0;
    let mut moves = Vec::new();
    for w in &queue {
        if let Some(&wait) = waits.get(w.as_slice()) {
            // Only its first place moves the others: cancelling it removes every occurrence.
            if gone.insert(w.as_slice()) {
                shift -= wait as f64;
            }
            continue;
        }
        if shift != 0.0 {
            moves.push((w.clone(), shift));
        }
    }
    s.zset_incr_many(&k.deadlines, &moves);
    let owners: Vec<&[u8]> = waits.keys().copied().collect();
    s.zset_rem_many(&k.deadlines, &owners);
    let queued: Vec<&[u8]> = gone.into_iter().collect();
    s.list_remove_many(&k.queue, &queued);
    Ok(())
}

/// `FAIRLOCK.RENEW key owner lease`: the reentrant lock's renewal (no purge).
pub fn renew<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Reply> {
    reentrant::renew(s, key, owner, lease)
}

/// `FAIRLOCK.FORCEUNLOCK key`: deletes the lock whoever holds it and wakes the head; 1 if it
/// existed.
pub fn force_unlock<S: Store>(s: &mut S, key: &[u8]) -> Result<Reply> {
    permit(s, || access::fair(key))?;
    let k = keys(s, key)?;
    if kinds::is_rwlock(s, key) {
        return Ok(Reply::Int(0));
    }
    let now = s.now();
    permit_wake(s, key, &k, now as f64)?;
    purge(s, &k, now as f64)?;
    if !s.del(key) {
        return Ok(Reply::Int(0));
    }
    wake_head(s, key, &k)?;
    Ok(Reply::Int(1))
}

/// Keeps the queue places of waiters parked in the server (with BLOCK) from being purged:
/// connected, they are alive, whatever their deadline says. Each parked waiter whose deadline
/// is less than `ahead_ms` away is moved to `ahead_ms + wait` from now, and everyone queued
/// after it by the same amount, so deadlines stay in queue order.
///
/// One walk down the queue with a running shift, and one bulk write: this runs from a timer
/// over queues of any length, and a stall here would outlast the very deadlines it keeps.
/// Whether `owner`'s queue place needs [`keep_alive`] now: it is queued with a deadline
/// closer than `ahead_ms`. One read: a waiter that just queued usually has its whole wait
/// ahead, and the ones parked before it are kept by the tick.
pub fn place_due<S: Store>(s: &mut S, key: &[u8], owner: &[u8], ahead_ms: i64) -> Result<bool> {
    let k = keys(s, key)?;
    let soon = s.now() as f64 + ahead_ms as f64;
    Ok(s.zset_score(&k.deadlines, owner)?.is_some_and(|d| d < soon))
}

pub fn keep_alive<S: Store>(s: &mut S, key: &[u8], parked: &[(&[u8], i64)], ahead_ms: i64) -> Result<()> {
    let k = keys(s, key)?;
    let queue = s.list_all(&k.queue)?;
    let now = s.now();
    let mut waits: HashMap<&[u8], i64> = HashMap::with_capacity(parked.len());
    for &(owner, wait) in parked {
        waits.entry(owner).or_insert(wait);
    }
    let all = s.zset_all(&k.deadlines)?;
    let deadlines: HashMap<&[u8], f64> = all.iter().map(|(m, d)| (m.as_slice(), *d)).collect();
    let mut seen: HashSet<&[u8]> = HashSet::with_capacity(queue.len());
    let mut shift = 0.0;
    let mut moves = Vec::new();
    for w in &queue {
        // A name queued twice moves once, with its first place.
        if !seen.insert(w.as_slice()) {
            continue;
        }
        let Some(&deadline) = deadlines.get(w.as_slice()) else { continue };
        if let Some(&wait) = waits.get(w.as_slice()) {
            // In doubles: `wait` may be as large as the largest expiry time allows.
            let moved = deadline + shift;
            let soon = now as f64 + ahead_ms as f64;
            // A deadline planted at -inf stays put (the purge drops it): the shift stays finite,
            // so no score ever becomes NaN.
            if moved.is_finite() && moved < soon {
                shift += (soon + wait as f64).min(MAX_DEADLINE) - moved;
            }
        }
        if shift != 0.0 {
            moves.push((w.clone(), shift));
        }
    }
    s.zset_incr_many(&k.deadlines, &moves);
    Ok(())
}

#[cfg(test)]
#[path = "fair_tests.rs"]
mod tests;
