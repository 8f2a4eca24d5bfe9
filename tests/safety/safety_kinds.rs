//! One name, one kind; writers are not starved. Reproductions from issue 16, each with the
//! keyspace checked: a command of one kind on a name held as another is refused (the PTTL, as
//! for any held lock) and writes nothing; a free name with a live fair waiter is not taken past
//! it; a reader arriving after a parked writer waits behind it, unless it re-enters.

use crate::common;

use std::thread;

use common::parked::wait_blocked;
use common::*;

type Waiter = thread::JoinHandle<Result<Value, String>>;

/// Runs `args` on a connection of its own and waits until the server counts it blocked.
fn park(s: &Server, c: &mut redis::Connection, blocked: usize, args: &[&str]) -> Waiter {
    let mut w = s.conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let h = thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        call(&mut w, &a)
    });
    wait_blocked(c, blocked);
    h
}

fn refused_with_ttl(v: Result<Value, String>, near: i64) {
    match v {
        Ok(Value::Int(t)) => assert_near(t, near, 1_000),
        other => panic!("expected a refusal with the PTTL, got {other:?}"),
    }
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).expect("EXISTS") == 1
}

#[test]
fn a_write_lock_on_a_reentrant_lock_is_refused_so_there_are_never_two_exclusive_holders() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "m", "a", "30000"]), Value::Nil);
    refused_with_ttl(call(&mut c, &["RWLOCK.WLOCK", "m", "b", "30000"]), 30_000);
    refused_with_ttl(call(&mut c, &["RWLOCK.RLOCK", "m", "b", "30000"]), 30_000);
    refused_with_ttl(call(&mut c, &["RWLOCK.WLOCK", "m", "a", "30000"]), 30_000);
    assert_eq!(ok(&mut c, &["RWLOCK.RENEW", "m", "a", "90000"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["RWLOCK.FORCEUNLOCK", "m", "WRITE"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "m"), map(&[("a", "1")]));
    assert_near(pttl(&mut c, "m"), 30_000, 1_000);
    assert_eq!(keys(&mut c), ["m"], "no read-hold key, no second lock");
}

#[test]
fn a_parked_writer_waits_for_a_reentrant_lock_and_gets_it_on_release() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "m", "a", "30000"]);
    let w = park(&s, &mut c, 1, &["RWLOCK.WLOCK", "m", "b", "30000", "BLOCK", "5000"]);
    assert_eq!(hgetall(&mut c, "m"), map(&[("a", "1")]));
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "m", "a", "30000"]), Value::Int(1));
    assert_eq!(w.join().expect("writer"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "m"), map(&[("mode", "write"), ("b:write", "1")]));
}

#[test]
fn reentrant_and_fair_commands_leave_a_read_write_lock_alone_even_to_its_reader() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "y", "r1", "30000"]);
    let before = (hgetall(&mut c, "y"), keys(&mut c));
    refused_with_ttl(call(&mut c, &["LOCK.ACQUIRE", "y", "r1", "30000"]), 30_000);
    refused_with_ttl(call(&mut c, &["LOCK.ACQUIRE", "y", "mode", "30000"]), 30_000);
    let fenced = ok(&mut c, &["LOCK.ACQUIRE", "y", "r1", "30000", "TOKEN"]);
    assert!(matches!(&fenced, Value::Array(v) if v.get(1) == Some(&Value::Int(-1))), "{fenced:?}");
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "y", "r1", "30000"]), Value::Nil);
    assert_eq!(ok(&mut c, &["LOCK.RENEW", "y", "r1", "90000"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["LOCK.FORCEUNLOCK", "y"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "y", "r1", "30000"]), Value::Nil);
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", "y", "r1", "90000"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "y"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "y", "r1", "30000", "5000", "NOQUEUE"]), Value::Int(1));
    assert_eq!((hgetall(&mut c, "y"), keys(&mut c)), before);
    assert_near(pttl(&mut c, "y"), 30_000, 1_000);
    // Queued as behind any holder, not re-entered: the hash still counts one read hold.
    refused_with_ttl(call(&mut c, &["FAIRLOCK.ACQUIRE", "y", "r1", "30000", "5000"]), 30_000);
    assert_eq!(hgetall(&mut c, "y"), map(&[("mode", "read"), ("r1", "1")]));
    let queue: Vec<String> = redis::cmd("LRANGE").arg(names::fair_queue("y")).arg(0).arg(-1).query(&mut c).expect("q");
    assert_eq!(queue, ["r1"]);
}

