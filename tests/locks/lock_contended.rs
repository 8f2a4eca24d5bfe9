//! `LOCK.CONTENDED` (issue 37): who waits on what, while clients park and leave (grant,
//! timeout, disconnect), for every kind, across databases, under the caller's ACL, in a script
//! and on a replica. It reads only: the keyspace is the same before and after every call.

use crate::common;

use std::thread;
use std::time::Duration;

use common::acl::{conn_as, snapshot, user};
use common::contended::{contended, names, parse, Contended};
use common::parked::{spawn_call, wait_blocked};
use common::*;

/// `LOCK.CONTENDED args`, checked to have written nothing.
fn look(c: &mut redis::Connection, args: &[&str]) -> Vec<Contended> {
    let before = snapshot(c);
    let got = contended(c, args);
    assert_eq!(snapshot(c), before, "LOCK.CONTENDED {args:?} changed the keyspace");
    got
}

fn named<'a>(list: &'a [Contended], name: &str) -> &'a Contended {
    list.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name} not in {list:?}"))
}

#[test]
fn names_are_listed_worst_first_and_follow_their_clients_as_they_park_and_leave() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(look(&mut c, &[]), [], "nobody parked: an empty list");
    ok(&mut c, &["LOCK.ACQUIRE", "b", "hb", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "a", "ha", "30000"]);
    let b1 = spawn_call(&s, &["LOCK.ACQUIRE", "b", "wb1", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    thread::sleep(Duration::from_millis(30));
    let a1 = spawn_call(&s, &["LOCK.ACQUIRE", "a", "wa1", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 2);
    let mut a2c = s.conn();
    let a2_id = int(&ok(&mut a2c, &["CLIENT", "ID"])).to_string();
    let a2 = thread::spawn(move || call(&mut a2c, &["LOCK.ACQUIRE", "a", "wa2", "30000", "BLOCK", "0"]));
    wait_blocked(&mut c, 3);
    thread::sleep(Duration::from_millis(20));

    let all = look(&mut c, &[]);
    assert_eq!(names(&all), ["b", "a"], "by longest wait: b's waiter parked first");
    assert_eq!(names(&look(&mut c, &["BY", "WAITERS"])), ["a", "b"], "by waiters: a has two");
    assert_eq!(names(&look(&mut c, &["count", "1", "by", "waiters"])), ["a"]);
    let a = named(&all, "a");
    assert_eq!((a.db, a.kind.as_str(), a.waiters, a.holders_total), (0, "reentrant", 2, 1));
    assert_eq!(a.holders, [("ha".to_string(), None, 1)]);
    assert!(a.oldest_wait_ms >= 20, "{a:?}");
    let held = a.held_ms.expect("the module granted it: its age is known");
    assert!(held >= a.oldest_wait_ms, "held before anyone waited: {a:?}");
    assert!(a.pttl > 0 && a.pttl <= 30_000, "{a:?}");
    assert!(named(&all, "b").oldest_wait_ms > a.oldest_wait_ms);

    // A grant: the first waiter holds it now, the second still waits.
    ok(&mut c, &["LOCK.UNLOCK", "a", "ha", "30000"]);
    assert_eq!(a1.join().expect("thread"), Ok(Value::Nil));
    thread::sleep(Duration::from_millis(20));
    let a = look(&mut c, &[]).into_iter().find(|c| c.name == "a").expect("a still has a waiter");
    assert_eq!((a.waiters, a.holders.clone()), (1, vec![("wa1".to_string(), None, 1)]));
    assert!(a.held_ms.expect("granted by the module") < a.oldest_wait_ms, "a new hold, after wa2 parked: {a:?}");
    assert_eq!(hgetall(&mut c, "a"), map(&[("wa1", "1")]));

    // A disconnect: nobody waits on a any more.
    ok(&mut c, &["CLIENT", "KILL", "ID", &a2_id]);
    assert!(a2.join().expect("thread").is_err());
    wait_blocked(&mut c, 1);
    assert_eq!(names(&look(&mut c, &[])), ["b"]);

    // A timeout on b, then a grant of b: nothing is left.
    let b2 = spawn_call(&s, &["LOCK.ACQUIRE", "b", "wb2", "30000", "BLOCK", "50"]);
    assert!(matches!(b2.join().expect("thread"), Ok(Value::Int(_))), "timed out with the TTL");
    assert_eq!(named(&look(&mut c, &[]), "b").waiters, 1);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "b"]);
    assert_eq!(b1.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(look(&mut c, &[]), []);
    assert_eq!(hgetall(&mut c, "b"), map(&[("wb1", "1")]));
}

#[test]
fn every_kind_shows_its_holders_and_names_in_other_databases_are_read_there() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r2", "30000"]);
    let w = spawn_call(&s, &["RWLOCK.WLOCK", "rw", "w", "30000", "BLOCK", "0"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "fair", "f1", "30000", "5000"]);
    let f = spawn_call(&s, &["FAIRLOCK.ACQUIRE", "fair", "f2", "30000", "5000", "BLOCK", "0"]);
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "sem", "0"]);
    let sem = spawn_call(&s, &["SEMAPHORE.ACQUIRE", "sem", "1", "BLOCK", "0"]);
    let mut d1 = s.conn();
    ok(&mut d1, &["SELECT", "1"]);
    ok(&mut d1, &["LOCK.ACQUIRE", "rw", "other-db", "30000"]);
    let mut d1w = s.conn();
    ok(&mut d1w, &["SELECT", "1"]);
    let other = thread::spawn(move || call(&mut d1w, &["LOCK.ACQUIRE", "rw", "x", "30000", "BLOCK", "0"]));
    wait_blocked(&mut c, 4);

    let all = look(&mut c, &["BY", "WAITERS"]);
    assert_eq!(all.len(), 4, "{all:?}");
    let rw = all.iter().find(|e| e.name == "rw" && e.db == 0).expect("rw in db 0");
    assert_eq!((rw.kind.as_str(), rw.holders_total), ("read-write", 2));
    let mut readers = rw.holders.clone();
    readers.sort();
    assert_eq!(readers, [("r1".into(), Some("read".into()), 1), ("r2".into(), Some("read".into()), 1)]);
    let rw1 = all.iter().find(|e| e.name == "rw" && e.db == 1).expect("rw in db 1");
    assert_eq!((rw1.kind.as_str(), rw1.holders.clone()), ("reentrant", vec![("other-db".to_string(), None, 1)]));
    let fair = named(&all, "fair");
    assert_eq!((fair.kind.as_str(), fair.holders.clone()), ("fair", vec![("f1".to_string(), None, 1)]));
    let s_ = named(&all, "sem");
    assert_eq!((s_.kind.as_str(), s_.holders_total, s_.held_ms), ("semaphore", 0, None));
    assert_eq!(s_.holders, []);
    // The caller's database is selected again after.
    assert_eq!(ok(&mut c, &["EXISTS", "fair"]), Value::Int(1));

    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "rw", "READ"]);
    ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "fair"]);
    ok(&mut c, &["SEMAPHORE.RELEASE", "sem", "1"]);
    ok(&mut d1, &["LOCK.FORCEUNLOCK", "rw"]);
    for t in [w, f, sem] {
        assert!(t.join().expect("thread").is_ok());
    }
    assert!(other.join().expect("thread").is_ok());
    assert_eq!(look(&mut c, &[]), []);
}

