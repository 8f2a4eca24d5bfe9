//! One name, one kind, on the fake-clock store: a command of one kind on a name held as
//! another is refused and writes nothing; a free name with a live fair waiter is the fair
//! lock's; a parked writer makes new readers wait, but not re-entries.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::fair::{self, IfRefused};
use super::reentrant::{self, Acquired};
use super::rwlock::{self, Side, Writers};
use crate::core::memory::{MemoryStore, Value};
use crate::core::names;
use crate::core::Reply;

const NOW: i64 = 1_700_000_000_000;
const K: &[u8] = b"m";

fn store() -> MemoryStore {
    MemoryStore::at(NOW)
}

fn snapshot(s: &MemoryStore) -> Vec<(Vec<u8>, String, Option<i64>)> {
    let mut v: Vec<_> = s.data.iter().map(|(k, (val, at))| (k.clone(), format!("{val:?}"), *at)).collect();
    v.sort();
    v
}

#[test]
fn a_write_lock_is_refused_on_a_reentrant_lock_so_there_are_never_two_exclusive_holders() {
    let mut s = store();
    assert_eq!(reentrant::acquire(&mut s, K, b"a", 30_000), Ok(Acquired::New));
    s.advance(1_000);
    let before = snapshot(&s);
    assert_eq!(rwlock::write_lock(&mut s, K, b"b", 30_000), Ok(Acquired::Refused(29_000)));
    assert_eq!(rwlock::read_lock(&mut s, K, b"b", 30_000, Writers::None), Ok(Acquired::Refused(29_000)));
    // Not even the holder itself may take it as another kind.
    assert_eq!(rwlock::write_lock(&mut s, K, b"a", 30_000), Ok(Acquired::Refused(29_000)));
    assert_eq!(rwlock::renew(&mut s, K, b"a", 30_000), Ok(Reply::Int(0)));
    assert_eq!(rwlock::force_unlock(&mut s, K, Side::Write), Ok(Reply::Int(0)));
    assert_eq!(snapshot(&s), before);
}

#[test]
fn reentrant_and_fair_commands_leave_a_read_write_lock_alone_even_to_its_readers() {
    let mut s = store();
    rwlock::read_lock(&mut s, K, b"r", 30_000, Writers::None).unwrap();
    s.advance(500);
    let before = snapshot(&s);
    for owner in [b"r".as_slice(), b"x", b"mode"] {
        assert_eq!(reentrant::acquire(&mut s, K, owner, 1_000), Ok(Acquired::Refused(29_500)));
        assert_eq!(
            crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, owner, 1_000)).map(|(a, _)| a),
            Ok(Acquired::Refused(29_500))
        );
        assert_eq!(reentrant::unlock(&mut s, K, owner, 1_000, None), Ok(Reply::Nil));
        assert_eq!(reentrant::renew(&mut s, K, owner, 1_000), Ok(Reply::Int(0)));
        assert_eq!(fair::unlock(&mut s, K, owner, 1_000, None), Ok(Reply::Nil));
        assert_eq!(fair::renew(&mut s, K, owner, 1_000), Ok(Reply::Int(0)));
        assert_eq!(fair::acquire(&mut s, K, owner, 1_000, 5_000, IfRefused::NoQueue), Ok(Acquired::Refused(1)));
    }
    assert_eq!(reentrant::force_unlock(&mut s, K), Ok(Reply::Int(0)));
    assert_eq!(fair::force_unlock(&mut s, K), Ok(Reply::Int(0)));
    assert_eq!(snapshot(&s), before);
    assert!(s.take_published().is_empty());
}

#[test]
fn a_fair_acquire_on_a_read_write_lock_queues_as_behind_any_holder() {
    let mut s = store();
    rwlock::write_lock(&mut s, K, b"w", 30_000).unwrap();
    // The writer's own name re-enters nothing: it is queued like anyone else.
    assert_eq!(fair::acquire(&mut s, K, b"w", 1_000, 5_000, IfRefused::Queue), Ok(Acquired::Refused(30_000)));
    assert_eq!(s.list_strings("redisson_lock_queue:{m}"), ["w"]);
    assert_eq!(s.hash("m"), vec![("mode".into(), "write".into()), ("w:write".into(), "1".into())]);
    rwlock::unlock(&mut s, K, b"w", Side::Write, 1_000, None).unwrap();
    assert_eq!(fair::acquire(&mut s, K, b"w", 1_000, 5_000, IfRefused::Queue), Ok(Acquired::New));
}