#[test]
fn a_reentrant_acquire_does_not_jump_a_fair_queue_and_waits_its_turn_with_block() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "z", "h", "30000", "60000"]);
    refused_with_ttl(call(&mut c, &["FAIRLOCK.ACQUIRE", "z", "w", "30000", "60000"]), 30_000);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "z", "h", "30000"]), Value::Int(1));
    // Free, but w is first in line (its deadline is 90 s away).
    let (q, zs) = (names::fair_queue("z"), names::fair_timeouts("z"));
    let queue_before: (Vec<String>, Vec<String>) = (
        redis::cmd("LRANGE").arg(&q).arg(0).arg(-1).query(&mut c).expect("LRANGE"),
        redis::cmd("ZRANGE").arg(&zs).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("ZRANGE"),
    );
    for args in [
        vec!["LOCK.ACQUIRE", "z", "x", "30000"],
        vec!["RWLOCK.WLOCK", "z", "x", "30000"],
        vec!["RWLOCK.RLOCK", "z", "x", "30000"],
    ] {
        refused_with_ttl(call(&mut c, &args), 90_000);
    }
    let fenced = ok(&mut c, &["LOCK.ACQUIRE", "z", "x", "30000", "TOKEN"]);
    assert!(matches!(&fenced, Value::Array(v) if v.get(1) == Some(&Value::Int(-1))), "{fenced:?}");
    assert!(!exists(&mut c, "z"));
    assert!(!exists(&mut c, &names::token("z")));
    let queue_after: (Vec<String>, Vec<String>) = (
        redis::cmd("LRANGE").arg(&q).arg(0).arg(-1).query(&mut c).expect("LRANGE"),
        redis::cmd("ZRANGE").arg(&zs).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("ZRANGE"),
    );
    assert_eq!(queue_after, queue_before);
    // A BLOCK acquire parks; the fair waiter takes its turn; its release hands the lock over.
    let x = park(&s, &mut c, 1, &["LOCK.ACQUIRE", "z", "x", "30000", "BLOCK", "5000"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "z", "w", "30000", "60000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "z"), map(&[("w", "1")]));
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "z", "w", "30000"]), Value::Int(1));
    assert_eq!(x.join().expect("x"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "z"), map(&[("x", "1")]));
}

#[test]
fn a_parked_reentrant_acquire_gets_a_free_lock_once_the_fair_waiters_deadline_passes() {
    let s = Server::start();
    let mut c = s.conn();
    // A Redisson waiter that stopped retrying: queued with a deadline 300 ms away.
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "z", "h", "100", "200"]);
    refused_with_ttl(call(&mut c, &["FAIRLOCK.ACQUIRE", "z", "gone", "30000", "200"]), 100);
    let x = park(&s, &mut c, 1, &["LOCK.ACQUIRE", "z", "x", "30000", "BLOCK", "5000"]);
    assert_eq!(x.join().expect("x"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "z"), map(&[("x", "1")]));
}

#[test]
fn a_fair_waiter_parked_behind_a_reentrant_waiter_is_still_served_first_in_line() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "z", "h", "30000", "60000"]);
    let x = park(&s, &mut c, 1, &["LOCK.ACQUIRE", "z", "x", "30000", "BLOCK", "5000"]);
    let f = park(&s, &mut c, 2, &["FAIRLOCK.ACQUIRE", "z", "f", "30000", "60000", "BLOCK", "5000"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "z", "h", "30000"]), Value::Int(1));
    assert_eq!(f.join().expect("f"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "z"), map(&[("f", "1")]));
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "z", "f", "30000"]), Value::Int(1));
    assert_eq!(x.join().expect("x"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "z"), map(&[("x", "1")]));
}

#[test]
fn a_reader_arriving_after_a_parked_writer_waits_unless_it_re_enters() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "30000"]);
    let w = park(&s, &mut c, 1, &["RWLOCK.WLOCK", "doc", "w", "30000", "BLOCK", "10000"]);
    // A new reader is refused with the PTTL and writes nothing.
    refused_with_ttl(call(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "30000"]), 30_000);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1", "1")]));
    assert!(!exists(&mut c, &names::read_timeout("doc", "r2", 1)));
    // r1 re-enters: refusing it would deadlock with the writer.
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "30000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1", "2")]));
    // A new reader with BLOCK parks behind the writer.
    let r2 = park(&s, &mut c, 2, &["RWLOCK.RLOCK", "doc", "r2", "30000", "BLOCK", "10000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "30000"]), Value::Int(1));
    assert_eq!(w.join().expect("writer"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w:write", "1")]));
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000"]), Value::Int(1));
    assert_eq!(r2.join().expect("r2"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r2", "1")]));
}

#[test]
fn the_write_holder_takes_a_read_hold_while_another_writer_is_parked() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    let w2 = park(&s, &mut c, 1, &["RWLOCK.WLOCK", "doc", "w2", "30000", "BLOCK", "10000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "doc", "w", "30000"]), Value::Nil);
    refused_with_ttl(call(&mut c, &["RWLOCK.RLOCK", "doc", "x", "30000"]), 30_000);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w", "1"), ("w:write", "1")]));
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "READ", "30000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000"]);
    assert_eq!(w2.join().expect("w2"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w2:write", "1")]));
}

#[test]
fn a_parked_writer_takes_a_lock_whose_lease_just_ran_out_before_a_new_reader() {
    let s = Server::start();
    let mut c = s.conn();
    // Long enough for the writer to park first on a loaded machine (it must wait for the lease).
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "1500"]);
    let w = park(&s, &mut c, 1, &["RWLOCK.WLOCK", "doc", "w", "30000", "BLOCK", "10000"]);
    // Whenever the reader comes, before or after the lease ends, the writer goes first: the
    // reader is refused (a TTL) and never in the hash. (Not "the key exists" after the
    // refusal: the lease can run out between the refusal and that read, before the writer's
    // grant, and the key is then briefly gone.)
    for _ in 0..500 {
        match call(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "30000"]) {
            Ok(Value::Int(_)) if !hgetall(&mut c, "doc").contains_key("r2") => {}
            other => panic!("a new reader got {other:?} while a writer was parked"),
        }
        if hgetall(&mut c, "doc").contains_key("w:write") {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(w.join().expect("writer"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w:write", "1")]));
}