#[test]
fn options_are_checked_before_anything_is_read() {
    let s = Server::start();
    let mut c = s.conn();
    let cases: &[(&[&str], &str)] = &[
        (&["COUNT", "0"], "ERR COUNT must be a positive integer"),
        (&["COUNT", "-3"], "ERR COUNT must be a positive integer"),
        (&["COUNT", "x"], "ERR value is not an integer or out of range"),
        (&["COUNT"], "ERR syntax error"),
        (&["BY", "LONGEST"], "ERR syntax error"),
        (&["COUNT", "1", "COUNT", "2"], "ERR syntax error"),
        (&["BY", "WAIT", "BY", "WAIT"], "ERR syntax error"),
        (&["LIMIT", "1"], "ERR syntax error"),
    ];
    for (args, want) in cases {
        let mut cmd = vec!["LOCK.CONTENDED"];
        cmd.extend(*args);
        assert_eq!(call(&mut c, &cmd), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(look(&mut c, &["COUNT", "9223372036854775807", "BY", "WAIT"]), [], "any positive COUNT");
}

#[test]
fn a_user_sees_only_the_names_it_may_read_and_nothing_is_logged_for_the_others() {
    let s = Server::start();
    let mut admin = s.conn();
    for name in ["app:1", "other:1"] {
        ok(&mut admin, &["LOCK.ACQUIRE", name, "holder", "30000"]);
    }
    let t1 = spawn_call(&s, &["LOCK.ACQUIRE", "app:1", "w", "30000", "BLOCK", "0"]);
    let t2 = spawn_call(&s, &["LOCK.ACQUIRE", "other:1", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 2);
    user(&mut admin, "mon", &["+lock.contended", "%R~app:*"]);
    user(&mut admin, "writer", &["+lock.contended", "%W~*"]);
    user(&mut admin, "nocmd", &["+info", "~*"]);
    ok(&mut admin, &["ACL", "LOG", "RESET"]);

    assert_eq!(names(&contended(&mut conn_as(&s, "mon"), &[])), ["app:1"]);
    assert_eq!(contended(&mut conn_as(&s, "writer"), &[]), [], "writing is not reading");
    assert_eq!(names(&contended(&mut admin, &["BY", "WAITERS"])).len(), 2);
    assert_eq!(list_len(&ok(&mut admin, &["ACL", "LOG"])), 0, "a name left out is no denial");
    let err = call(&mut conn_as(&s, "nocmd"), &["LOCK.CONTENDED"]).expect_err("not allowed");
    assert!(err.starts_with("NOPERM"), "{err}");

    ok(&mut admin, &["LOCK.FORCEUNLOCK", "app:1"]);
    ok(&mut admin, &["LOCK.FORCEUNLOCK", "other:1"]);
    assert!(t1.join().expect("thread").is_ok() && t2.join().expect("thread").is_ok());
}

fn list_len(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        other => panic!("expected an array, got {other:?}"),
    }
}

#[test]
fn it_answers_in_resp3_inside_a_script_and_on_a_replica() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let t = spawn_call(&s, &["LOCK.ACQUIRE", "k", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let resp3 = ok(&mut s.conn3(), &["LOCK.CONTENDED"]);
    assert!(matches!(&common::contended::list(&resp3)[0], Value::Map(_)), "{resp3:?}");
    assert_eq!(names(&parse(&resp3)), ["k"]);
    let scripted = ok(&mut c, &["EVAL", "return redis.call('LOCK.CONTENDED', 'COUNT', '5')", "0"]);
    assert_eq!(names(&parse(&scripted)), ["k"]);
    wait_replica(&mut c);
    let mut rc = r.conn();
    assert_eq!(hgetall(&mut rc, "k"), map(&[("h", "1")]), "the replica has the lock");
    assert_eq!(contended(&mut rc, &[]), [], "nobody parks on a replica");
    ok(&mut c, &["LOCK.UNLOCK", "k", "h", "30000"]);
    assert_eq!(t.join().expect("thread"), Ok(Value::Nil));
}