fn queue(s: &mut MemoryStore, waiters: &[(&str, i64)]) {
    let list = waiters.iter().map(|(w, _)| w.as_bytes().to_vec()).collect();
    s.data.insert(names::fair_queue(K), (Value::List(list), None));
    let z = waiters.iter().map(|(w, d)| (w.as_bytes().to_vec(), *d as f64)).collect();
    s.data.insert(names::fair_timeouts(K), (Value::Zset(z), None));
}

#[test]
fn a_free_lock_with_a_live_fair_waiter_is_not_taken_past_it() {
    let mut s = store();
    queue(&mut s, &[("f1", NOW + 700), ("f2", NOW + 900)]);
    let before = snapshot(&s);
    assert_eq!(reentrant::acquire(&mut s, K, b"a", 1_000), Ok(Acquired::Refused(700)));
    assert_eq!(
        crate::core::lock::fencing::fenced(&mut s, K, |s| reentrant::acquire(s, K, b"a", 1_000)).map(|(a, _)| a),
        Ok(Acquired::Refused(700))
    );
    assert_eq!(rwlock::read_lock(&mut s, K, b"a", 1_000, Writers::None), Ok(Acquired::Refused(700)));
    assert_eq!(rwlock::write_lock(&mut s, K, b"a", 1_000), Ok(Acquired::Refused(700)));
    assert_eq!(snapshot(&s), before, "nothing written, the queue not purged");
    // The head's time passes: it is dead, the next one is first.
    s.advance(800);
    assert_eq!(reentrant::acquire(&mut s, K, b"a", 1_000), Ok(Acquired::Refused(100)));
    // Every waiter's time passes: the name is free for anyone.
    s.advance(100);
    assert_eq!(reentrant::acquire(&mut s, K, b"a", 1_000), Ok(Acquired::New));
}

#[test]
fn the_fair_queue_head_still_takes_its_free_lock() {
    let mut s = store();
    queue(&mut s, &[("f1", NOW + 700)]);
    assert_eq!(fair::acquire(&mut s, K, b"f1", 1_000, 5_000, IfRefused::Queue), Ok(Acquired::New));
    assert_eq!(reentrant::acquire(&mut s, K, b"f1", 1_000), Ok(Acquired::Reentered));
    assert_eq!(s.hash("m"), vec![("f1".into(), "2".into())]);
}

#[test]
fn a_parked_writer_makes_a_new_reader_wait_but_not_a_reentry() {
    let mut s = store();
    rwlock::read_lock(&mut s, K, b"r1", 30_000, Writers::None).unwrap();
    let before = snapshot(&s);
    assert_eq!(rwlock::read_lock(&mut s, K, b"r2", 30_000, Writers::Waiting), Ok(Acquired::Refused(30_000)));
    assert_eq!(snapshot(&s), before);
    assert_eq!(rwlock::read_lock(&mut s, K, b"r1", 30_000, Writers::Waiting), Ok(Acquired::Reentered));
    // No writer waits: readers share as Redisson's do.
    assert_eq!(rwlock::read_lock(&mut s, K, b"r2", 30_000, Writers::None), Ok(Acquired::New));
}

#[test]
fn the_write_holder_takes_read_holds_while_another_writer_waits() {
    let mut s = store();
    rwlock::write_lock(&mut s, K, b"w", 30_000).unwrap();
    assert_eq!(rwlock::read_lock(&mut s, K, b"w", 30_000, Writers::Waiting), Ok(Acquired::New));
    assert_eq!(rwlock::read_lock(&mut s, K, b"x", 30_000, Writers::Waiting), Ok(Acquired::Refused(30_000)));
}

#[test]
fn a_free_lock_is_read_locked_even_if_a_writer_waits_elsewhere_in_time() {
    // The server serves a parked writer before a new reader looks; if the lock is still free
    // (the writer could not take it), refusing the reader would only leave the lock idle.
    let mut s = store();
    assert_eq!(rwlock::read_lock(&mut s, K, b"r", 30_000, Writers::Waiting), Ok(Acquired::New));
}
