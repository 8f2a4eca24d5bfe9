//! Fencing tokens: `TOKEN` on `LOCK.ACQUIRE` (Redisson's RFencedLock), `RWLOCK.WLOCK` and
//! `FAIRLOCK.ACQUIRE`, one counter per lock name.

use crate::common;

use std::thread;
use std::time::Duration;

use common::*;

/// The first token of era 1: after the first reload or promotion (issue 35).
const ERA1: i64 = 1 << 32;

fn token_of(v: &Value) -> i64 {
    match v {
        Value::Array(a) if a.len() == 2 && a[0] == Value::Int(-1) => int(&a[1]),
        other => panic!("not a grant: {other:?}"),
    }
}

#[test]
fn tokens_strictly_increase_across_owners_reentry_block_and_restarts() {
    let s = Server::start();
    let mut c = s.conn();
    let mut seen = Vec::new();
    seen.push(token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"])));
    seen.push(token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"])));
    // Refused: [pttl, -1], and the counter does not move.
    let refused = ok(&mut c, &["LOCK.ACQUIRE", "k", "b", "30000", "TOKEN"]);
    assert!(matches!(&refused, Value::Array(a) if int(&a[0]) > 29_000 && a[1] == Value::Int(-1)), "{refused:?}");
    assert_eq!(ok(&mut c, &["GET", "redisson_lock_token:{k}"]), Value::BulkString(b"2".to_vec()));
    // A BLOCK grant is a grant too.
    let mut w = s.conn();
    let t = thread::spawn(move || ok(&mut w, &["LOCK.ACQUIRE", "k", "b", "30000", "TOKEN", "BLOCK", "5000"]));
    common::parked::wait_blocked(&mut c, 1);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "k"]);
    seen.push(token_of(&t.join().expect("thread")));
    ok(&mut c, &["LOCK.UNLOCK", "k", "b", "30000"]);
    // A reload is an event where grants may have been lost: the next era (issue 35).
    ok(&mut c, &["DEBUG", "RELOAD"]);
    seen.push(token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", "c", "30000", "TOKEN"])));
    assert_eq!(seen, vec![1, 2, 3, ERA1 + 1]);
    assert_eq!(pttl(&mut c, "redisson_lock_token:{k}"), -1, "the counter must never expire");
    // Without TOKEN the counter is untouched.
    ok(&mut c, &["LOCK.ACQUIRE", "other", "a", "30000"]);
    assert_eq!(ok(&mut c, &["EXISTS", "redisson_lock_token:{other}"]), Value::Int(0));
}

#[test]
fn a_promoted_replica_continues_the_token_sequence_in_the_next_era() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    for owner in ["a", "b", "c"] {
        token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", owner, "30000", "TOKEN"]));
        ok(&mut c, &["LOCK.FORCEUNLOCK", "k"]);
    }
    wait_replica(&mut c);
    drop(s);
    let mut rc = r.conn();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(token_of(&ok(&mut rc, &["LOCK.ACQUIRE", "k", "d", "30000", "TOKEN"])), ERA1 + 1);
}

#[test]
fn a_token_counter_of_another_type_is_an_error() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["HSET", "redisson_lock_token:{k}", "f", "v"]);
    let err = call(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"]).err();
    assert_eq!(err.as_deref(), Some("WRONGTYPE Operation against a key holding the wrong kind of value"));
    ok(&mut c, &["SET", "redisson_lock_token:{k}", "many"]);
    let err = call(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"]).err();
    assert_eq!(err.as_deref(), Some("ERR value is not an integer or out of range"));
    assert_eq!(keys(&mut c), vec!["redisson_lock_token:{k}".to_string()]);
}

/// The counter's value, read as a Redisson client would.
fn counter(c: &mut redis::Connection, key: &str) -> Value {
    ok(c, &["GET", &format!("redisson_lock_token:{{{key}}}")])
}

fn refusal(v: &Value) -> i64 {
    match v {
        Value::Array(a) if a.len() == 2 && a[1] == Value::Int(-1) => int(&a[0]),
        other => panic!("not a refusal: {other:?}"),
    }
}

#[test]
fn write_lock_tokens_count_every_grant_and_reach_the_replica_and_a_reload() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    let mut seen = vec![token_of(&ok(&mut c, &["RWLOCK.WLOCK", "rw", "w", "30000", "TOKEN"]))];
    seen.push(token_of(&ok(&mut c, &["RWLOCK.WLOCK", "rw", "w", "30000", "TOKEN"])));
    assert_eq!(hgetall(&mut c, "rw"), map(&[("mode", "write"), ("w:write", "2")]));
    // Refused: the plain form's PTTL, and the counter does not move.
    let ttl = refusal(&ok(&mut c, &["RWLOCK.WLOCK", "rw", "x", "30000", "TOKEN"]));
    assert!(ttl > 59_000, "reentry added its lease: {ttl}");
    assert_eq!(counter(&mut c, "rw"), Value::BulkString(b"2".to_vec()));
    // A BLOCK grant is a grant too, and options come in any order.
    let mut w = s.conn();
    let t = thread::spawn(move || ok(&mut w, &["RWLOCK.WLOCK", "rw", "x", "30000", "TOKEN", "BLOCK", "5000"]));
    common::parked::wait_blocked(&mut c, 1);
    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "rw", "WRITE"]);
    seen.push(token_of(&t.join().expect("thread")));
    assert_eq!(hgetall(&mut c, "rw"), map(&[("mode", "write"), ("x:write", "1")]));
    // Readers refuse a writer with the PTTL.
    ok(&mut c, &["RWLOCK.UNLOCK", "rw", "x", "WRITE", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r", "30000"]);
    assert!(refusal(&ok(&mut c, &["RWLOCK.WLOCK", "rw", "x", "30000", "BLOCK", "1", "TOKEN"])) > 29_000);
    assert_eq!(seen, vec![1, 2, 3]);
    wait_replica(&mut c);
    assert_eq!(counter(&mut r.conn(), "rw"), Value::BulkString(b"3".to_vec()));
    ok(&mut c, &["DEBUG", "RELOAD"]);
    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "rw", "READ"]);
    assert_eq!(token_of(&ok(&mut c, &["RWLOCK.WLOCK", "rw", "y", "30000", "TOKEN"])), ERA1 + 1);
    assert_eq!(pttl(&mut c, "redisson_lock_token:{rw}"), -1, "the counter must never expire");
}

