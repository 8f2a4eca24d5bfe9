//! `RWLOCK.RLOCK / RWLOCK.WLOCK ... BLOCK ms`: parked readers and writers served in arrival
//! order, readers together, a parked writer never overtaken by later parked readers.

use crate::common;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::parked::{blocked_clients, wait_blocked};
use common::*;

type Parked = thread::JoinHandle<(Result<Value, String>, Instant)>;

/// Runs `args` on a connection of its own; the handle returns the reply and when it came.
fn park(s: &Server, args: &[&str]) -> Parked {
    let mut c = s.conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        (call(&mut c, &a), Instant::now())
    })
}

fn park_writer(s: &Server, c: &mut redis::Connection, owner: &str) -> Parked {
    let n = blocked_clients(c);
    let p = park(s, &["RWLOCK.WLOCK", "doc", owner, "30000", "BLOCK", "5000"]);
    wait_blocked(c, n + 1);
    p
}

fn park_reader(s: &Server, c: &mut redis::Connection, owner: &str) -> Parked {
    let n = blocked_clients(c);
    let p = park(s, &["RWLOCK.RLOCK", "doc", owner, "30000", "BLOCK", "5000"]);
    wait_blocked(c, n + 1);
    p
}

fn granted(p: Parked) {
    assert_eq!(p.join().expect("parked client").0, Ok(Value::Nil));
}

fn wf(owner: &str) -> String {
    format!("{owner}:write")
}

#[test]
fn parked_writers_are_handed_the_lock_in_arrival_order() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    let waiters: Vec<Parked> = (0..5).map(|i| park_writer(&s, &mut c, &format!("w{i}"))).collect();
    let sub = s.subscriber();
    let mut holder = "w".to_string();
    for (i, p) in waiters.into_iter().enumerate() {
        assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", &holder, "WRITE", "30000"]), Value::Int(1));
        granted(p);
        holder = format!("w{i}");
        assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), (wf(&holder).as_str(), "1")]), "grant {i}");
        assert_near(pttl(&mut c, "doc"), 30_000, 100);
        wait_blocked(&mut c, 4 - i);
    }
    // Every write release still tells Redisson's own waiters.
    assert_eq!(sub.take_n(5, Duration::from_secs(2)), vec![("redisson_rwlock:{doc}".to_string(), "1".to_string()); 5]);
}

#[test]
fn parked_readers_are_granted_together_when_the_writer_releases() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    let readers: Vec<Parked> = (0..3).map(|i| park_reader(&s, &mut c, &format!("r{i}"))).collect();
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000"]), Value::Int(1));
    readers.into_iter().for_each(granted);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r0", "1"), ("r1", "1"), ("r2", "1")]));
    for r in ["r0", "r1", "r2"] {
        assert_near(pttl(&mut c, &names::read_timeout("doc", r, 1)), 30_000, 100);
    }
    wait_blocked(&mut c, 0);
}

/// Arrival order r1, w2, r2 behind a writer: r1 is served, w2 must wait for it, and r2 (which
/// could share with r1) waits behind w2 rather than starve it.
#[test]
fn a_parked_writer_is_not_overtaken_by_later_parked_readers() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w1", "30000"]);
    let r1 = park_reader(&s, &mut c, "r1");
    let w2 = park_writer(&s, &mut c, "w2");
    let r2 = park_reader(&s, &mut c, "r2");
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w1", "WRITE", "30000"]);
    granted(r1);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1", "1")]));
    wait_blocked(&mut c, 2);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "30000"]);
    granted(w2);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w2:write", "1")]));
    wait_blocked(&mut c, 1);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w2", "WRITE", "30000"]);
    granted(r2);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r2", "1")]));
}

#[test]
fn a_parked_writer_wakes_on_force_unlock_del_and_a_lua_release() {
    let s = Server::start();
    let mut c = s.conn();
    let releases: [&[&str]; 3] = [
        &["RWLOCK.FORCEUNLOCK", "doc", "READ"],
        &["DEL", "doc"],
        &["EVAL", "return redis.call('del', KEYS[1])", "1", "doc"],
    ];
    for (i, release) in releases.iter().enumerate() {
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "30000"]);
        let w = park_writer(&s, &mut c, &format!("w{i}"));
        ok(&mut c, release);
        granted(w);
        assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), (wf(&format!("w{i}")).as_str(), "1")]));
    }
}

