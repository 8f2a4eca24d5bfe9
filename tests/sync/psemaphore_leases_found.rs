//! Leases come back at their end whoever wrote them and whatever happened since (issue 29):
//! after a restart from the AOF or the RDB, `DEBUG RELOAD`, a replica's promotion, and for
//! permits leased by Redisson's Lua or a plain `ZADD`, with nobody calling. Each time the
//! permits return at their lease end (within a tolerance), the channel hears the count, a parked
//! native client is served, and a replica (or the AOF) gets the same writes. A replica never
//! reclaims: it waits for its primary, or for its own promotion.
//!
//! Before issue 29 the module armed its reclaim timer only from its own commands and parked
//! clients: in each of these cases the permits stayed held until some call touched the name.

use crate::common;

use std::thread;
use std::time::{Duration, Instant};

use common::diff::now_ms;
use common::parked::wait_blocked;
use common::*;

const CH: &str = "redisson_sc:{x}";
const Z: &str = "{x}:timeout";
/// A lease end is met within this (ms): the timer fires at it; a loaded machine adds a little.
const TOLERANCE: i64 = 1_000;

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn zcard(c: &mut redis::Connection) -> i64 {
    redis::cmd("ZCARD").arg(Z).query(c).expect("ZCARD")
}

/// The lease end of the permits held (all leased together).
fn lease_end(c: &mut redis::Connection) -> i64 {
    let z: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    assert!(!z.is_empty(), "no lease held");
    z.iter().map(|(_, t)| *t as i64).max().unwrap_or(0)
}

/// `x` with 2 permits, both leased for `ms` by the module: their lease end.
fn lease_two(c: &mut redis::Connection, ms: i64) -> i64 {
    ok(c, &["PSEMAPHORE.TRYSETPERMITS", "x", "2"]);
    let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("x").arg(2).arg(ms).query(c).expect("granted");
    assert_eq!(ids.len(), 2);
    assert_eq!(get(c, "x").as_deref(), Some("0"));
    lease_end(c)
}

/// Waits (reading only: `GET` and `ZCARD` reclaim nothing) until `x` holds `want` with no
/// lease left, and checks that it was within [`TOLERANCE`] of `end`.
fn returned_at(c: &mut redis::Connection, want: &str, end: i64) {
    let deadline = Instant::now() + Duration::from_millis((end - now_ms()).max(0) as u64 + 5_000);
    while !(get(c, "x").as_deref() == Some(want) && zcard(c) == 0) {
        assert!(Instant::now() < deadline, "the permits never came back: x = {:?}, {} leased", get(c, "x"), zcard(c));
        thread::sleep(Duration::from_millis(5));
    }
    let late = now_ms() - end;
    assert!(late >= -5, "returned {} ms before the lease end", -late);
    assert!(late <= TOLERANCE, "returned {late} ms after the lease end");
}

#[test]
fn leases_come_back_after_a_restart_from_the_aof() {
    let mut s = Server::start_with(true, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    let end = lease_two(&mut c, 2_500);
    s.restart();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!((get(&mut c, "x").as_deref(), zcard(&mut c)), (Some("0"), 2), "loaded as it was");
    returned_at(&mut c, "2", end);
    assert_eq!(sub.take(), msgs(&[(CH, "2")]));
    // The AOF has the reclaim: loaded once more, nothing is held and nothing is left to do.
    s.restart();
    let mut c = s.conn();
    assert_eq!((get(&mut c, "x").as_deref(), zcard(&mut c)), (Some("2"), 0));
}

#[test]
fn leases_come_back_after_a_restart_from_the_rdb_and_reach_a_replica() {
    let mut s = Server::start();
    let mut c = s.conn();
    // Long enough for a restart and a replica's full sync on a loaded machine.
    let end = lease_two(&mut c, 6_000);
    ok(&mut c, &["SAVE"]);
    s.restart();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let (sub, rsub) = (s.subscriber(), r.subscriber());
    assert!(now_ms() < end, "the restart and the replica's sync took longer than the lease");
    assert_eq!((get(&mut rc, "x").as_deref(), zcard(&mut rc)), (Some("0"), 2));
    returned_at(&mut c, "2", end);
    wait_replica(&mut c);
    assert_eq!((get(&mut rc, "x").as_deref(), zcard(&mut rc)), (Some("2"), 0), "the replica has the reclaim");
    assert_eq!(sub.take(), msgs(&[(CH, "2")]));
    // (The primary's own markers reach the replica too: PUBLISH is replicated.)
    let heard: Vec<_> = rsub.take().into_iter().filter(|(ch, _)| ch != SYNC_CHANNEL).collect();
    assert_eq!(heard, msgs(&[(CH, "2")]), "the replica's subscribers hear it too");
}

#[test]
fn leases_come_back_after_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    let end = lease_two(&mut c, 1_500);
    assert_eq!(sub.take(), msgs(&[(CH, "2")]), "trySetPermits");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(zcard(&mut c), 2);
    returned_at(&mut c, "2", end);
    assert_eq!(sub.take(), msgs(&[(CH, "2")]));
}

