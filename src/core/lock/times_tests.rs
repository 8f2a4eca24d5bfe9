//! Times and counts at the edge of the 64-bit range, on the fake-clock store: every deadline
//! that would pass the largest expiry time is `InvalidExpire`, every count that would pass the
//! range is `Overflow`, and either leaves the keyspace exactly as it was.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::fair::{self, IfRefused};
use super::latch::Latch;
use super::reentrant::{self, Acquired};
use super::rwlock::{self, Side, Writers};
use crate::core::memory::{MemoryStore, Value};
use crate::core::names;
use crate::core::store::Store;
use crate::core::{LockError, Reply};

const NOW: i64 = 1_700_000_000_000;
const K: &[u8] = b"l";
/// The largest lease whose deadline fits: NOW + it = i64::MAX.
const MAX_LEASE: i64 = i64::MAX - NOW;
const EXPIRE: LockError = LockError::InvalidExpire("");

fn store() -> MemoryStore {
    MemoryStore::at(NOW)
}

/// Every key with its value and expiry, sorted: "nothing written" is this staying equal.
fn snapshot(s: &MemoryStore) -> Vec<(Vec<u8>, String, Option<i64>)> {
    let mut v: Vec<_> = s.data.iter().map(|(k, (val, at))| (k.clone(), format!("{val:?}"), *at)).collect();
    v.sort();
    v
}

#[test]
fn the_largest_lease_that_fits_is_taken_and_one_more_ms_is_an_error() {
    let mut s = store();
    assert_eq!(reentrant::acquire(&mut s, K, b"a", MAX_LEASE), Ok(Acquired::New));
    assert_eq!(s.pttl(K), MAX_LEASE);
    let mut s = store();
    assert_eq!(reentrant::acquire(&mut s, K, b"a", MAX_LEASE + 1), Err(EXPIRE));
    assert!(s.data.is_empty());
}

#[test]
fn every_lease_that_overflows_is_an_error_that_writes_nothing() {
    let huge = i64::MAX;
    let mut s = store();
    reentrant::acquire(&mut s, K, b"a", 30_000).unwrap();
    rwlock::read_lock(&mut s, b"rw", b"r", 30_000, Writers::None).unwrap();
    rwlock::write_lock(&mut s, b"w", b"w", 30_000).unwrap();
    fair::acquire(&mut s, b"f", b"h", 30_000, 5_000, IfRefused::Queue).unwrap();
    let before = snapshot(&s);
    let latch = Some(Latch { request_id: b"q", ttl_ms: huge });
    assert_eq!(reentrant::acquire(&mut s, K, b"a", huge), Err(EXPIRE));
    assert_eq!(
        crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, b"a", huge)).map(|(a, _)| a),
        Err(EXPIRE)
    );
    assert_eq!(reentrant::unlock(&mut s, K, b"a", huge, None), Err(EXPIRE));
    assert_eq!(reentrant::unlock(&mut s, K, b"a", 1_000, latch), Err(EXPIRE));
    assert_eq!(reentrant::renew(&mut s, K, b"a", huge), Err(EXPIRE));
    assert_eq!(rwlock::read_lock(&mut s, b"rw", b"r", huge, Writers::None), Err(EXPIRE));
    assert_eq!(rwlock::read_lock(&mut s, b"new", b"r", huge, Writers::None), Err(EXPIRE));
    assert_eq!(rwlock::write_lock(&mut s, b"w", b"w", huge), Err(EXPIRE));
    assert_eq!(rwlock::unlock(&mut s, b"w", b"w", Side::Write, huge, None), Err(EXPIRE));
    assert_eq!(rwlock::unlock(&mut s, b"rw", b"r", Side::Read, 1_000, latch), Err(EXPIRE));
    assert_eq!(rwlock::renew(&mut s, b"rw", b"r", huge), Err(EXPIRE));
    assert_eq!(fair::acquire(&mut s, b"f", b"h", huge, 5_000, IfRefused::Queue), Err(EXPIRE));
    assert_eq!(fair::acquire(&mut s, b"f2", b"x", huge, 5_000, IfRefused::Queue), Err(EXPIRE));
    assert_eq!(fair::unlock(&mut s, b"f", b"h", huge, None), Err(EXPIRE));
    assert_eq!(fair::unlock(&mut s, b"f", b"h", 1_000, latch), Err(EXPIRE));
    assert_eq!(fair::renew(&mut s, b"f", b"h", huge), Err(EXPIRE));
    assert_eq!(snapshot(&s), before);
}

#[test]
fn write_reentry_whose_ttl_plus_lease_overflows_is_an_error_that_writes_nothing() {
    let mut s = store();
    rwlock::write_lock(&mut s, K, b"w", MAX_LEASE - 10).unwrap();
    let before = snapshot(&s);
    assert_eq!(rwlock::write_lock(&mut s, K, b"w", 11), Err(EXPIRE));
    assert_eq!(snapshot(&s), before);
    assert_eq!(rwlock::write_lock(&mut s, K, b"w", 10), Ok(Acquired::Reentered));
    assert_eq!(s.pttl(K), MAX_LEASE);
}

