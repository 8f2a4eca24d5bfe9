//! `INFO lockmod`'s wait-time histograms (issue 37): each parked client's wait is counted once,
//! when it leaves, in its request's histogram: in the buckets, count and sum when it got what
//! it asked for, in `gave_up` when its BLOCK ran out, it went away or the server became a
//! replica. Also `held_locks` and `contended_names`, and `CONFIG RESETSTAT`.

use crate::common;

use std::thread;
use std::time::Duration;

use common::contended::waits;
use common::parked::{lockmod_stat, spawn_call, wait_blocked};
use common::*;

const BUCKETS: [&str; 17] = [
    "le_0.001", "le_0.002", "le_0.005", "le_0.01", "le_0.025", "le_0.05", "le_0.1", "le_0.25", "le_0.5", "le_1",
    "le_2.5", "le_5", "le_10", "le_30", "le_60", "le_300", "le_inf",
];

/// The histogram's entries in `INFO` order are the buckets, then count, sum_ms and gave_up.
fn check_shape(c: &mut redis::Connection, request: &str) {
    let info: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("lockmod_waits_{request}:"))).expect("the line");
    let keys: Vec<&str> = line.trim().split(',').map(|kv| kv.split('=').next().unwrap_or("")).collect();
    let mut want: Vec<&str> = BUCKETS.to_vec();
    want.extend(["count", "sum_ms", "gave_up"]);
    assert_eq!(keys, want, "{request}");
}

#[test]
fn a_granted_wait_lands_in_its_bucket_and_a_timeout_or_a_disconnect_gives_up() {
    let s = Server::start();
    let mut c = s.conn();
    for r in ["lock", "read", "write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"] {
        check_shape(&mut c, r);
        assert!(waits(&mut c, r).values().all(|&v| v == 0), "{r} starts empty");
    }
    ok(&mut c, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let w = spawn_call(&s, &["LOCK.ACQUIRE", "k", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    thread::sleep(Duration::from_millis(120));
    ok(&mut c, &["LOCK.UNLOCK", "k", "h", "30000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    let h = waits(&mut c, "lock");
    assert_eq!((h["count"], h["le_inf"], h["gave_up"]), (1, 1, 0));
    assert!(h["sum_ms"] >= 120, "{h:?}");
    // Cumulative: every bound from the wait's own up counts it.
    let first = BUCKETS.iter().position(|b| h[*b] == 1).expect("a bucket");
    assert!(BUCKETS[first..].iter().all(|b| h[*b] == 1) && BUCKETS[..first].iter().all(|b| h[*b] == 0), "{h:?}");
    assert!(first >= 7, "over 120 ms is above le_0.1: {h:?}");
    let bound_ms = |b: &str| (b.trim_start_matches("le_").parse::<f64>().expect("a bound") * 1000.0) as i64;
    assert!(h["sum_ms"] <= bound_ms(BUCKETS[first]), "the sum is the one wait, within its bucket: {h:?}");

    // A timeout (k is held by w now) and a disconnect: given up, not in the buckets.
    let t = spawn_call(&s, &["LOCK.ACQUIRE", "k", "t", "30000", "BLOCK", "30"]);
    assert!(matches!(t.join().expect("thread"), Ok(Value::Int(_))));
    let mut gone = s.conn();
    let id = int(&ok(&mut gone, &["CLIENT", "ID"])).to_string();
    let g = thread::spawn(move || call(&mut gone, &["LOCK.ACQUIRE", "k", "g", "30000", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    ok(&mut c, &["CLIENT", "KILL", "ID", &id]);
    assert!(g.join().expect("thread").is_err());
    let h = waits(&mut c, "lock");
    assert_eq!((h["count"], h["gave_up"]), (1, 2), "{h:?}");
    assert_eq!(lockmod_stat(&mut c, "block_timeouts"), 1);
    assert_eq!(lockmod_stat(&mut c, "block_disconnects"), 1);

    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert!(waits(&mut c, "lock").values().all(|&v| v == 0), "RESETSTAT empties them");
}

#[test]
fn each_request_has_its_own_histogram() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "rw", "w", "30000"]);
    let r = spawn_call(&s, &["RWLOCK.RLOCK", "rw", "r", "30000", "BLOCK", "0"]);
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "sem", "0"]);
    let sem = spawn_call(&s, &["SEMAPHORE.ACQUIRE", "sem", "2", "BLOCK", "0"]);
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "latch", "1"]);
    let latch = spawn_call(&s, &["COUNTDOWN.AWAIT", "latch", "BLOCK", "20"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "fair", "f1", "30000", "5000"]);
    let fair = spawn_call(&s, &["FAIRLOCK.ACQUIRE", "fair", "f2", "30000", "5000", "BLOCK", "0"]);
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(0)), "the latch's wait ran out");
    wait_blocked(&mut c, 3);
    ok(&mut c, &["RWLOCK.UNLOCK", "rw", "w", "WRITE", "30000"]);
    ok(&mut c, &["SEMAPHORE.RELEASE", "sem", "2"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "fair", "f1", "30000"]);
    for t in [r, sem, fair] {
        assert!(t.join().expect("thread").is_ok());
    }
    let counts = |c: &mut redis::Connection, req: &str| {
        let h = waits(c, req);
        (h["count"], h["gave_up"])
    };
    assert_eq!(counts(&mut c, "read"), (1, 0));
    assert_eq!(counts(&mut c, "semaphore"), (1, 0));
    assert_eq!(counts(&mut c, "fair"), (1, 0));
    assert_eq!(counts(&mut c, "countdown"), (0, 1));
    for req in ["lock", "write", "psemaphore", "ratelimiter"] {
        assert_eq!(counts(&mut c, req), (0, 0), "{req}");
    }
    assert_eq!(hgetall(&mut c, "rw"), map(&[("mode", "read"), ("r", "1")]));
}

