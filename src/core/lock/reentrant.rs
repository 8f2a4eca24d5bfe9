//! The reentrant lock (Redisson's `RLock`).
//!
//! | key `name` (hash)        | meaning                                          |
//! |--------------------------|--------------------------------------------------|
//! | absent                   | free                                             |
//! | `{owner: n}`, PTTL = lease | held by `owner`, entered `n` times (n >= 1)    |
//!
//! Releasing the last hold deletes the hash and publishes `0` on
//! `redisson_lock__channel:{name}`, where Redisson's waiters listen.

use super::kinds;
use super::latch::{latch_check, latch_record, Latch};
use crate::core::{access, names};
use crate::core::{deadline, permit, Reply, Result, Store};

pub use crate::core::reply::Acquired;

/// `LOCK.ACQUIRE key owner lease`: take (or re-enter) the lock, or report its PTTL.
///
/// One name, one kind: a read-write lock's hash is refused even to an owner that holds read
/// holds in it, and a free lock is refused while a fair lock's queue under the same name has a
/// live waiter (reply: the time that waiter has left to take it), so no one jumps that queue.
pub fn acquire<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Acquired> {
    let at = deadline(s.now(), lease)?;
    if owner == names::MODE && kinds::is_rwlock(s, key) {
        return Ok(Acquired::Refused(s.pttl(key)));
    }
    let holds = s.hash_get_int(key, owner)?;
    match holds {
        None if s.exists(key) => return Ok(Acquired::Refused(s.pttl(key))),
        None => {
            if let Some(ttl) = kinds::fair_queue_ahead(s, key)? {
                return Ok(Acquired::Refused(ttl));
            }
        }
        Some(_) if kinds::is_rwlock(s, key) => return Ok(Acquired::Refused(s.pttl(key))),
        Some(_) => {}
    }
    s.hash_incr(key, owner, 1)?;
    s.pexpire_at(key, at);
    Ok(if holds.is_some() { Acquired::Reentered } else { Acquired::New })
}

/// The hold count of `owner` in `key` as a reentrant (or fair) lock: None if it holds nothing
/// there, or if `key` is a read-write lock (whose read counts are not reentrant holds).
pub fn holds<S: Store>(s: &mut S, key: &[u8], owner: &[u8]) -> Result<Option<i64>> {
    if owner == names::MODE && kinds::is_rwlock(s, key) {
        return Ok(None);
    }
    match s.hash_get_int(key, owner)? {
        Some(_) if kinds::is_rwlock(s, key) => Ok(None),
        n => Ok(n),
    }
}

/// `LOCK.UNLOCK key owner lease [LATCH ...]`: nil if `owner` holds nothing, 0 if holds remain
/// (the lease is renewed), 1 if this released the lock.
pub fn unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64, latch: Option<Latch>) -> Result<Reply> {
    let at = deadline(s.now(), lease)?;
    permit(s, || access::lock_unlock(key, latch.map(|l| l.request_id)))?;
    if let Some(earlier) = latch_check(s, key, latch)? {
        return Ok(earlier);
    }
    let Some(holds) = holds(s, key, owner)? else {
        return Ok(Reply::Nil);
    };
    if holds.saturating_sub(1) > 0 {
        s.hash_incr(key, owner, -1)?;
        s.pexpire_at(key, at);
        latch_record(s, key, latch, 0);
        return Ok(Reply::Int(0));
    }
    s.hash_incr_then_del(key, owner, -1)?;
    s.publish(&names::lock_channel(key), b"0");
    latch_record(s, key, latch, 1);
    Ok(Reply::Int(1))
}

/// `LOCK.RENEW key owner lease`: 1 if `owner` holds the lock (its lease is reset), else 0.
pub fn renew<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Reply> {
    let at = deadline(s.now(), lease)?;
    // Any value: Redisson's renewal tests the field's presence, not its count.
    let held = s.hash_get(key, owner)?.is_some() && !kinds::is_rwlock(s, key);
    if !held {
        return Ok(Reply::Int(0));
    }
    s.pexpire_at(key, at);
    Ok(Reply::Int(1))
}