#[test]
fn a_promoted_replica_returns_the_leases_its_primary_left_and_a_replica_never_does() {
    let p = Server::start();
    let r = p.replica();
    let mut pc = p.conn();
    let end = lease_two(&mut pc, 1_000);
    wait_replica(&mut pc);
    // The primary stops (as a failed one would) before the lease ends: nobody returns them.
    let pid = p.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().expect("kill").success());
    let mut rc = r.conn();
    let rsub = r.subscriber();
    thread::sleep(Duration::from_millis(((end - now_ms()).max(0) + 300) as u64));
    // A replica writes nothing, its lease ends or not.
    assert_eq!((get(&mut rc, "x").as_deref(), zcard(&mut rc)), (Some("0"), 2), "a replica reclaimed");
    // Promoted: its keyspace walk finds the semaphore, whose lease ended: returned at once.
    let r2 = r.replica();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    let promoted = now_ms();
    returned_at(&mut rc, "2", promoted);
    assert_eq!(rsub.take(), msgs(&[(CH, "2")]));
    // The reclaim was the module's timer's write, not rc's.
    wait_replica_for_all(&mut rc);
    let mut r2c = r2.conn();
    assert_eq!((get(&mut r2c, "x").as_deref(), zcard(&mut r2c)), (Some("2"), 0), "its replica has the reclaim");
    let _ = std::process::Command::new("kill").args(["-CONT", &pid]).status();
}

#[test]
fn a_promoted_replica_returns_a_lease_at_its_end() {
    let p = Server::start();
    let r = p.replica();
    let mut pc = p.conn();
    let end = lease_two(&mut pc, 2_000);
    wait_replica(&mut pc);
    let mut rc = r.conn();
    let rsub = r.subscriber();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    drop(p);
    returned_at(&mut rc, "2", end);
    assert_eq!(rsub.take(), msgs(&[(CH, "2")]));
}

/// Redisson's `tryAcquire(ids)` body (3.23.4 on), run as Lua: this server runs no script
/// natively.
fn lua_acquire(c: &mut redis::Connection, ids: &[&[u8]], lease: i64) -> i64 {
    let body = common::sync_pair::load().by_prefix("992c9").text.clone();
    let now = now_ms();
    let until = now + lease;
    let mut e = redis::cmd("EVAL");
    e.arg(body).arg(3).arg("x").arg(Z).arg(CH);
    e.arg(ids.len()).arg(until).arg(now).arg("922337203685477").arg("publish");
    for id in ids {
        e.arg(*id);
    }
    let v: Value = e.query(c).expect("EVAL");
    assert!(
        matches!(&v, Value::Okay) || matches!(&v, Value::BulkString(b) if b == b"OK"),
        "the Lua took the permits: {v:?}"
    );
    until
}

