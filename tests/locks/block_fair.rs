//! `FAIRLOCK.ACQUIRE ... BLOCK ms`: parked waiters hold their place in the Redisson queue,
//! are served in its order, stay alive past their `wait`, and leave it when they give up.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::parked::{blocked_clients, lockmod_stat, parked_beside, until_parked_beside, wait_blocked};
use common::*;

const Q: &str = "redisson_lock_queue:{doc}";
const Z: &str = "redisson_lock_timeout:{doc}";

type Parked = thread::JoinHandle<(Result<Value, String>, Instant)>;

fn queue(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE").arg(Q).arg(0).arg(-1).query(c).expect("LRANGE")
}

/// Parks `owner` (lease 30 s, the given wait and BLOCK) on its own connection.
fn park(s: &Server, c: &mut redis::Connection, owner: &str, wait: &str, block: &str) -> Parked {
    let n = blocked_clients(c);
    let p = send(s, owner, wait, block);
    wait_blocked(c, n + 1);
    p
}

/// Sends `owner`'s `FAIRLOCK.ACQUIRE ... BLOCK` on its own connection, not waiting for it to
/// park (a short BLOCK may run out before a poll sees it parked).
fn send(s: &Server, owner: &str, wait: &str, block: &str) -> Parked {
    let mut pc = s.conn();
    let args: Vec<String> =
        ["FAIRLOCK.ACQUIRE", "doc", owner, "30000", wait, "BLOCK", block].iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        (call(&mut pc, &a), Instant::now())
    })
}

fn granted(p: Parked) -> Instant {
    let (reply, at) = p.join().expect("parked client");
    assert_eq!(reply, Ok(Value::Nil));
    at
}

#[test]
fn parked_waiters_queue_visibly_and_are_handed_the_lock_in_order() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
    let waiters: Vec<Parked> = (0..5).map(|i| park(&s, &mut c, &format!("w{i}"), "60000", "5000")).collect();
    assert_eq!(queue(&mut c), ["w0", "w1", "w2", "w3", "w4"], "a Redisson client sees them queued");
    let mut holder = "holder".to_string();
    for (i, p) in waiters.into_iter().enumerate() {
        assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", &holder, "30000"]), Value::Int(1));
        granted(p);
        holder = format!("w{i}");
        assert_eq!(hgetall(&mut c, "doc"), map(&[(holder.as_str(), "1")]), "grant {i}");
        assert_eq!(queue(&mut c).len(), 4 - i);
    }
    assert_eq!(keys(&mut c), ["doc"]);
}

#[test]
fn a_parked_waiter_wakes_on_force_unlock_del_and_lease_expiry() {
    let s = Server::start();
    let mut c = s.conn();
    for (i, release) in [&["FAIRLOCK.FORCEUNLOCK", "doc"][..], &["DEL", "doc"]].iter().enumerate() {
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
        let p = park(&s, &mut c, &format!("w{i}"), "60000", "5000");
        ok(&mut c, release);
        granted(p);
    }
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "300", "60000"]);
    let deadline = pexpiretime(&mut c, "doc");
    let p = park(&s, &mut c, "late", "60000", "5000");
    granted(p);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("late", "1")]));
    let late = grant_delay(&mut c, "doc", 30_000, deadline);
    assert!(late < 100, "granted {late} ms after the lease ran out");
}

#[test]
fn a_timed_out_waiter_gets_the_ttl_and_leaves_the_queue_as_cancel_does() {
    // a's BLOCK (150 ms) must outlast parking b behind it: where a stalled test thread let it
    // run out first, the case starts again on a fresh server.
    let (_s, mut c, a, b, before) = until_parked_beside(|| {
        let s = Server::start();
        let mut c = s.conn();
        ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
        let before = pttl(&mut c, "doc");
        let a = send(&s, "a", "60000", "150");
        if !parked_beside(&mut c, 1, &a) {
            return None;
        }
        let b = send(&s, "b", "60000", "0");
        parked_beside(&mut c, 2, &a).then_some((s, c, a, b, before))
    });
    // The lock's TTL when a's BLOCK ran out: 150 ms or more after `before` was read (1 ms for
    // the whole ms of the two clocks read).
    let (reply, _) = a.join().expect("a");
    let ttl = int(&reply.expect("reply"));
    let after = pttl(&mut c, "doc");
    assert!(after <= ttl && ttl <= before - 149, "{before} {ttl} {after}");
    wait_blocked(&mut c, 1);
    // a left; b moved up by a's wait, to a's deadline (the lease end plus a's wait).
    assert_eq!(queue(&mut c), ["b"]);
    let z: Vec<(String, i64)> =
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("ZRANGE");
    assert_eq!(z, [("b".to_string(), pexpiretime(&mut c, "doc") + 60_000)]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "30000"]);
    granted(b);
}

/// Regression: the cancel ran from a timer after the timeout reply was sent, so a client that
/// read the queue right after its timeout could still find itself in it.
#[test]
fn a_timed_out_waiters_place_is_gone_when_its_reply_arrives() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
    for i in 1..=5 {
        // Not polled for as parked (its 50 ms may run out before a poll): the counters say it
        // parked and timed out.
        let (reply, _) = send(&s, "a", "60000", "50").join().expect("a");
        assert!(matches!(reply, Ok(Value::Int(ttl)) if ttl > 0), "{reply:?}");
        assert_eq!((lockmod_stat(&mut c, "blocked_total"), lockmod_stat(&mut c, "block_timeouts")), (i, i));
        // No wait: the place was cancelled before the reply left the server.
        assert_eq!(queue(&mut c), Vec::<String>::new());
        let z: i64 = redis::cmd("ZCARD").arg(Z).query(&mut c).expect("ZCARD");
        assert_eq!(z, 0);
    }
}