/// `LOCK.FORCEUNLOCK key`: delete the lock whoever holds it; 1 if it existed.
/// A read-write lock under the name is not this kind's to delete: 0.
pub fn force_unlock<S: Store>(s: &mut S, key: &[u8]) -> Result<Reply> {
    permit(s, || access::lock_forceunlock(key))?;
    if kinds::is_rwlock(s, key) || !s.del(key) {
        return Ok(Reply::Int(0));
    }
    s.publish(&names::lock_channel(key), b"0");
    Ok(Reply::Int(1))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::{MemoryStore, Value};
    use crate::core::LockError;

    const K: &[u8] = b"lock";
    const CH: &str = "redisson_lock__channel:{lock}";

    fn store() -> MemoryStore {
        MemoryStore::at(1_000_000)
    }

    #[test]
    fn it_acquires_a_free_lock_with_the_lease() {
        let mut s = store();
        assert_eq!(acquire(&mut s, K, b"a", 30_000), Ok(Acquired::New));
        assert_eq!(s.hash("lock"), vec![("a".into(), "1".into())]);
        assert_eq!(s.pttl(K), 30_000);
    }

    #[test]
    fn it_reenters_and_resets_the_lease() {
        let mut s = store();
        acquire(&mut s, K, b"a", 30_000).unwrap();
        s.advance(10_000);
        assert_eq!(acquire(&mut s, K, b"a", 5_000), Ok(Acquired::Reentered));
        assert_eq!(s.hash("lock"), vec![("a".into(), "2".into())]);
        assert_eq!(s.pttl(K), 5_000);
    }

    #[test]
    fn it_refuses_another_owner_with_the_remaining_ttl() {
        let mut s = store();
        acquire(&mut s, K, b"a", 30_000).unwrap();
        s.advance(1_234);
        assert_eq!(acquire(&mut s, K, b"b", 30_000), Ok(Acquired::Refused(28_766)));
        assert_eq!(s.hash("lock"), vec![("a".into(), "1".into())]);
    }

    #[test]
    fn it_is_free_again_once_the_lease_expires() {
        let mut s = store();
        acquire(&mut s, K, b"a", 100).unwrap();
        s.advance(100);
        assert_eq!(acquire(&mut s, K, b"b", 100), Ok(Acquired::New));
    }

    /// (name, acquires by, unlock by, reply, hash after, published)
    type UnlockCase =
        (&'static str, &'static [&'static str], &'static str, Reply, &'static [(&'static str, &'static str)], bool);

    #[rustfmt::skip]
    const UNLOCK_CASES: &[UnlockCase] = &[
        // name,              acquires by,  unlock by, reply,          hash after,    published
        ("not held",          &[],          "a",       Reply::Nil,     &[],           false),
        ("held by another",   &["b"],       "a",       Reply::Nil,     &[("b", "1")], false),
        ("last hold",         &["a"],       "a",       Reply::Int(1),  &[],           true),
        ("one of two holds",  &["a", "a"],  "a",       Reply::Int(0),  &[("a", "1")], false),
    ];

    #[test]
    fn unlock_follows_redissons_branches() {
        for (name, acquires, by, reply, after, published) in UNLOCK_CASES {
            let mut s = store();
            for o in *acquires {
                acquire(&mut s, K, o.as_bytes(), 30_000).unwrap();
            }
            assert_eq!(unlock(&mut s, K, by.as_bytes(), 7_000, None).as_ref(), Ok(reply), "{name}");
            let want: Vec<(String, String)> = after.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
            assert_eq!(s.hash("lock"), want, "{name}");
            let msgs = s.take_published();
            assert_eq!(msgs == vec![(CH.to_string(), "0".to_string())], *published, "{name}: {msgs:?}");
        }
    }

    #[test]
    fn partial_unlock_resets_the_lease() {
        let mut s = store();
        acquire(&mut s, K, b"a", 30_000).unwrap();
        acquire(&mut s, K, b"a", 30_000).unwrap();
        assert_eq!(unlock(&mut s, K, b"a", 7_000, None), Ok(Reply::Int(0)));
        assert_eq!(s.pttl(K), 7_000);
    }

    #[test]
    fn a_latched_unlock_replays_its_first_outcome() {
        let mut s = store();
        let latch = Some(Latch { request_id: b"r1", ttl_ms: 500 });
        acquire(&mut s, K, b"a", 30_000).unwrap();
        assert_eq!(unlock(&mut s, K, b"a", 30_000, latch), Ok(Reply::Int(1)));
        assert_eq!(s.get(b"redisson_unlock_latch:{lock}:r1"), Ok(Some(b"1".to_vec())));
        assert_eq!(s.pttl(b"redisson_unlock_latch:{lock}:r1"), 500);
        // Retried: the lock is gone, but the latch answers as the first attempt did.
        s.take_published();
        assert_eq!(unlock(&mut s, K, b"a", 30_000, latch), Ok(Reply::Int(1)));
        assert!(s.take_published().is_empty());
        s.advance(500);
        assert_eq!(unlock(&mut s, K, b"a", 30_000, latch), Ok(Reply::Nil));
    }

    #[test]
    fn a_partial_latched_unlock_records_zero() {
        let mut s = store();
        let latch = Some(Latch { request_id: b"r", ttl_ms: 500 });
        acquire(&mut s, K, b"a", 30_000).unwrap();
        acquire(&mut s, K, b"a", 30_000).unwrap();
        assert_eq!(unlock(&mut s, K, b"a", 30_000, latch), Ok(Reply::Int(0)));
        assert_eq!(unlock(&mut s, K, b"a", 30_000, latch), Ok(Reply::Int(0)));
        assert_eq!(s.hash("lock"), vec![("a".into(), "1".into())]);
    }

    #[test]
    fn renew_extends_only_the_holders_lease() {
        let mut s = store();
        acquire(&mut s, K, b"a", 1_000).unwrap();
        assert_eq!(renew(&mut s, K, b"b", 9_000), Ok(Reply::Int(0)));
        assert_eq!(s.pttl(K), 1_000);
        assert_eq!(renew(&mut s, K, b"a", 9_000), Ok(Reply::Int(1)));
        assert_eq!(s.pttl(K), 9_000);
    }

    #[test]
    fn force_unlock_deletes_and_publishes_only_if_held() {
        let mut s = store();
        assert_eq!(force_unlock(&mut s, K), Ok(Reply::Int(0)));
        assert!(s.take_published().is_empty());
        acquire(&mut s, K, b"a", 1_000).unwrap();
        assert_eq!(force_unlock(&mut s, K), Ok(Reply::Int(1)));
        assert!(!s.exists(K));
        assert_eq!(s.take_published(), vec![(CH.to_string(), "0".to_string())]);
    }

    #[test]
    fn wrong_types_and_corrupt_counts_are_errors_that_change_nothing() {
        let mut s = store();
        s.set_px_at(K, b"x", 2_000_000);
        assert_eq!(acquire(&mut s, K, b"a", 1_000), Err(LockError::WrongType));
        assert_eq!(unlock(&mut s, K, b"a", 1_000, None), Err(LockError::WrongType));
        assert_eq!(renew(&mut s, K, b"a", 1_000), Err(LockError::WrongType));
        assert_eq!(s.value(K).cloned(), Some(Value::Str(b"x".to_vec())));

        let mut s = store();
        s.hash_set(K, b"a", b"many");
        assert_eq!(acquire(&mut s, K, b"a", 1_000), Err(LockError::CorruptHoldCount));
        assert_eq!(unlock(&mut s, K, b"a", 1_000, None), Err(LockError::CorruptHoldCount));
        assert_eq!(s.hash("lock"), vec![("a".into(), "many".into())]);

        let mut s = store();
        acquire(&mut s, K, b"a", 1_000).unwrap();
        s.hash_set(b"redisson_unlock_latch:{lock}:r", b"f", b"v");
        let latch = Some(Latch { request_id: b"r", ttl_ms: 500 });
        assert_eq!(unlock(&mut s, K, b"a", 1_000, latch), Err(LockError::WrongType));
        assert_eq!(s.hash("lock"), vec![("a".into(), "1".into())]);
    }
}