#[test]
fn fair_lock_tokens_count_every_grant_and_refusals_keep_the_plain_reply() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    assert_eq!(token_of(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "5000", "TOKEN"])), 1);
    assert_eq!(token_of(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "5000", "TOKEN"])), 2);
    // NOQUEUE refuses with 1, a queued waiter with the base of its deadline; neither counts.
    assert_eq!(refusal(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "5000", "NOQUEUE", "TOKEN"])), 1);
    assert_eq!(ok(&mut c, &["EXISTS", "redisson_lock_queue:{f}"]), Value::Int(0), "NOQUEUE queues nothing");
    assert!(refusal(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "5000", "TOKEN"])) > 29_000);
    let queue: Vec<String> = redis::cmd("LRANGE").arg("redisson_lock_queue:{f}").arg(0).arg(-1).query(&mut c).unwrap();
    assert_eq!(queue, ["b"]);
    assert_eq!(counter(&mut c, "f"), Value::BulkString(b"2".to_vec()));
    // A parked waiter handed the lock by the holder's last unlock gets the next token.
    let mut w = s.conn();
    let t =
        thread::spawn(move || ok(&mut w, &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "5000", "BLOCK", "5000", "TOKEN"]));
    common::parked::wait_blocked(&mut c, 1);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "f", "a", "30000"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "f", "a", "30000"]), Value::Int(1));
    assert_eq!(token_of(&t.join().expect("thread")), 3);
    assert_eq!(hgetall(&mut c, "f"), map(&[("b", "1")]));
    assert_eq!(keys(&mut c), ["f", "redisson_lock_token:{f}"]);
    // A parked waiter that times out replies the refusal, and leaves the queue.
    let timed_out = ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "c", "30000", "5000", "BLOCK", "50", "TOKEN"]);
    assert!(refusal(&timed_out) >= 0, "{timed_out:?}");
    // It gives its place up from a 0 ms timer, right after its reply.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while keys(&mut c).len() > 2 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(keys(&mut c), ["f", "redisson_lock_token:{f}"]);
    wait_replica(&mut c);
    assert_eq!(counter(&mut r.conn(), "f"), Value::BulkString(b"3".to_vec()));
    ok(&mut c, &["DEBUG", "RELOAD"]);
    ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "f"]);
    assert_eq!(token_of(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "d", "30000", "5000", "TOKEN"])), ERA1 + 1);
}

#[test]
fn kinds_share_one_counter_and_a_read_lock_takes_no_token() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"])), 1);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "k"]);
    assert_eq!(token_of(&ok(&mut c, &["RWLOCK.WLOCK", "k", "a", "30000", "TOKEN"])), 2);
    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "k", "WRITE"]);
    assert_eq!(token_of(&ok(&mut c, &["FAIRLOCK.ACQUIRE", "k", "a", "30000", "5000", "TOKEN"])), 3);
    ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "k"]);
    let err = call(&mut c, &["RWLOCK.RLOCK", "k", "a", "30000", "TOKEN"]).err();
    assert_eq!(err.as_deref(), Some("ERR syntax error"));
    let err = call(&mut c, &["RWLOCK.WLOCK", "k", "a", "30000", "TOKEN", "TOKEN"]).err();
    assert_eq!(err.as_deref(), Some("ERR syntax error"));
    assert_eq!(keys(&mut c), ["redisson_lock_token:{k}"]);
    // A counter of another type fails every kind before any write.
    ok(&mut c, &["SET", "redisson_lock_token:{k}", "many"]);
    for cmd in
        [&["RWLOCK.WLOCK", "k", "a", "30000", "TOKEN"][..], &["FAIRLOCK.ACQUIRE", "k", "a", "30000", "5000", "TOKEN"]]
    {
        assert_eq!(call(&mut c, cmd).err().as_deref(), Some("ERR value is not an integer or out of range"));
    }
    assert_eq!(keys(&mut c), ["redisson_lock_token:{k}"]);
}
