//! Unit tests of the read-write lock on the fake-clock store, including seed 001's scenarios.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::lock::latch::Latch;
use crate::core::memory::MemoryStore;
use crate::core::store::TTL_MISSING;

const K: &[u8] = b"rw";
const CH: &str = "redisson_rwlock:{rw}";

fn store() -> MemoryStore {
    MemoryStore::at(1_000_000)
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
    out.sort();
    out
}

fn t(s: &mut MemoryStore, owner: &str, i: i64) -> i64 {
    s.pttl(&names::read_timeout(K, owner.as_bytes(), i))
}

#[test]
fn a_free_lock_is_read_locked_with_one_timeout_key() {
    let mut s = store();
    assert_eq!(read_lock(&mut s, K, b"a", 30_000, Writers::None), Ok(Acquired::New));
    assert_eq!(s.hash("rw"), pairs(&[("a", "1"), ("mode", "read")]));
    assert_eq!(s.pttl(K), 30_000);
    assert_eq!(t(&mut s, "a", 1), 30_000);
}

#[test]
fn readers_share_and_the_lock_keeps_the_longest_lease() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    s.advance(1_000);
    assert_eq!(read_lock(&mut s, K, b"b", 5_000, Writers::None), Ok(Acquired::New));
    assert_eq!(s.pttl(K), 29_000, "max(remaining, lease)");
    assert_eq!(read_lock(&mut s, K, b"a", 60_000, Writers::None), Ok(Acquired::Reentered));
    assert_eq!(s.pttl(K), 60_000);
    assert_eq!(t(&mut s, "a", 2), 60_000);
    assert_eq!(s.hash("rw"), pairs(&[("a", "2"), ("b", "1"), ("mode", "read")]));
}

#[test]
fn a_writer_is_refused_while_readers_hold_and_gets_the_ttl() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    s.advance(500);
    assert_eq!(write_lock(&mut s, K, b"w", 10_000), Ok(Acquired::Refused(29_500)));
}

#[test]
fn a_reader_is_refused_while_another_owner_writes() {
    let mut s = store();
    write_lock(&mut s, K, b"w", 10_000).unwrap();
    assert_eq!(read_lock(&mut s, K, b"a", 10_000, Writers::None), Ok(Acquired::Refused(10_000)));
    assert_eq!(write_lock(&mut s, K, b"x", 10_000), Ok(Acquired::Refused(10_000)));
}

#[test]
fn write_reentry_adds_the_lease_to_the_remaining_ttl() {
    let mut s = store();
    assert_eq!(write_lock(&mut s, K, b"w", 10_000), Ok(Acquired::New));
    s.advance(4_000);
    assert_eq!(write_lock(&mut s, K, b"w", 10_000), Ok(Acquired::Reentered));
    assert_eq!(s.pttl(K), 16_000);
    assert_eq!(s.hash("rw"), pairs(&[("mode", "write"), ("w:write", "2")]));
}

/// Seed 001, first scenario: two owners hold reads with counts 2 and 1.
#[test]
fn read_unlock_keeps_ttl_of_longest_remaining_hold() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    s.advance(10_000);
    read_lock(&mut s, K, b"b", 5_000, Writers::None).unwrap();
    s.advance(1_000);
    // a's second hold goes: the longest left is a's first (19 s), not b's (4 s).
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 30_000, None), Ok(Reply::Int(0)));
    assert_eq!(t(&mut s, "a", 2), TTL_MISSING);
    assert_eq!(s.pttl(K), 19_000);
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 30_000, None), Ok(Reply::Int(0)));
    assert_eq!(s.pttl(K), 4_000);
    assert_eq!(s.hash("rw"), pairs(&[("b", "1"), ("mode", "read")]));
    assert!(s.take_published().is_empty());
    assert_eq!(unlock(&mut s, K, b"b", Side::Read, 30_000, None), Ok(Reply::Int(1)));
    assert!(!s.exists(K));
    assert_eq!(s.take_published(), vec![(CH.into(), "0".into())]);
}

