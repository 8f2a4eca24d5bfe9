//! The fair lock on the in-memory store with a fake clock: seed 004's story step by step, then
//! every branch of every command.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::LockError;

const T0: i64 = 1_663_143_000_000;
const Q: &str = "redisson_lock_queue:{fairLock}";
const Z: &str = "redisson_lock_timeout:{fairLock}";
const LEASE: i64 = 30_000;
const WAIT: i64 = 300_000;

fn acq(s: &mut MemoryStore, owner: &str) -> Acquired {
    acquire(s, b"fairLock", owner.as_bytes(), LEASE, WAIT, IfRefused::Queue).expect("acquire")
}

fn zset(s: &mut MemoryStore) -> Vec<(String, i64)> {
    s.zset_entries(Z).into_iter().map(|(m, t)| (m, t as i64)).collect()
}

fn pairs(v: &[(&str, i64)]) -> Vec<(String, i64)> {
    v.iter().map(|(m, t)| (m.to_string(), *t)).collect()
}

/// t1 holds; t3 then t2 queue behind it, each deadline the one ahead plus `wait`.
fn t1_holds_t3_t2_queue() -> MemoryStore {
    let mut s = MemoryStore::at(T0);
    assert_eq!(acq(&mut s, "t1"), Acquired::New);
    s.advance(12_000);
    assert_eq!(acq(&mut s, "t3"), Acquired::Refused(18_000), "base: the lock's PTTL");
    s.advance(1_000);
    assert_eq!(acq(&mut s, "t2"), Acquired::Refused(WAIT + 18_000 - 1_000), "base: t3's deadline");
    s
}

#[test]
fn seed_004_waiters_queue_behind_the_holder_in_arrival_order() {
    let mut s = t1_holds_t3_t2_queue();
    assert_eq!(s.hash("fairLock"), vec![("t1".into(), "1".into())]);
    assert_eq!(s.list_strings(Q), ["t3", "t2"]);
    let t3 = T0 + 30_000 + WAIT;
    assert_eq!(zset(&mut s), pairs(&[("t3", t3), ("t2", t3 + WAIT)]));
}

#[test]
fn a_queued_owner_retrying_gets_the_lock_ttl_and_keeps_its_place() {
    let mut s = t1_holds_t3_t2_queue();
    let before = zset(&mut s);
    s.advance(500);
    assert_eq!(acq(&mut s, "t3"), Acquired::Refused(30_000 - 13_500));
    assert_eq!(zset(&mut s), before);
    assert_eq!(s.list_strings(Q), ["t3", "t2"]);
}

#[test]
fn the_head_is_granted_after_unlock_and_the_rest_move_up_by_wait() {
    let mut s = t1_holds_t3_t2_queue();
    assert_eq!(acq(&mut s, "t2"), Acquired::Refused(17_000), "not its turn");
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, None), Ok(Reply::Int(1)));
    assert_eq!(s.take_published(), [("redisson_lock__channel:{fairLock}:t3".to_string(), "0".to_string())]);
    assert_eq!(acq(&mut s, "t2"), Acquired::Refused(0), "t3 is first in line: the lock is free, PTTL -2");
    assert_eq!(acq(&mut s, "t3"), Acquired::New);
    assert_eq!(s.list_strings(Q), ["t2"]);
    assert_eq!(zset(&mut s), pairs(&[("t2", T0 + 30_000 + WAIT)]));
    assert_eq!(s.pttl(b"fairLock"), LEASE);
}

#[test]
fn waiters_whose_deadline_passed_are_purged_from_the_head() {
    let mut s = t1_holds_t3_t2_queue();
    s.advance(30_000 + WAIT - 13_000);
    assert_eq!(acq(&mut s, "t4"), Acquired::Refused(WAIT), "t3 purged; the lock expired; base from t2");
    assert_eq!(s.list_strings(Q), ["t2", "t4"]);
    s.advance(WAIT);
    assert_eq!(acq(&mut s, "t4"), Acquired::New, "t2 purged in turn; t4 is the head and the lock is free");
    assert_eq!(s.list_strings(Q), Vec::<String>::new());
    assert_eq!(zset(&mut s), vec![]);
}

#[test]
fn a_head_without_a_deadline_stops_the_purge() {
    let mut s = MemoryStore::at(T0);
    s.list_push_tail(Q.as_bytes(), b"ghost");
    s.list_push_tail(Q.as_bytes(), b"old");
    s.zset_add(Z.as_bytes(), b"old", (T0 - 1) as f64);
    assert_eq!(acq(&mut s, "me"), Acquired::Refused(-1), "base: the tail's deadline, already past");
    assert_eq!(s.list_strings(Q), ["ghost", "old", "me"]);
}

#[test]
fn reentry_increments_and_resets_the_lease() {
    let mut s = MemoryStore::at(T0);
    acq(&mut s, "t1");
    s.advance(10_000);
    assert_eq!(acq(&mut s, "t1"), Acquired::Reentered);
    assert_eq!(s.hash("fairLock"), vec![("t1".into(), "2".into())]);
    assert_eq!(s.pttl(b"fairLock"), LEASE);
}