#[test]
fn permits_leased_by_redissons_lua_come_back_to_a_parked_native_client() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let sub = s.subscriber();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "x", "2"]);
    // Parked first, wanting more than there is: its park arms no timer (no lease yet).
    let mut wc = s.conn();
    let waiter = thread::spawn(move || {
        let ids: Result<Vec<String>, _> =
            redis::cmd("PSEMAPHORE.ACQUIRE").arg("x").arg(3).arg(60_000).arg("BLOCK").arg(0).query(&mut wc);
        (ids, now_ms())
    });
    wait_blocked(&mut c, 1);
    let end = lua_acquire(&mut c, &[b"lua-permit-00001", b"lua-permit-00002"], 1_500);
    ok(&mut c, &["INCRBY", "x", "1"]);
    assert_eq!((get(&mut c, "x").as_deref(), zcard(&mut c)), (Some("1"), 2));
    sub.take();
    let (ids, at) = waiter.join().expect("thread");
    let ids = ids.expect("granted");
    assert_eq!(ids.len(), 3);
    let late = at - end;
    assert!((-5..=TOLERANCE).contains(&late), "served {late} ms after the lease end");
    // The two came back (a message with the count, 3), then the waiter took all three.
    assert_eq!(sub.take(), msgs(&[(CH, "3")]));
    assert_eq!((get(&mut c, "x").as_deref(), zcard(&mut c)), (Some("0"), 3));
    wait_replica(&mut c);
    assert_eq!((get(&mut rc, "x").as_deref(), zcard(&mut rc)), (Some("0"), 3));
}

#[test]
fn a_lease_written_by_a_plain_zadd_or_in_a_transaction_comes_back_at_its_end() {
    let s = Server::start();
    let mut c = s.conn();
    // A server whose expirable semaphores are in use (here another one's lease): from then on
    // the filter looks at every `ZADD`'s key (before, at none: docs/commands.md).
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "w", "1"]);
    ok(&mut c, &["PSEMAPHORE.ACQUIRE", "w", "1", "600000"]);
    let sub = s.subscriber();
    ok(&mut c, &["SET", "x", "1"]);
    let end = now_ms() + 1_200;
    ok(&mut c, &["ZADD", Z, &end.to_string(), "plain-permit-001"]);
    returned_at(&mut c, "2", end);
    assert_eq!(sub.take(), msgs(&[(CH, "2")]));
    // In MULTI: the ZADD is seen when queued and runs at EXEC, later.
    let end = now_ms() + 1_200;
    let mut p = redis::pipe();
    p.atomic().cmd("DECRBY").arg("x").arg(1).cmd("ZADD").arg(Z).arg(end).arg("multi-permit-001");
    let _: Value = p.query(&mut c).expect("MULTI");
    assert_eq!(get(&mut c, "x").as_deref(), Some("1"));
    returned_at(&mut c, "2", end);
    assert_eq!(sub.take(), msgs(&[(CH, "2")]));
    // Not a semaphore's: no count beside it, or members that are no permit ids. Left alone.
    let soon = (now_ms() + 100).to_string();
    ok(&mut c, &["ZADD", "{y}:timeout", &soon, "plain-permit-001"]);
    ok(&mut c, &["SET", "z", "1"]);
    ok(&mut c, &["ZADD", "{z}:timeout", &soon, "job-42"]);
    thread::sleep(Duration::from_millis(400));
    let y: i64 = redis::cmd("ZCARD").arg("{y}:timeout").query(&mut c).expect("ZCARD");
    let z: i64 = redis::cmd("ZCARD").arg("{z}:timeout").query(&mut c).expect("ZCARD");
    assert_eq!((y, get(&mut c, "y"), z, get(&mut c, "z").as_deref()), (1, None, 1, Some("1")));
    assert_eq!(sub.take(), msgs(&[]));
}

#[test]
fn module_load_into_a_server_with_leases_returns_them_at_their_end() {
    let s = Server::start_plain();
    let mut c = s.conn();
    ok(&mut c, &["SET", "x", "0"]);
    let end = now_ms() + 1_500;
    ok(&mut c, &["ZADD", Z, &end.to_string(), "lease-before-ld1"]);
    let module = module_path();
    ok(&mut c, &["MODULE", "LOAD", module.to_str().expect("path")]);
    let sub = s.subscriber();
    returned_at(&mut c, "1", end);
    assert_eq!(sub.take(), msgs(&[(CH, "1")]));
}