/// Seed 001, second scenario: one owner holds write then read.
#[test]
fn the_writer_reads_then_unlocks_both_sides() {
    let mut s = store();
    write_lock(&mut s, K, b"w", 30_000).unwrap();
    assert_eq!(read_lock(&mut s, K, b"w", 30_000, Writers::None), Ok(Acquired::New));
    assert_eq!(s.hash("rw"), pairs(&[("mode", "write"), ("w", "1"), ("w:write", "1")]));
    // Read unlock: the write field alone has no timeout keys, the mode is write: reply 0.
    assert_eq!(unlock(&mut s, K, b"w", Side::Read, 30_000, None), Ok(Reply::Int(0)));
    assert_eq!(s.hash("rw"), pairs(&[("mode", "write"), ("w:write", "1")]));
    assert_eq!(unlock(&mut s, K, b"w", Side::Write, 30_000, None), Ok(Reply::Int(1)));
    assert!(!s.exists(K));
    assert_eq!(s.take_published(), vec![(CH.into(), "1".into())]);
}

#[test]
fn write_unlock_with_read_holds_left_downgrades_to_read() {
    let mut s = store();
    write_lock(&mut s, K, b"w", 30_000).unwrap();
    read_lock(&mut s, K, b"w", 30_000, Writers::None).unwrap();
    assert_eq!(unlock(&mut s, K, b"w", Side::Write, 30_000, None), Ok(Reply::Int(1)));
    assert_eq!(s.hash("rw"), pairs(&[("mode", "read"), ("w", "1")]));
    assert!(s.take_published().is_empty(), "a downgrade releases nothing");
    assert_eq!(read_lock(&mut s, K, b"other", 1_000, Writers::None), Ok(Acquired::New));
}

#[test]
fn partial_write_unlock_resets_the_lease() {
    let mut s = store();
    write_lock(&mut s, K, b"w", 30_000).unwrap();
    write_lock(&mut s, K, b"w", 30_000).unwrap();
    assert_eq!(unlock(&mut s, K, b"w", Side::Write, 7_000, None), Ok(Reply::Int(0)));
    assert_eq!(s.pttl(K), 7_000);
}

#[test]
fn read_holds_that_expired_on_their_own_do_not_keep_the_lock() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 100, Writers::None).unwrap();
    read_lock(&mut s, K, b"b", 30_000, Writers::None).unwrap();
    read_lock(&mut s, K, b"b", 30_000, Writers::None).unwrap();
    s.advance(200);
    // b's second hold goes; a's key is gone, b's first remains.
    assert_eq!(unlock(&mut s, K, b"b", Side::Read, 1, None), Ok(Reply::Int(0)));
    assert_eq!(s.pttl(K), 29_800);
    assert_eq!(unlock(&mut s, K, b"b", Side::Read, 1, None), Ok(Reply::Int(1)), "a's stale field alone");
    assert!(!s.exists(K));
}

#[test]
fn read_unlock_in_write_mode_without_live_read_keys_replies_0() {
    let mut s = store();
    write_lock(&mut s, K, b"w", 30_000).unwrap();
    read_lock(&mut s, K, b"w", 10, Writers::None).unwrap();
    read_lock(&mut s, K, b"w", 10, Writers::None).unwrap();
    s.advance(20);
    assert_eq!(unlock(&mut s, K, b"w", Side::Read, 1, None), Ok(Reply::Int(0)));
    assert_eq!(s.pttl(K), 29_980, "the TTL is left as it was");
}

#[test]
fn unlock_by_a_non_holder_replies_nil_and_changes_nothing() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    assert_eq!(unlock(&mut s, K, b"b", Side::Read, 1, None), Ok(Reply::Nil));
    assert_eq!(unlock(&mut s, K, b"a", Side::Write, 1, None), Ok(Reply::Nil));
    assert_eq!(s.hash("rw"), pairs(&[("a", "1"), ("mode", "read")]));
    assert!(s.take_published().is_empty());
}

