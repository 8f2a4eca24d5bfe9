//! One name, one kind: how a command of one lock kind recognises a name held as another.
//!
//! | key `name` (hash)                | kind                        |
//! |----------------------------------|-----------------------------|
//! | has a `mode` field               | read-write lock             |
//! | holder fields, no `mode`         | reentrant or fair lock      |
//!
//! Reentrant and fair locks share their hash (a fair lock adds a queue beside it), so they are
//! one kind here; a fair lock's queue with a live waiter makes a free name the fair lock's.
//! Redisson's scripts never look: `LOCK.ACQUIRE m a` then `RWLOCK.WLOCK m b` would give two
//! exclusive holders, and a reader re-entering through `LOCK.ACQUIRE` would corrupt its count.
//!
//! Every check reads keys the command has open already, or costs one key lookup on the free
//! path: a reentrant hash has one field, so `HLEN` alone (O(1)) clears it.

use crate::core::names;
use crate::core::names::MODE;
use crate::core::{Result, Store};

/// True if `key` is a read-write lock's hash. Anything else (absent, a reentrant or fair
/// hash, another type) is false: the caller's own type checks report a wrong type.
pub fn is_rwlock<S: Store>(s: &mut S, key: &[u8]) -> bool {
    matches!(s.hash_len(key), Ok(n) if n > 1) && matches!(s.hash_get(key, MODE), Ok(Some(_)))
}

/// If the fair lock named `key` has a live waiter queued (deadline not passed), the time the
/// first one has left to take the lock, at least 1 ms: a free lock is then not free for a
/// command of another kind, which would jump the queue.
pub fn fair_queue_ahead<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<i64>> {
    let now = s.now() as f64;
    let left = |d: Option<f64>| d.map_or(1, |d| ((d - now).ceil() as i64).max(1));
    Ok(first_live_waiter(s, key)?.map(left))
}

/// The first live waiter in the fair queue named for `key`: `Some(deadline)`, the deadline
/// being None for a waiter without one (the purge keeps it, so it is live). Waiters whose
/// deadline has passed are skipped, as the fair lock's purge would drop them (without writing:
/// the purge is the fair lock's to do). A queue key of another type is no fair queue; no
/// queue costs one key lookup.
pub fn first_live_waiter<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<Option<f64>>> {
    let queue = names::fair_queue_buf(key);
    // In a cluster, a name whose fair queue lies in another slot has no fair lock (its
    // commands are refused with CROSSSLOT): nothing to read there.
    if s.cluster_slot().is_some_and(|slot| crate::core::slots::key_slot(&queue) != slot) {
        return Ok(None);
    }
    // Read before the caller's ACL is asked: a restricted caller needs read access to the
    // queue and the deadlines, even where there is no queue (whether one exists is read too).
    crate::core::permit(s, || crate::core::access::fair_peek(key))?;
    // The free path of every acquire comes here: the usual answer (no queue) is one lookup.
    if !s.peek_exists(&queue) || !matches!(s.list_len(&queue), Ok(n) if n > 0) {
        return Ok(None);
    }
    let deadlines = names::fair_timeouts(key);
    let now = s.now() as f64;
    // The head first: only a dead head makes the walk read the whole queue.
    let Some(head) = s.list_index(&queue, 0)? else { return Ok(None) };
    let mut waiters = vec![head];
    let mut walked_all = false;
    let mut i = 0;
    while i < waiters.len() {
        let d = s.zset_score(&deadlines, &waiters[i]).ok().flatten();
        if d.is_none_or(|d| d > now) {
            return Ok(Some(d));
        }
        i += 1;
        if i == waiters.len() && !walked_all {
            waiters = s.list_all(&queue)?;
            walked_all = true;
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::{MemoryStore, Value};

    fn queued(s: &mut MemoryStore, waiters: &[(&str, Option<f64>)]) {
        let list = waiters.iter().map(|(w, _)| w.as_bytes().to_vec()).collect();
        s.data.insert(names::fair_queue(b"l"), (Value::List(list), None));
        let z = waiters.iter().filter_map(|(w, d)| d.map(|d| (w.as_bytes().to_vec(), d))).collect();
        s.data.insert(names::fair_timeouts(b"l"), (Value::Zset(z), None));
    }

    /// (name, queue as (owner, deadline), the time the first live waiter has left)
    type Case = (&'static str, &'static [(&'static str, Option<f64>)], Option<i64>);

    #[rustfmt::skip]
    const CASES: &[Case] = &[
        // name,                          queue (owner, deadline),                          ahead
        ("no queue",                      &[],                                              None),
        ("a live head",                   &[("a", Some(1_500.0))],                          Some(500)),
        ("a dead head, a live second",    &[("a", Some(1_000.0)), ("b", Some(1_200.5))],    Some(201)),
        ("only dead waiters",             &[("a", Some(900.0)), ("b", Some(1_000.0))],      None),
        ("a head without a deadline",     &[("a", None)],                                   Some(1)),
        ("a deadline past i64",           &[("a", Some(1e300))],                            Some(i64::MAX)),
    ];

    #[test]
    fn a_live_fair_waiter_makes_a_free_name_the_fair_locks() {
        for (name, waiters, ahead) in CASES {
            let mut s = MemoryStore::at(1_000);
            if !waiters.is_empty() {
                queued(&mut s, waiters);
            }
            assert_eq!(fair_queue_ahead(&mut s, b"l"), Ok(*ahead), "{name}");
        }
    }

    #[test]
    fn a_queue_key_of_another_type_is_no_queue() {
        let mut s = MemoryStore::at(1_000);
        s.set_px_at(&names::fair_queue(b"l"), b"x", 5_000);
        assert_eq!(fair_queue_ahead(&mut s, b"l"), Ok(None));
    }

    #[test]
    fn only_a_hash_with_a_mode_field_is_a_read_write_lock() {
        let mut s = MemoryStore::at(1_000);
        assert!(!is_rwlock(&mut s, b"l"));
        s.hash_set(b"l", b"a", b"1");
        assert!(!is_rwlock(&mut s, b"l"), "a reentrant hash");
        s.hash_set(b"l", b"mode", b"read");
        assert!(is_rwlock(&mut s, b"l"));
        s.set_px_at(b"l", b"x", 5_000);
        assert!(!is_rwlock(&mut s, b"l"), "a string");
    }
}
