//! `LOCK.ACQUIRE ... BLOCK ms`: clients parked in the server and handed the lock in order.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::parked::wait_blocked;
use common::*;

/// Starts `LOCK.ACQUIRE key owner lease BLOCK ms` on its own connection; the handle returns
/// the reply and when it arrived.
fn park(
    s: &Server,
    key: &str,
    owner: &str,
    lease: &str,
    ms: &str,
) -> thread::JoinHandle<(Result<Value, String>, Instant)> {
    let mut c = s.conn();
    let args: Vec<String> = ["LOCK.ACQUIRE", key, owner, lease, "BLOCK", ms].iter().map(|s| s.to_string()).collect();
    thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = call(&mut c, &a);
        (r, Instant::now())
    })
}

#[test]
fn a_free_lock_is_taken_at_once_without_parking() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "BLOCK", "1000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "k"), map(&[("a", "1")]));
}

#[test]
fn parked_clients_are_handed_the_lock_in_arrival_order() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "holder", "30000"]);
    let mut waiters = Vec::new();
    for i in 0..5 {
        waiters.push(park(&s, "k", &format!("w{i}"), "30000", "5000"));
        wait_blocked(&mut c, i + 1);
    }
    let sub = s.subscriber();
    let mut holder = "holder".to_string();
    for (i, w) in waiters.into_iter().enumerate() {
        assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "k", &holder, "30000"]), Value::Int(1));
        let (reply, _) = w.join().expect("waiter thread");
        assert_eq!(reply, Ok(Value::Nil));
        holder = format!("w{i}");
        assert_eq!(hgetall(&mut c, "k"), map(&[(holder.as_str(), "1")]), "grant {i}");
        assert_near(pttl(&mut c, "k"), 30_000, 100);
        wait_blocked(&mut c, 4 - i);
    }
    // Each release still publishes for Redisson's own waiters.
    assert_eq!(sub.take().len(), 5);
}

#[test]
fn a_parked_client_wakes_on_force_unlock() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let w = park(&s, "k", "b", "30000", "0");
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["LOCK.FORCEUNLOCK", "k"]), Value::Int(1));
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}

#[test]
fn a_parked_client_wakes_on_del_by_a_plain_client() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let w = park(&s, "k", "b", "30000", "5000");
    wait_blocked(&mut c, 1);
    ok(&mut c, &["DEL", "k"]);
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}

#[test]
fn a_parked_client_wakes_when_a_lua_script_releases_the_lock() {
    let s = Server::start();
    let mut c = s.conn();
    // Redisson's own unlock runs as Lua: it deletes the hash and publishes.
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let w = park(&s, "k", "b", "30000", "5000");
    wait_blocked(&mut c, 1);
    let script = "redis.call('hincrby', KEYS[1], ARGV[1], -1); redis.call('del', KEYS[1]); \
                  redis.call('publish', KEYS[2], 0); return 1";
    ok(&mut c, &["EVAL", script, "2", "k", "redisson_lock__channel:{k}", "a"]);
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}

#[test]
fn a_parked_client_wakes_within_a_few_ms_of_the_lease_expiring() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "400"]);
    let deadline = pexpiretime(&mut c, "k");
    let w = park(&s, "k", "b", "30000", "5000");
    let (reply, _) = w.join().expect("thread");
    assert_eq!(reply, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
    let late = grant_delay(&mut c, "k", 30_000, deadline);
    assert!(late < 100, "granted {late} ms after the lease expired");
}

#[test]
fn a_renewed_lease_keeps_the_parked_client_waiting() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "150"]);
    let w = park(&s, "k", "b", "30000", "5000");
    wait_blocked(&mut c, 1);
    ok(&mut c, &["LOCK.RENEW", "k", "a", "600"]);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(hgetall(&mut c, "k"), map(&[("a", "1")]), "granted despite the renewal");
    let (reply, _) = w.join().expect("thread");
    assert_eq!(reply, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}

#[test]
fn a_timeout_replies_the_ttl_as_the_non_blocking_form_would() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let started = Instant::now();
    let ttl = int(&ok(&mut c, &["LOCK.ACQUIRE", "k", "b", "30000", "BLOCK", "200"]));
    assert!(started.elapsed() >= Duration::from_millis(190));
    assert_near(ttl, 29_800, 100);
    wait_blocked(&mut c, 0);
    assert_eq!(hgetall(&mut c, "k"), map(&[("a", "1")]));
}