/// A Redisson client's write unlock that downgrades (its owner keeps a read hold) deletes no
/// key: only hash events say the lock changed. The first parked client subscribes the module
/// to them, so this runs on a server where nothing was parked before.
#[test]
fn a_parked_reader_wakes_when_a_lua_write_unlock_downgrades_to_read() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "w", "30000"]);
    let r = park_reader(&s, &mut c, "r2");
    let downgrade = "redis.call('hdel', KEYS[1], ARGV[1]); redis.call('hset', KEYS[1], 'mode', 'read'); return 1";
    ok(&mut c, &["EVAL", downgrade, "1", "doc", &wf("w")]);
    granted(r);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("w", "1"), ("r2", "1")]));
}

#[test]
fn a_parked_reader_wakes_within_a_few_ms_of_the_write_lease_expiring() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "300"]);
    let deadline = pexpiretime(&mut c, "doc");
    let r = park_reader(&s, &mut c, "r");
    let (reply, _) = r.join().expect("reader");
    assert_eq!(reply, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r", "1")]));
    // The read hold's own key carries exactly the lease from the grant.
    let late = grant_delay(&mut c, &common::names::read_timeout("doc", "r", 1), 30_000, deadline);
    assert!(late < 100, "granted {late} ms after the deadline");
}

#[test]
fn a_timed_out_writer_gets_the_ttl_and_leaves_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "30000"]);
    let reply = ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000", "BLOCK", "100"]);
    assert_near(int(&reply), 29_900, 1_000);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r", "1")]));
    wait_blocked(&mut c, 0);
}

/// 32 writers, 200 critical sections each, a counter only the lock protects.
#[test]
fn thirty_two_blocking_writers_never_overlap() {
    let s = Server::start();
    let inside = Arc::new(AtomicI64::new(0));
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let mut c = s.conn();
            let inside = inside.clone();
            thread::spawn(move || {
                let owner = format!("client-{i}");
                for _ in 0..200 {
                    let r = ok(&mut c, &["RWLOCK.WLOCK", "doc", &owner, "10000", "BLOCK", "10000"]);
                    assert_eq!(r, Value::Nil);
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two writers at once");
                    let v: i64 =
                        redis::cmd("GET").arg("counter").query::<Option<i64>>(&mut c).expect("GET").unwrap_or(0);
                    let _: () = redis::cmd("SET").arg("counter").arg(v + 1).query(&mut c).expect("SET");
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", &owner, "WRITE", "10000"]), Value::Int(1));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("client thread"));
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["GET", "counter"]), Value::BulkString(b"6400".to_vec()));
    wait_blocked(&mut c, 0);
}

/// Readers and writers mixed: a writer is never inside with anyone, readers may share.
#[test]
fn blocking_readers_and_writers_exclude_each_other() {
    let s = Server::start();
    // Bit 16 and up count writers inside, the low bits readers.
    let inside = Arc::new(AtomicI64::new(0));
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let mut c = s.conn();
            let inside = inside.clone();
            thread::spawn(move || {
                let (writer, owner) = (i % 2 == 0, format!("client-{i}"));
                let (cmd, side, me) =
                    if writer { ("RWLOCK.WLOCK", "WRITE", 1 << 16) } else { ("RWLOCK.RLOCK", "READ", 1) };
                for _ in 0..100 {
                    assert_eq!(ok(&mut c, &[cmd, "doc", &owner, "10000", "BLOCK", "10000"]), Value::Nil);
                    let before = inside.fetch_add(me, Ordering::SeqCst);
                    assert!(before >> 16 == 0 && (!writer || before == 0), "{owner} entered beside {before:#x}");
                    ok(&mut c, &["PING"]);
                    inside.fetch_sub(me, Ordering::SeqCst);
                    // 0: other readers still hold it.
                    let released = int(&ok(&mut c, &["RWLOCK.UNLOCK", "doc", &owner, side, "10000"]));
                    assert!(released == 1 || (!writer && released == 0), "{owner} unlock replied {released}");
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("client thread"));
    let mut c = s.conn();
    wait_blocked(&mut c, 0);
    assert_eq!(keys(&mut c), Vec::<String>::new());
}

/// Readers granted on wake-up reach the replica with the same absolute expiries, timeout keys
/// included.
#[test]
fn grants_on_wake_up_reach_the_replica() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    let readers: Vec<Parked> = (0..2).map(|i| park_reader(&s, &mut c, &format!("r{i}"))).collect();
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000"]);
    readers.into_iter().for_each(granted);
    wait_replica(&mut c);
    assert_eq!(hgetall(&mut rc, "doc"), hgetall(&mut c, "doc"));
    assert_eq!(keys(&mut rc), keys(&mut c));
    for k in keys(&mut c) {
        let at = |c: &mut redis::Connection| int(&ok(c, &["PEXPIRETIME", &k]));
        assert_eq!(at(&mut rc), at(&mut c), "absolute expiry of {k}");
    }
}
