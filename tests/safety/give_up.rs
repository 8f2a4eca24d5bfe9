//! Thousands of parked waiters giving up at once (a client pool restarting): they leave their
//! queues in one batch, the registry and the keyspace clean, the replica equal, and the work
//! shows in `LATENCY` while the latency monitor is on (issue 16, part 5).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::names::*;
use common::*;

/// A client that sends one command and never reads: parked by `BLOCK`, it costs the test a
/// socket, not a thread.
fn send_raw(port: u16, args: &[&str]) -> TcpStream {
    let mut t = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    t.write_all(out.as_bytes()).expect("write");
    t
}

/// Waits until `f` holds, or panics with `what` after 60 s (the parking of thousands of fair
/// waiters is slow on a debug build: each keeps the whole queue alive when it parks).
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn info_lockmod(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("lockmod_{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no lockmod_{name} in {info}"))
}

fn lrange(c: &mut redis::Connection, key: &str) -> Vec<String> {
    redis::cmd("LRANGE").arg(key).arg(0).arg(-1).query(c).expect("LRANGE")
}

fn zrange(c: &mut redis::Connection, key: &str) -> Vec<(String, i64)> {
    redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
}

/// Parks `n` fair waiters `w0..` on `doc`, each on its own socket.
fn park_fair(port: u16, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| send_raw(port, &["FAIRLOCK.ACQUIRE", "doc", &format!("w{i}"), "600000", "600000", "BLOCK", "0"]))
        .collect()
}

/// The `lockmod-*` events `LATENCY LATEST` lists.
fn lockmod_latency_events(c: &mut redis::Connection) -> Vec<String> {
    let latest: Vec<Vec<Value>> = redis::cmd("LATENCY").arg("LATEST").query(c).expect("LATENCY LATEST");
    latest
        .iter()
        .filter_map(|e| redis::from_redis_value::<String>(&e[0]).ok())
        .filter(|name| name.starts_with("lockmod-"))
        .collect()
}

#[test]
fn thousands_of_parked_waiters_disconnecting_at_once_leave_the_queue_the_zset_and_the_registry_clean() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "600000", "600000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "plain", "holder", "600000"]);
    let n = 2_000;
    let mut fair = park_fair(s.port, n);
    // Reentrant-lock waiters disconnect in the same storm.
    let plain: Vec<TcpStream> = (0..100)
        .map(|i| send_raw(s.port, &["LOCK.ACQUIRE", "plain", &format!("p{i}"), "600000", "BLOCK", "0"]))
        .collect();
    wait_until("every client parked", || common::parked::blocked_clients(&mut c) == n + 100);
    assert_eq!(info_lockmod(&mut c, "blocked_now"), (n + 100) as i64);
    assert_eq!(lrange(&mut c, &fair_queue("doc")).len(), n);
    // Every tenth fair waiter stays; the others and every plain waiter go at once.
    let stay: Vec<TcpStream> = fair.iter().step_by(10).map(|t| t.try_clone().expect("clone")).collect();
    let survivors: Vec<String> = (0..n).step_by(10).map(|i| format!("w{i}")).collect();
    let deadlines: Vec<(String, i64)> =
        zrange(&mut c, &fair_timeouts("doc")).into_iter().filter(|(w, _)| survivors.contains(w)).collect();
    for (i, t) in fair.iter().enumerate() {
        if i % 10 != 0 {
            t.shutdown(std::net::Shutdown::Both).expect("shutdown");
        }
    }
    fair.clear();
    drop(plain);
    let left = survivors.len();
    wait_until("the leavers gone", || common::parked::blocked_clients(&mut c) == left);
    wait_until("their queue places gone", || lrange(&mut c, &fair_queue("doc")).len() == left);
    assert_eq!(lrange(&mut c, &fair_queue("doc")), survivors, "the survivors keep their order");
    // Each survivor moved up by the wait of every waiter that left ahead of it.
    let moved: Vec<(String, i64)> =
        deadlines.iter().enumerate().map(|(k, (w, d))| (w.clone(), d - 600_000 * (9 * k) as i64)).collect();
    assert_eq!(zrange(&mut c, &fair_timeouts("doc")), moved);
    assert_eq!(info_lockmod(&mut c, "blocked_now"), left as i64, "the registry holds the survivors only");
    assert_eq!(info_lockmod(&mut c, "block_disconnects"), (n - left + 100) as i64);
    assert_eq!(keys(&mut c).len(), 4, "doc, plain, the queue and the zset: {:?}", keys(&mut c));
    // The replica applied the same batch.
    wait_replica(&mut c);
    let mut rc = r.conn();
    assert_eq!(lrange(&mut rc, &fair_queue("doc")), survivors);
    assert_eq!(zrange(&mut rc, &fair_timeouts("doc")), moved);
    // The batch was reported to the latency monitor. Asserted on the debug build the tests
    // build, where it takes tens of ms (a few on a release build, which a fast machine could
    // bring under the 1 ms threshold).
    let history: Vec<(i64, i64)> =
        redis::cmd("LATENCY").arg("HISTORY").arg("lockmod-fair-cancels").query(&mut c).expect("LATENCY");
    if std::env::var_os("LOCKMOD_MODULE").is_none() {
        assert!(!history.is_empty(), "no lockmod-fair-cancels sample: {:?}", lockmod_latency_events(&mut c));
    }
    assert!(history.iter().all(|&(_, ms)| ms >= 1), "{history:?}");
    // The first survivor is served when the lock is released.
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "600000"]);
    let mut first = stay[0].try_clone().expect("clone");
    first.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut buf = [0u8; 16];
    let got = first.read(&mut buf).expect("the grant");
    assert_eq!(&buf[..got], b"$-1\r\n", "the first survivor got the lock");
    assert_eq!(hgetall(&mut c, "doc"), map(&[("w0", "1")]));
    drop(stay);
    wait_until("the rest gone", || common::parked::blocked_clients(&mut c) == 0);
    wait_until("the queue emptied", || keys(&mut c) == ["doc", "plain"]);
    assert_eq!(info_lockmod(&mut c, "blocked_now"), 0);
}

#[test]
fn with_the_latency_monitor_off_nothing_is_recorded() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "600000", "600000"]);
    let fair = park_fair(s.port, 500);
    wait_until("every client parked", || common::parked::blocked_clients(&mut c) == 500);
    drop(fair);
    wait_until("the queue emptied", || keys(&mut c) == ["doc"]);
    assert_eq!(lockmod_latency_events(&mut c), Vec::<String>::new());
}