#[test]
fn a_waiter_parked_longer_than_its_wait_keeps_its_place() {
    let s = Server::start();
    let mut c = s.conn();
    // A short lease kept alive by renewals, as Redisson's watchdog does: the waiters'
    // deadlines (the lease left + their wait) pass long before the lock is released.
    // (The lease outlasts parking two clients on a loaded machine.)
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "1500", "50"]);
    let first = park(&s, &mut c, "first", "50", "5000");
    let second = park(&s, &mut c, "second", "50", "5000");
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", "doc", "holder", "30000"]), Value::Int(1));
    // Past the deadlines the waiters were given (by the server's clock), and then some.
    let z: Vec<(String, f64)> =
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("ZRANGE");
    let due = z.iter().map(|(_, s)| *s as i64).max().expect("deadlines");
    thread::sleep(Duration::from_millis((due + 300 - common::diff::now_ms()).max(0) as u64));
    let reply = ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "redisson", "30000", "50"]);
    assert!(int(&reply) > 0, "queued behind live waiters: {reply:?}");
    assert_eq!(queue(&mut c), ["first", "second", "redisson"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "30000"]);
    granted(first);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "first", "30000"]);
    granted(second);
}

#[test]
fn killed_or_dropped_parked_waiters_leave_no_queue_entry() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
    let mut killed = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut killed).expect("CLIENT ID");
    let k = thread::spawn(move || {
        call(&mut killed, &["FAIRLOCK.ACQUIRE", "doc", "killed", "30000", "60000", "BLOCK", "0"])
    });
    wait_blocked(&mut c, 1);
    {
        use std::io::Write;
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        raw.write_all(b"FAIRLOCK.ACQUIRE doc dropped 30000 60000 BLOCK 0\r\n").expect("write");
        wait_blocked(&mut c, 2);
        assert_eq!(queue(&mut c), ["killed", "dropped"]);
    } // socket closed here
    ok(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert!(k.join().expect("thread").is_err());
    wait_blocked(&mut c, 0);
    let deadline = Instant::now() + Duration::from_secs(2);
    while keys(&mut c).len() > 1 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(keys(&mut c), ["doc"], "queue and deadlines gone with the waiters");
}

/// 32 clients, 200 critical sections each, a counter only the lock protects.
#[test]
fn thirty_two_blocking_fair_clients_never_overlap() {
    let s = Server::start();
    let inside = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let mut c = s.conn();
            let inside = inside.clone();
            thread::spawn(move || {
                let owner = format!("client-{i}");
                for _ in 0..200 {
                    let r = ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", &owner, "10000", "5000", "BLOCK", "20000"]);
                    assert_eq!(r, Value::Nil);
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    let v: i64 =
                        redis::cmd("GET").arg("counter").query::<Option<i64>>(&mut c).expect("GET").unwrap_or(0);
                    let _: () = redis::cmd("SET").arg("counter").arg(v + 1).query(&mut c).expect("SET");
                    inside.store(false, Ordering::SeqCst);
                    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", &owner, "10000"]), Value::Int(1));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("client thread"));
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["GET", "counter"]), Value::BulkString(b"6400".to_vec()));
    wait_blocked(&mut c, 0);
    assert_eq!(keys(&mut c), ["counter"], "no queue entry left behind");
}

/// Parking (the enqueue, the keep-alive moves) and the grant reach the replica as plain
/// effects with absolute scores: the replica ends identical.
#[test]
fn parking_and_grants_reach_the_replica_identically() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "200", "50"]);
    let a = park(&s, &mut c, "a", "50", "5000");
    let _b = park(&s, &mut c, "b", "50", "5000");
    ok(&mut c, &["FAIRLOCK.RENEW", "doc", "holder", "30000"]);
    thread::sleep(Duration::from_millis(400));
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "30000"]);
    granted(a);
    // b is still parked: the keep-alive tick moves its deadline on the primary every 100 ms,
    // and the move reaches the replica a moment later. So the replica is read, after WAIT,
    // between two reads of the primary that agree: a keep-alive only moves deadlines forward,
    // so the primary did not change in between, and the replica, which has every write up to
    // the first read, holds exactly that state if it replicates faithfully.
    let state = |c: &mut redis::Connection| -> (Vec<(String, String)>, Vec<String>, Value, i64) {
        let z = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
        (z, queue(c), ok(c, &["HGETALL", "doc"]), int(&ok(c, &["PEXPIRETIME", "doc"])))
    };
    let (mut tries, deadline) = (0, Instant::now() + Duration::from_secs(10));
    let (primary, replica) = loop {
        tries += 1;
        let before = state(&mut c);
        wait_replica(&mut c);
        let replica = state(&mut rc);
        if state(&mut c) == before {
            break (before, replica);
        }
        assert!(Instant::now() < deadline, "the primary kept changing ({tries} reads)");
    };
    assert_eq!(replica, primary);
    assert_eq!(replica.1, ["b"]);
    assert_eq!(hgetall(&mut rc, "doc"), map(&[("a", "1")]));
}

/// The queue, not the order of parking, decides: a parked waiter whose place was taken away
/// (here by a plain LREM) queues again at the tail, and the parked waiter now at the head is
/// served first.
#[test]
fn the_queue_decides_the_order_even_when_it_differs_from_parking_order() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "30000", "60000"]);
    let a = park(&s, &mut c, "a", "60000", "5000");
    let b = park(&s, &mut c, "b", "60000", "5000");
    ok(&mut c, &["LREM", Q, "0", "a"]);
    ok(&mut c, &["ZREM", Z, "a"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "30000"]);
    granted(b);
    assert_eq!(queue(&mut c), ["a"], "a queued again behind b");
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "b", "30000"]);
    granted(a);
}