#[test]
fn noqueue_replies_1_and_leaves_the_queue_alone() {
    let mut s = MemoryStore::at(T0);
    acq(&mut s, "t1");
    let r = acquire(&mut s, b"fairLock", b"t2", LEASE, WAIT, IfRefused::NoQueue);
    assert_eq!(r, Ok(Acquired::Refused(1)));
    assert!(!s.exists(Q.as_bytes()) && !s.exists(Z.as_bytes()));
}

#[test]
fn unlock_branches() {
    let mut s = MemoryStore::at(T0);
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, None), Ok(Reply::Int(1)), "free: 1, nobody to wake");
    assert!(s.take_published().is_empty());
    acq(&mut s, "t1");
    acq(&mut s, "t1");
    assert_eq!(unlock(&mut s, b"fairLock", b"t2", LEASE, None), Ok(Reply::Nil));
    s.advance(5_000);
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", 7_000, None), Ok(Reply::Int(0)));
    assert_eq!(s.pttl(b"fairLock"), 7_000);
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", 7_000, None), Ok(Reply::Int(1)));
    assert!(!s.exists(b"fairLock"));
}

#[test]
fn unlock_with_a_latch_answers_a_retry_with_the_first_outcome() {
    let mut s = MemoryStore::at(T0);
    acq(&mut s, "t1");
    let latch = Some(Latch { request_id: b"r1", ttl_ms: 5_000 });
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, latch), Ok(Reply::Int(1)));
    acq(&mut s, "t2");
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, latch), Ok(Reply::Int(1)));
    assert_eq!(s.hash("fairLock"), vec![("t2".into(), "1".into())], "the retry changed nothing");
}

#[test]
fn over_maxmemory_an_unlock_of_a_free_lock_writes_no_latch() {
    let mut s = MemoryStore::at(T0);
    s.oom = true;
    let latch = Some(Latch { request_id: b"r1", ttl_ms: 5_000 });
    assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, latch), Ok(Reply::Int(1)));
    assert!(!s.exists(&crate::core::names::unlock_latch(b"fairLock", b"r1")));
}

#[test]
fn cancel_in_the_middle_moves_the_later_waiters_up() {
    let mut s = t1_holds_t3_t2_queue();
    s.advance(1_000);
    acq(&mut s, "t4");
    let t3 = T0 + 30_000 + WAIT;
    assert_eq!(cancel(&mut s, b"fairLock", b"t2", WAIT), Ok(Reply::Int(1)));
    assert_eq!(s.list_strings(Q), ["t3", "t4"]);
    assert_eq!(zset(&mut s), pairs(&[("t3", t3), ("t4", t3 + WAIT)]));
    assert_eq!(cancel(&mut s, b"fairLock", b"t2", WAIT), Ok(Reply::Int(0)));
}

/// t1 holds; `n` waiters `w0..` queue behind it, each with its own `wait`.
fn long_queue(n: usize) -> MemoryStore {
    let mut s = MemoryStore::at(T0);
    acq(&mut s, "t1");
    for i in 0..n {
        let wait = 1_000 + 37 * i as i64;
        acquire(&mut s, b"fairLock", format!("w{i}").as_bytes(), LEASE, wait, IfRefused::Queue).expect("queue");
    }
    s
}

#[test]
fn cancelling_many_at_once_leaves_the_keyspace_of_cancelling_them_one_by_one() {
    #[rustfmt::skip]
    let cases: &[&[(&str, i64)]] = &[
        &[("w3", 1_111)],
        &[("w0", 1_000), ("w5", 2_000), ("w19", 3_000)],
        &[("w7", 500), ("w2", 700), ("w7", 900)],          // an owner twice: its first wait
        &[("w4", 10), ("nobody", 99), ("t1", 5)],          // unknown and holder: no-ops
        &[("w1", 1), ("w2", 2), ("w3", 3), ("w4", 4), ("w5", 5), ("w6", 6), ("w7", 7), ("w8", 8),
          ("w9", 9), ("w10", 10), ("w11", 11), ("w12", 12), ("w13", 13), ("w14", 14), ("w15", 15),
          ("w16", 16), ("w17", 17), ("w18", 18), ("w19", 19), ("w0", 20)],
    ];
    for cancels in cases {
        let mut one_by_one = long_queue(20);
        for (owner, wait) in *cancels {
            cancel(&mut one_by_one, b"fairLock", owner.as_bytes(), *wait).expect("cancel");
        }
        let mut at_once = long_queue(20);
        let batch: Vec<(&[u8], i64)> = cancels.iter().map(|(o, w)| (o.as_bytes(), *w)).collect();
        cancel_many(&mut at_once, b"fairLock", &batch).expect("cancel_many");
        assert_eq!(at_once.list_strings(Q), one_by_one.list_strings(Q), "{cancels:?}");
        assert_eq!(zset(&mut at_once), zset(&mut one_by_one), "{cancels:?}");
        assert_eq!(at_once.hash("fairLock"), one_by_one.hash("fairLock"));
    }
}

