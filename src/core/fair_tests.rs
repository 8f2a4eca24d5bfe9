//! Unit tests of the fair lock on the in-memory store with a fake clock.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::LockError;

const K: &[u8] = b"lock";
const Q: &[u8] = b"redisson_lock_queue:{lock}";
const Z: &[u8] = b"redisson_lock_timeout:{lock}";
const T0: i64 = 1_000_000;

fn store() -> MemoryStore {
    MemoryStore::at(T0)
}

fn queue(s: &mut MemoryStore) -> Vec<String> {
    s.list_range(Q).unwrap().into_iter().map(|v| String::from_utf8_lossy(&v).into()).collect()
}

fn deadlines(s: &mut MemoryStore) -> Vec<(String, i64)> {
    s.zset_all(Z).unwrap().into_iter().map(|(m, d)| (String::from_utf8_lossy(&m).into(), d)).collect()
}

#[test]
fn the_seed_004_story_queues_t2_and_t3_and_hands_over_in_order() {
    let mut s = store();
    assert_eq!(acquire(&mut s, K, b"t1", 30_000, 5_000, false), Ok(FairAcquired::Got(Acquired::New)));
    s.advance(1_000);
    // t2 queues behind the lock: base = PTTL 29000.
    assert_eq!(acquire(&mut s, K, b"t2", 30_000, 5_000, false), Ok(FairAcquired::Enqueued(29_000)));
    // t3 queues behind t2: base = t2's deadline - now.
    assert_eq!(acquire(&mut s, K, b"t3", 30_000, 5_000, false), Ok(FairAcquired::Enqueued(34_000)));
    assert_eq!(queue(&mut s), vec!["t2", "t3"]);
    assert_eq!(deadlines(&mut s), vec![("t2".into(), T0 + 35_000), ("t3".into(), T0 + 40_000)]);
    // t2 asks again: already queued, the lock's PTTL.
    assert_eq!(acquire(&mut s, K, b"t2", 30_000, 5_000, false), Ok(FairAcquired::Waiting(29_000)));
    assert_eq!(unlock(&mut s, K, b"t1", 30_000, None), Ok(Reply::Int(1)));
    assert_eq!(s.take_published(), vec![("redisson_lock__channel:{lock}:t2".into(), "0".into())]);
    // t3 may not jump the queue.
    assert_eq!(acquire(&mut s, K, b"t3", 30_000, 5_000, false), Ok(FairAcquired::Waiting(0)));
    assert_eq!(acquire(&mut s, K, b"t2", 30_000, 5_000, false), Ok(FairAcquired::Got(Acquired::New)));
    assert_eq!(queue(&mut s), vec!["t3"]);
    assert_eq!(deadlines(&mut s), vec![("t3".into(), T0 + 35_000)]);
}

#[test]
fn a_waiter_past_its_deadline_is_purged_and_the_next_is_served() {
    let mut s = store();
    acquire(&mut s, K, b"a", 1_000, 100, false).unwrap();
    acquire(&mut s, K, b"b", 1_000, 100, false).unwrap(); // deadline T0+1100
    acquire(&mut s, K, b"c", 1_000, 100, false).unwrap(); // deadline T0+1200
    s.advance(1_150);
    assert_eq!(acquire(&mut s, K, b"c", 1_000, 100, false), Ok(FairAcquired::Got(Acquired::New)));
    assert_eq!(queue(&mut s), Vec::<String>::new());
    assert_eq!(deadlines(&mut s), vec![]);
}

#[test]
fn cancel_in_the_middle_pulls_later_deadlines_forward() {
    let mut s = store();
    acquire(&mut s, K, b"a", 10_000, 1_000, false).unwrap();
    for w in [b"b", b"c", b"d"] {
        acquire(&mut s, K, w, 10_000, 1_000, false).unwrap();
    }
    assert_eq!(cancel(&mut s, K, b"c", 1_000), Ok(Reply::Int(1)));
    assert_eq!(queue(&mut s), vec!["b", "d"]);
    assert_eq!(deadlines(&mut s), vec![("b".into(), T0 + 11_000), ("d".into(), T0 + 12_000)]);
    assert_eq!(cancel(&mut s, K, b"zz", 1_000), Ok(Reply::Int(0)));
}

#[test]
fn noqueue_replies_1_and_leaves_the_queue_alone() {
    let mut s = store();
    acquire(&mut s, K, b"a", 10_000, 1_000, false).unwrap();
    assert_eq!(acquire(&mut s, K, b"b", 10_000, 1_000, true), Ok(FairAcquired::NotQueued));
    assert_eq!(queue(&mut s), Vec::<String>::new());
    assert_eq!(acquire(&mut s, K, b"a", 10_000, 1_000, true), Ok(FairAcquired::Got(Acquired::Reentered)));
}

#[test]
fn unlock_of_an_absent_lock_notifies_the_head_and_force_unlock_too() {
    let mut s = store();
    acquire(&mut s, K, b"a", 10_000, 1_000, false).unwrap();
    acquire(&mut s, K, b"b", 10_000, 1_000, false).unwrap();
    assert_eq!(force_unlock(&mut s, K), Ok(Reply::Int(1)));
    assert_eq!(s.take_published(), vec![("redisson_lock__channel:{lock}:b".into(), "0".into())]);
    assert_eq!(force_unlock(&mut s, K), Ok(Reply::Int(0)));
    assert_eq!(unlock(&mut s, K, b"x", 10_000, None), Ok(Reply::Int(1)));
    assert_eq!(s.take_published(), vec![("redisson_lock__channel:{lock}:b".into(), "0".into())]);
}

#[test]
fn a_queue_of_the_wrong_type_is_an_error_and_nothing_changes() {
    let mut s = store();
    s.set_px_at(Q, b"x", T0 + 100_000);
    assert_eq!(acquire(&mut s, K, b"a", 10_000, 1_000, false), Err(LockError::WrongType));
    assert!(!s.exists(K));
}