#[test]
fn a_hold_count_at_the_edge_of_the_range_is_an_overflow_error_that_writes_nothing() {
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    let mut s = store();
    s.hash_set(K, b"a", max.as_bytes());
    s.hash_set(b"rw", b"mode", b"read");
    s.hash_set(b"rw", b"r", max.as_bytes());
    s.hash_set(b"w", b"mode", b"write");
    s.hash_set(b"w", b"w:write", max.as_bytes());
    s.hash_set(b"f", b"h", max.as_bytes());
    s.hash_set(b"g", b"h", min.as_bytes());
    // A dead waiter at the head of f's and g's queues: a purge would write.
    for lock in [b"f".as_slice(), b"g"] {
        s.data.insert(names::fair_queue(lock), (Value::List(vec![b"dead".to_vec()]), None));
        let z = [(b"dead".to_vec(), (NOW - 1) as f64)].into_iter().collect();
        s.data.insert(names::fair_timeouts(lock), (Value::Zset(z), None));
    }
    let before = snapshot(&s);
    assert_eq!(reentrant::acquire(&mut s, K, b"a", 1_000), Err(LockError::Overflow));
    assert_eq!(rwlock::read_lock(&mut s, b"rw", b"r", 1_000, Writers::None), Err(LockError::Overflow));
    assert_eq!(rwlock::write_lock(&mut s, b"w", b"w", 1_000), Err(LockError::Overflow));
    assert_eq!(fair::acquire(&mut s, b"f", b"h", 1_000, 5_000, IfRefused::Queue), Err(LockError::Overflow));
    assert_eq!(fair::unlock(&mut s, b"g", b"h", 1_000, None), Err(LockError::Overflow));
    assert_eq!(snapshot(&s), before);
}

#[test]
fn a_token_counter_at_i64_max_is_an_overflow_error_not_a_token_handed_out_twice() {
    let mut s = store();
    let counter = names::token(K);
    s.data.insert(counter.clone(), (Value::Str(i64::MAX.to_string().into_bytes()), None));
    let before = snapshot(&s);
    assert_eq!(
        crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, b"a", 1_000)).map(|(_, r)| r),
        Err(LockError::Overflow)
    );
    assert_eq!(snapshot(&s), before, "the lock is not taken either");
    s.data.insert(counter, (Value::Str((i64::MAX - 1).to_string().into_bytes()), None));
    let grant = Reply::Array(vec![Reply::Int(-1), Reply::Int(i64::MAX)]);
    assert_eq!(
        crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, b"a", 1_000)).map(|(_, r)| r),
        Ok(grant)
    );
    assert_eq!(
        crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, b"a", 1_000)).map(|(_, r)| r),
        Err(LockError::Overflow)
    );
    assert_eq!(s.hash("l"), vec![("a".into(), "1".into())]);
}

#[test]
fn a_fair_deadline_planted_huge_is_clamped_to_the_largest_expiry_time() {
    let mut s = store();
    fair::acquire(&mut s, K, b"h", 30_000, 5_000, IfRefused::Queue).unwrap();
    s.data.insert(names::fair_queue(K), (Value::List(vec![b"big".to_vec()]), None));
    let z = [(b"big".to_vec(), f64::INFINITY)].into_iter().collect();
    s.data.insert(names::fair_timeouts(K), (Value::Zset(z), None));
    let max_wait = i64::MAX - NOW;
    assert_eq!(fair::acquire(&mut s, K, b"w", 30_000, max_wait, IfRefused::Queue), Ok(Acquired::Refused(i64::MAX)));
    let z = s.zset_entries("redisson_lock_timeout:{l}");
    assert_eq!(z, vec![("w".into(), i64::MAX as f64), ("big".into(), f64::INFINITY)]);
}

#[test]
fn keep_alive_of_a_waiter_with_the_largest_wait_clamps_instead_of_overflowing() {
    let mut s = store();
    s.hash_set(K, b"h", b"1");
    s.data.insert(names::fair_queue(K), (Value::List(vec![b"a".to_vec()]), None));
    let z = [(b"a".to_vec(), (NOW + 100) as f64)].into_iter().collect();
    s.data.insert(names::fair_timeouts(K), (Value::Zset(z), None));
    fair::keep_alive(&mut s, K, &[(b"a", i64::MAX - NOW)], 300).unwrap();
    assert_eq!(s.zset_entries("redisson_lock_timeout:{l}"), vec![("a".into(), i64::MAX as f64)]);
}

#[test]
fn keep_alive_next_to_deadlines_planted_at_infinities_makes_no_nan() {
    let mut s = store();
    s.hash_set(K, b"h", b"1");
    let list = [b"neg".to_vec(), b"a".to_vec(), b"pos".to_vec()].into_iter().collect();
    s.data.insert(names::fair_queue(K), (Value::List(list), None));
    let z =
        [(b"neg".to_vec(), f64::NEG_INFINITY), (b"a".to_vec(), (NOW + 100) as f64), (b"pos".to_vec(), f64::INFINITY)];
    s.data.insert(names::fair_timeouts(K), (Value::Zset(z.into_iter().collect()), None));
    fair::keep_alive(&mut s, K, &[(b"neg", 1_000), (b"a", 1_000), (b"pos", 1_000)], 300).unwrap();
    let after = s.zset_entries("redisson_lock_timeout:{l}");
    assert_eq!(
        after,
        vec![("neg".into(), f64::NEG_INFINITY), ("a".into(), (NOW + 1_300) as f64), ("pos".into(), f64::INFINITY)]
    );
}