#[test]
fn unlock_of_a_free_lock_publishes_and_replies_nil() {
    let mut s = store();
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 1, None), Ok(Reply::Nil));
    assert_eq!(unlock(&mut s, K, b"a", Side::Write, 1, None), Ok(Reply::Nil));
    assert_eq!(s.take_published(), vec![(CH.into(), "0".into()), (CH.into(), "1".into())]);
}

#[test]
fn a_latched_unlock_replays_its_first_outcome() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    let latch = Some(Latch { request_id: b"r1", ttl_ms: 500 });
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 1, latch), Ok(Reply::Int(1)));
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 1, latch), Ok(Reply::Int(1)));
    assert!(s.exists(K), "the retry changed nothing");
    assert_eq!(s.pttl(&names::unlock_latch(K, b"r1")), 500);
}

#[test]
fn over_maxmemory_an_unlock_of_an_absent_lock_writes_no_latch_but_a_release_does() {
    let mut s = store();
    s.oom = true;
    let latch = Some(Latch { request_id: b"r1", ttl_ms: 500 });
    assert_eq!(unlock(&mut s, K, b"a", Side::Write, 1, latch), Ok(Reply::Nil));
    assert!(!s.exists(&names::unlock_latch(K, b"r1")), "no latch for a release of nothing");
    assert_eq!(s.take_published(), vec![(CH.into(), "1".into())], "waiters are still told");
    s.oom = false;
    write_lock(&mut s, K, b"a", 30_000).unwrap();
    s.oom = true;
    assert_eq!(unlock(&mut s, K, b"a", Side::Write, 1, latch), Ok(Reply::Int(1)));
    assert_eq!(s.pttl(&names::unlock_latch(K, b"r1")), 500, "a real release keeps its retry guard");
}

#[test]
fn renew_refreshes_every_read_hold_and_the_lock() {
    let mut s = store();
    write_lock(&mut s, K, b"a", 1_000).unwrap();
    read_lock(&mut s, K, b"a", 1_000, Writers::None).unwrap();
    read_lock(&mut s, K, b"a", 1_000, Writers::None).unwrap();
    assert_eq!(renew(&mut s, K, b"a", 9_000), Ok(Reply::Int(1)));
    assert_eq!((s.pttl(K), t(&mut s, "a", 1), t(&mut s, "a", 2)), (9_000, 9_000, 9_000));
    assert_eq!(renew(&mut s, K, b"b", 9_000), Ok(Reply::Int(0)));
}

#[test]
fn force_unlock_deletes_only_in_the_given_mode() {
    let mut s = store();
    read_lock(&mut s, K, b"a", 30_000, Writers::None).unwrap();
    assert_eq!(force_unlock(&mut s, K, Side::Write), Ok(Reply::Int(0)));
    assert_eq!(force_unlock(&mut s, K, Side::Read), Ok(Reply::Int(1)));
    assert!(!s.exists(K));
    assert_eq!(t(&mut s, "a", 1), 30_000, "timeout keys are left to expire");
    assert_eq!(s.take_published(), vec![(CH.into(), "0".into())]);
}

#[test]
fn an_owner_named_mode_is_refused_before_any_write() {
    let mut s = store();
    assert_eq!(read_lock(&mut s, K, b"mode", 1, Writers::None), Err(LockError::ReservedOwner));
    assert_eq!(write_lock(&mut s, K, b"mode", 1), Err(LockError::ReservedOwner));
    assert!(!s.exists(K));
}

#[test]
fn a_lock_key_of_another_type_is_wrongtype() {
    let mut s = store();
    s.set_px_at(K, b"x", 2_000_000);
    assert_eq!(read_lock(&mut s, K, b"a", 1, Writers::None), Err(LockError::WrongType));
    assert_eq!(unlock(&mut s, K, b"a", Side::Read, 1, None), Err(LockError::WrongType));
    assert_eq!(renew(&mut s, K, b"a", 1), Err(LockError::WrongType));
}
