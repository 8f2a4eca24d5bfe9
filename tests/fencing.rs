//! Fencing tokens: `LOCK.ACQUIRE ... TOKEN`, as Redisson's RFencedLock.

mod common;

use std::thread;
use std::time::Duration;

use common::*;

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
    thread::sleep(Duration::from_millis(100));
    ok(&mut c, &["LOCK.FORCEUNLOCK", "k"]);
    seen.push(token_of(&t.join().expect("thread")));
    ok(&mut c, &["LOCK.UNLOCK", "k", "b", "30000"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    seen.push(token_of(&ok(&mut c, &["LOCK.ACQUIRE", "k", "c", "30000", "TOKEN"])));
    assert_eq!(seen, vec![1, 2, 3, 4]);
    assert_eq!(pttl(&mut c, "redisson_lock_token:{k}"), -1, "the counter must never expire");
    // Without TOKEN the counter is untouched.
    ok(&mut c, &["LOCK.ACQUIRE", "other", "a", "30000"]);
    assert_eq!(ok(&mut c, &["EXISTS", "redisson_lock_token:{other}"]), Value::Int(0));
}

#[test]
fn a_promoted_replica_continues_the_token_sequence() {
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
    assert_eq!(token_of(&ok(&mut rc, &["LOCK.ACQUIRE", "k", "d", "30000", "TOKEN"])), 4);
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