#[test]
fn block_zero_waits_without_limit() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let w = park(&s, "k", "b", "30000", "0");
    thread::sleep(Duration::from_millis(300));
    wait_blocked(&mut c, 1);
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "30000"]);
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
}

#[test]
fn a_killed_or_dropped_parked_client_leaks_nothing_and_is_skipped() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    // One parked client killed by CLIENT KILL, one whose socket is simply closed.
    let mut killed = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut killed).expect("CLIENT ID");
    let k = thread::spawn(move || call(&mut killed, &["LOCK.ACQUIRE", "k", "killed", "30000", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    {
        use std::io::Write;
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        raw.write_all(b"LOCK.ACQUIRE k dropped 30000 BLOCK 0\r\n").expect("write");
        wait_blocked(&mut c, 2);
    } // socket closed here
    ok(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert!(k.join().expect("thread").is_err());
    wait_blocked(&mut c, 0);
    let w = park(&s, "k", "next", "30000", "5000");
    wait_blocked(&mut c, 1);
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "30000"]);
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "k"), map(&[("next", "1")]));
}

#[test]
fn client_unblock_answers_a_parked_client() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    for (how, want_err) in [("TIMEOUT", false), ("ERROR", true)] {
        let mut w = s.conn();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).expect("CLIENT ID");
        let t = thread::spawn(move || call(&mut w, &["LOCK.ACQUIRE", "k", "b", "30000", "BLOCK", "0"]));
        wait_blocked(&mut c, 1);
        assert_eq!(ok(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), how]), Value::Int(1));
        let reply = t.join().expect("thread");
        if want_err {
            assert!(reply.as_ref().is_err_and(|e| e.starts_with("UNBLOCKED")), "{reply:?}");
        } else {
            assert!(matches!(reply, Ok(Value::Int(t)) if t > 29_000), "{reply:?}");
        }
        wait_blocked(&mut c, 0);
    }
    assert_eq!(hgetall(&mut c, "k"), map(&[("a", "1")]));
}

#[test]
fn block_inside_multi_does_not_block() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("b")
        .arg(30000)
        .arg("BLOCK")
        .arg(0)
        .query(&mut c)
        .expect("EXEC");
    assert!(matches!(replies[0], Value::Int(t) if t > 29_000), "{replies:?}");
}

#[test]
fn a_grant_on_wake_up_reaches_the_replica() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "200"]);
    let w = park(&s, "k", "b", "30000", "5000");
    assert_eq!(w.join().expect("thread").0, Ok(Value::Nil));
    wait_replica(&mut c);
    assert_eq!(hgetall(&mut rc, "k"), map(&[("b", "1")]));
    // Replicated as absolute times: equal but for rounding, however long between the reads.
    assert_near(pexpiretime(&mut rc, "k"), pexpiretime(&mut c, "k"), 5);
}

#[test]
fn thirty_two_blocking_clients_never_overlap() {
    let s = Server::start();
    let counter = Arc::new(AtomicI64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let mut c = s.conn();
            let (counter, inside) = (counter.clone(), inside.clone());
            thread::spawn(move || {
                let owner = format!("client-{i}");
                for _ in 0..200 {
                    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "k", &owner, "10000", "BLOCK", "10000"]), Value::Nil);
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    // A non-atomic read-modify-write that only the lock protects.
                    let v: i64 =
                        redis::cmd("GET").arg("counter").query::<Option<i64>>(&mut c).expect("GET").unwrap_or(0);
                    let _: () = redis::cmd("SET").arg("counter").arg(v + 1).query(&mut c).expect("SET");
                    counter.fetch_add(1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "k", &owner, "10000"]), Value::Int(1));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["GET", "counter"]), Value::BulkString(b"6400".to_vec()));
    assert_eq!(counter.load(Ordering::SeqCst), 6400);
    wait_blocked(&mut c, 0);
}

/// SWAPDB replaces a whole database at once, without per-key events: a parked client whose
/// lock is free in the database swapped in is served.
#[test]
fn a_parked_client_is_served_after_swapdb_frees_its_lock() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    let w = park(&s, "k", "b", "30000", "5000");
    wait_blocked(&mut c, 1);
    let swapped = Instant::now();
    ok(&mut c, &["SWAPDB", "0", "1"]);
    let (reply, at) = w.join().expect("thread");
    assert_eq!(reply, Ok(Value::Nil));
    assert!(at.duration_since(swapped) < Duration::from_secs(1), "served by its timeout, not the swap");
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}