#[test]
fn parked_clients_of_a_server_that_becomes_a_replica_give_up() {
    let s = Server::start();
    let other = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let w = spawn_call(&s, &["LOCK.ACQUIRE", "k", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &other.port.to_string()]);
    assert!(w.join().expect("thread").is_err(), "told to retry on the new primary");
    assert_eq!(waits(&mut c, "lock")["gave_up"], 1);
    ok(&mut c, &["REPLICAOF", "NO", "ONE"]);
}

#[test]
fn held_locks_and_contended_names_count_what_is_held_and_waited_on_now() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 0);
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r2", "30000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "o", "1000", "5000"]);
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 3, "a reentry or a second reader is no second lock");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pttl(&mut c, "f") != -2 {
        assert!(std::time::Instant::now() < deadline, "f's lease never ran out");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 2, "f's lease ran out");
    ok(&mut c, &["LOCK.UNLOCK", "a", "o", "30000"]);
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 2, "still held once");
    ok(&mut c, &["LOCK.UNLOCK", "a", "o", "30000"]);
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 1);
    assert_eq!(lockmod_stat(&mut c, "contended_names"), 0);
    let w = spawn_call(&s, &["RWLOCK.WLOCK", "rw", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(lockmod_stat(&mut c, "contended_names"), 1);
    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "rw", "READ"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(lockmod_stat(&mut c, "contended_names"), 0);
    assert_eq!(lockmod_stat(&mut c, "held_locks"), 1, "the writer's");
}

/// Every parked client's wait is counted once, whichever way it leaves: the histograms' counts
/// and given-up waits add up to the clients ever parked, and split as the exit counters do.
#[test]
fn every_way_out_counts_each_wait_once() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let parked_as = |owner: &str| {
        let mut w = s.conn();
        let id = int(&ok(&mut w, &["CLIENT", "ID"])).to_string();
        let owner = owner.to_string();
        (id, thread::spawn(move || call(&mut w, &["LOCK.ACQUIRE", "k", &owner, "30000", "BLOCK", "0"])))
    };
    let (timeout_id, by_timeout) = parked_as("unblocked-timeout");
    wait_blocked(&mut c, 1);
    let (error_id, by_error) = parked_as("unblocked-error");
    wait_blocked(&mut c, 2);
    ok(&mut c, &["CLIENT", "UNBLOCK", &timeout_id, "TIMEOUT"]);
    assert!(matches!(by_timeout.join().expect("thread"), Ok(Value::Int(_))), "refused with the TTL");
    ok(&mut c, &["CLIENT", "UNBLOCK", &error_id, "ERROR"]);
    assert!(by_error.join().expect("thread").is_err());
    let ran_out = spawn_call(&s, &["LOCK.ACQUIRE", "k", "short", "30000", "BLOCK", "20"]);
    assert!(matches!(ran_out.join().expect("thread"), Ok(Value::Int(_))));
    let (_, granted) = parked_as("granted");
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "sem", "0"]);
    let sem = spawn_call(&s, &["SEMAPHORE.ACQUIRE", "sem", "1", "BLOCK", "0"]);
    wait_blocked(&mut c, 2);
    ok(&mut c, &["LOCK.UNLOCK", "k", "h", "30000"]);
    ok(&mut c, &["SEMAPHORE.RELEASE", "sem", "1"]);
    assert_eq!(granted.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(sem.join().expect("thread"), Ok(Value::Int(1)));

    let (mut counted, mut gave_up) = (0, 0);
    for r in ["lock", "read", "write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"] {
        let h = waits(&mut c, r);
        counted += h["count"];
        gave_up += h["gave_up"];
    }
    assert_eq!(lockmod_stat(&mut c, "blocked_now"), 0);
    assert_eq!(counted + gave_up, lockmod_stat(&mut c, "blocked_total"), "each parked client once");
    assert_eq!(counted, lockmod_stat(&mut c, "handoffs"));
    assert_eq!(gave_up, lockmod_stat(&mut c, "block_timeouts") + lockmod_stat(&mut c, "block_disconnects"));
    assert_eq!((counted, gave_up), (2, 3));
    assert_eq!(hgetall(&mut c, "k"), map(&[("granted", "1")]));
}