#[test]
fn cancelling_many_checks_the_key_types_before_any_write() {
    let mut s = long_queue(3);
    s.data.insert(Z.as_bytes().to_vec(), (crate::core::memory::Value::Str(b"x".to_vec()), None));
    assert_eq!(cancel_many(&mut s, b"fairLock", &[(b"w1", 1_000)]), Err(LockError::WrongType));
    assert_eq!(s.list_strings(Q), ["w0", "w1", "w2"]);
}

#[test]
fn force_unlock_deletes_and_wakes_the_head() {
    let mut s = t1_holds_t3_t2_queue();
    assert_eq!(force_unlock(&mut s, b"fairLock"), Ok(Reply::Int(1)));
    assert_eq!(s.take_published(), [("redisson_lock__channel:{fairLock}:t3".to_string(), "0".to_string())]);
    assert_eq!(force_unlock(&mut s, b"fairLock"), Ok(Reply::Int(0)));
    assert!(s.take_published().is_empty());
}

#[test]
fn a_queue_or_deadline_key_of_another_type_is_refused_before_any_write() {
    for bad in [Q, Z] {
        let mut s = MemoryStore::at(T0);
        s.set_px_at(bad.as_bytes(), b"x", T0 + 100_000);
        assert_eq!(acquire(&mut s, b"fairLock", b"t1", LEASE, WAIT, IfRefused::Queue), Err(LockError::WrongType));
        assert_eq!(unlock(&mut s, b"fairLock", b"t1", LEASE, None), Err(LockError::WrongType));
        assert_eq!(cancel(&mut s, b"fairLock", b"t1", WAIT), Err(LockError::WrongType));
        assert_eq!(force_unlock(&mut s, b"fairLock"), Err(LockError::WrongType));
        assert!(!s.exists(b"fairLock"));
    }
}

#[test]
fn keep_alive_moves_a_parked_waiter_and_those_behind_it_only() {
    let mut s = t1_holds_t3_t2_queue();
    s.advance(1_000);
    acq(&mut s, "t4");
    let before = zset(&mut s);
    s.advance(30_000 + WAIT - 14_000 - 100);
    // t2 is parked; its deadline is 100 ms + WAIT away, more than the 50 ms asked for.
    keep_alive(&mut s, b"fairLock", &[(b"t2", WAIT)], 50).expect("keep alive");
    assert_eq!(zset(&mut s), before);
    // t3's deadline is 100 ms away: parked, it is moved to 500 ms + WAIT from now, t2 and t4
    // by the same amount.
    keep_alive(&mut s, b"fairLock", &[(b"t3", WAIT)], 500).expect("keep alive");
    let now = s.now;
    let shifted: Vec<(String, i64)> = before.iter().map(|(m, t)| (m.clone(), t + 400 + WAIT)).collect();
    assert_eq!(zset(&mut s), shifted);
    assert_eq!(zset(&mut s)[0].1, now + 500 + WAIT);
}

#[test]
fn keep_alive_of_two_parked_waiters_moves_each_only_as_far_as_it_needs_in_queue_order() {
    // a, b, c queued with a 100 ms wait each: deadlines D, D + 100, D + 200.
    let mut s = MemoryStore::at(T0);
    acquire(&mut s, b"fairLock", b"h", LEASE, 100, IfRefused::Queue).expect("h");
    for w in ["a", "b", "c"] {
        acquire(&mut s, b"fairLock", w.as_bytes(), LEASE, 100, IfRefused::Queue).expect("queue");
    }
    let d = T0 + LEASE + 100;
    s.advance(LEASE - 50);
    // Both a and b are parked and due; c is not parked. Listed out of queue order on purpose.
    keep_alive(&mut s, b"fairLock", &[(b"b", 100), (b"a", 100)], 300).expect("keep alive");
    let now = s.now;
    // a moves to now + 300 + 100; b, behind it, moves with it and is then far enough ahead.
    let shift = now + 400 - d;
    assert_eq!(zset(&mut s), pairs(&[("a", d + shift), ("b", d + 100 + shift), ("c", d + 200 + shift)]));
    // Nothing is due any more: a second pass writes nothing.
    let before = zset(&mut s);
    keep_alive(&mut s, b"fairLock", &[(b"b", 100), (b"a", 100)], 300).expect("keep alive");
    assert_eq!(zset(&mut s), before);
}

#[test]
fn a_place_is_due_for_keep_alive_only_when_its_deadline_is_closer_than_ahead() {
    let mut s = t1_holds_t3_t2_queue();
    // t3's deadline: the lock's PTTL then plus its wait, 317 s from now.
    assert!(!place_due(&mut s, b"fairLock", b"t3", 1_000).expect("read"));
    assert!(place_due(&mut s, b"fairLock", b"t3", 400_000).expect("read"));
    assert!(!place_due(&mut s, b"fairLock", b"nobody", 400_000).expect("read"), "not queued: nothing to keep");
    s.advance(316_500);
    assert!(place_due(&mut s, b"fairLock", b"t3", 1_000).expect("read"));
}
