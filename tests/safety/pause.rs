//! Writes paused (`CLIENT PAUSE ... WRITE|ALL`, `FAILOVER`): the module may not write, so a
//! grant on a lease's end, a parked fair waiter's keep-alive and its cancel wait for the pause
//! to end. The server stays up, no parked client is told "acquired" for a write that did not
//! happen, and once writes resume the waiter is served, on the replica and in the AOF too.
//!
//! Nothing here asserts timing: the state inside a pause is checked at [`CHECK_AT`], when the
//! lease has certainly ended and the pause certainly not; a grant after it is polled for with a
//! generous bound.

use crate::common;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use common::parked::wait_blocked;
use common::*;

const K: &str = "doc";
const Q: &str = "redisson_lock_queue:{doc}";
const Z: &str = "redisson_lock_timeout:{doc}";
/// The holder's lease (ms), taken just before the pause: it ends inside the pause, before
/// [`CHECK_AT`], and leaves the setup up to a second however loaded the machine.
const LEASE: &str = "1000";
/// How long each pause lasts.
const PAUSE: Duration = Duration::from_millis(3000);
/// When, after the pause starts, the state inside it is checked.
const CHECK_AT: Duration = Duration::from_millis(1500);

/// The lock a waiter parks on: the holder's command (lease [`LEASE`]), the waiter's (BLOCK 0),
/// and the lock hash once the waiter holds it.
#[derive(Clone, Copy)]
enum Kind {
    Lock,
    /// A writer parked on a read lock.
    WriteOnRead,
    /// A reader parked on a write lock.
    ReadOnWrite,
    Fair,
}

impl Kind {
    fn hold(self) -> Vec<&'static str> {
        match self {
            Kind::Lock => vec!["LOCK.ACQUIRE", K, "holder", LEASE],
            Kind::WriteOnRead => vec!["RWLOCK.RLOCK", K, "holder", LEASE],
            Kind::ReadOnWrite => vec!["RWLOCK.WLOCK", K, "holder", LEASE],
            Kind::Fair => vec!["FAIRLOCK.ACQUIRE", K, "holder", LEASE, "60000"],
        }
    }

    fn wait(self) -> Vec<&'static str> {
        match self {
            Kind::Lock => vec!["LOCK.ACQUIRE", K, "w", "30000", "BLOCK", "0"],
            Kind::WriteOnRead => vec!["RWLOCK.WLOCK", K, "w", "30000", "BLOCK", "0"],
            Kind::ReadOnWrite => vec!["RWLOCK.RLOCK", K, "w", "30000", "BLOCK", "0"],
            Kind::Fair => vec!["FAIRLOCK.ACQUIRE", K, "w", "30000", "60000", "BLOCK", "0"],
        }
    }

    fn granted(self) -> BTreeMap<String, String> {
        match self {
            Kind::Lock | Kind::Fair => map(&[("w", "1")]),
            Kind::WriteOnRead => map(&[("mode", "write"), ("w:write", "1")]),
            Kind::ReadOnWrite => map(&[("mode", "read"), ("w", "1")]),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum End {
    Unpause,
    TimesOut,
}

#[derive(Clone, Copy, PartialEq)]
enum With {
    Nothing,
    Replica,
    Aof,
}

type Parked = thread::JoinHandle<Result<Value, String>>;

/// Runs `args` on a connection of its own.
fn spawn_call(s: &Server, args: &[&str]) -> Parked {
    let mut c = s.conn();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        call(&mut c, &a)
    })
}

/// The reply of `p`, waiting up to 20 s for it.
fn reply_of(p: Parked) -> Result<Value, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !p.is_finished() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(p.is_finished(), "no reply within 20 s");
    p.join().expect("client thread")
}

fn dbsize(c: &mut redis::Connection) -> i64 {
    redis::cmd("DBSIZE").query(c).expect("DBSIZE")
}

fn ping(c: &mut redis::Connection) -> String {
    redis::cmd("PING").query(c).expect("PING")
}

fn zrange(c: &mut redis::Connection) -> Vec<(String, String)> {
    redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
}

fn lrange(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE").arg(Q).arg(0).arg(-1).query(c).expect("LRANGE")
}

fn pause(c: &mut redis::Connection, mode: &str) -> Instant {
    let at = Instant::now();
    ok(c, &["CLIENT", "PAUSE", &PAUSE.as_millis().to_string(), mode]);
    at
}

fn sleep_until(t: Instant) {
    thread::sleep(t.saturating_duration_since(Instant::now()));
}

/// Issue 16, section 1: a waiter parked with BLOCK while its holder's lease ends during a pause.
fn lease_ends_during_a_pause(kind: Kind, mode: &str, end: End, with: With) {
    let mut s = Server::start_with(true, if with == With::Aof { &["--appendonly", "yes"] } else { &[] });
    let replica = (with == With::Replica).then(|| s.replica());
    let mut c = s.conn();
    // Connected before the pause: under ALL, even a new connection's handshake waits.
    let mut pc = s.conn();
    ok(&mut c, &kind.hold());
    let waiter = spawn_call(&s, &kind.wait());
    wait_blocked(&mut c, 1);
    let keys_before = dbsize(&mut c);
    let paused_at = pause(&mut c, mode);
    assert!(!waiter.is_finished(), "the setup outlasted the lease");
    // A PING sent now is answered once the server may serve it (at the pause's end for ALL).
    let pinged = thread::spawn(move || call(&mut pc, &["PING"]));
    sleep_until(paused_at + CHECK_AT);
    assert!(s.alive(), "the server survived the lease's end");
    assert!(!waiter.is_finished(), "the waiter is not answered while writes are paused");
    if mode == "WRITE" {
        assert_eq!(ping(&mut c), "PONG");
        // Reads see the ended lease as gone; nothing was written in its place.
        assert_eq!(hgetall(&mut c, K), BTreeMap::new());
        assert_eq!(dbsize(&mut c), keys_before, "no key written");
    }
    if let Some(r) = &replica {
        let mut rc = r.conn();
        assert_eq!(dbsize(&mut rc), keys_before, "nothing reached the replica");
        assert_eq!(hgetall(&mut rc, K), BTreeMap::new());
    }
    if end == End::Unpause {
        ok(&mut c, &["CLIENT", "UNPAUSE"]);
    }
    assert_eq!(reply_of(waiter), Ok(Value::Nil), "granted once writes resume");
    assert!(matches!(reply_of(pinged), Ok(Value::SimpleString(ref p)) if p == "PONG"));
    assert_eq!(hgetall(&mut c, K), kind.granted());
    if let Kind::Fair = kind {
        assert_eq!(lrange(&mut c), Vec::<String>::new(), "the waiter left the queue with the grant");
    }
    if let Some(r) = &replica {
        wait_replica(&mut c);
        assert_eq!(hgetall(&mut r.conn(), K), kind.granted(), "the replica has the grant");
    }
    if with == With::Aof {
        ok(&mut c, &["DEBUG", "LOADAOF"]);
        assert_eq!(hgetall(&mut c, K), kind.granted(), "the AOF has the grant");
    }
}

#[test]
fn a_lock_waiter_is_granted_after_client_unpause_not_when_the_lease_ends_during_a_write_pause() {
    lease_ends_during_a_pause(Kind::Lock, "WRITE", End::Unpause, With::Nothing);
}

#[test]
fn a_lock_waiter_is_granted_once_a_pause_of_all_clients_times_out() {
    lease_ends_during_a_pause(Kind::Lock, "ALL", End::TimesOut, With::Nothing);
}

#[test]
fn a_writer_parked_on_a_read_lock_is_granted_once_a_write_pause_times_out() {
    lease_ends_during_a_pause(Kind::WriteOnRead, "WRITE", End::TimesOut, With::Nothing);
}

#[test]
fn a_reader_parked_on_a_write_lock_is_granted_once_a_pause_of_all_clients_times_out() {
    lease_ends_during_a_pause(Kind::ReadOnWrite, "ALL", End::TimesOut, With::Nothing);
}

#[test]
fn a_fair_waiter_is_granted_after_client_unpause_not_when_the_lease_ends_during_a_write_pause() {
    lease_ends_during_a_pause(Kind::Fair, "WRITE", End::Unpause, With::Nothing);
}

#[test]
fn a_grant_deferred_by_a_write_pause_reaches_the_replica() {
    lease_ends_during_a_pause(Kind::Lock, "WRITE", End::Unpause, With::Replica);
}

#[test]
fn a_fair_grant_deferred_by_a_pause_of_all_clients_reaches_the_replica() {
    lease_ends_during_a_pause(Kind::Fair, "ALL", End::TimesOut, With::Replica);
}

#[test]
fn a_read_write_grant_deferred_by_a_write_pause_is_in_the_aof() {
    lease_ends_during_a_pause(Kind::WriteOnRead, "WRITE", End::TimesOut, With::Aof);
}

/// A fair lock whose parked waiter `w` (wait 10 ms) comes due for a keep-alive about 700 ms
/// from now, while the holder keeps the lock for a minute.
fn fair_waiter_due_for_keep_alive(s: &Server, c: &mut redis::Connection) -> Parked {
    ok(c, &["FAIRLOCK.ACQUIRE", K, "holder", "1000", "10"]);
    let waiter = spawn_call(s, &["FAIRLOCK.ACQUIRE", K, "w", "30000", "10", "BLOCK", "0"]);
    wait_blocked(c, 1);
    assert_eq!(ok(c, &["FAIRLOCK.RENEW", K, "holder", "60000"]), Value::Int(1));
    waiter
}

/// After a pause: `w` kept its place (its deadline moved past now again), is granted on the
/// holder's unlock, and the replica has everything the primary has.
fn fair_waiter_served_after_the_pause(c: &mut redis::Connection, rc: &mut redis::Connection, waiter: Parked) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while zrange(c).first().and_then(|(_, d)| d.parse::<f64>().ok()).unwrap_or(0.0) <= common::diff::now_ms() as f64 {
        assert!(Instant::now() < deadline, "the keep-alive did not resume: {:?}", zrange(c));
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lrange(c), ["w"], "the parked waiter kept its place");
    assert_eq!(ok(c, &["FAIRLOCK.UNLOCK", K, "holder", "60000"]), Value::Int(1));
    assert_eq!(reply_of(waiter), Ok(Value::Nil));
    assert_eq!(hgetall(c, K), map(&[("w", "1")]));
    wait_replica(c);
    assert_eq!(hgetall(rc, K), map(&[("w", "1")]));
    assert_eq!((lrange(rc), zrange(rc)), (lrange(c), zrange(c)));
}

#[test]
fn a_parked_fair_waiters_keep_alive_waits_out_a_write_pause_with_a_replica_attached() {
    let mut s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let waiter = fair_waiter_due_for_keep_alive(&s, &mut c);
    let paused_at = pause(&mut c, "WRITE");
    let before = (lrange(&mut c), zrange(&mut c));
    sleep_until(paused_at + CHECK_AT);
    assert!(s.alive(), "the server survived the keep-alive");
    assert_eq!(ping(&mut c), "PONG");
    assert_eq!((lrange(&mut c), zrange(&mut c)), before, "no deadline moved during the pause");
    assert_eq!((lrange(&mut rc), zrange(&mut rc)), before, "nor on the replica");
    assert!(!waiter.is_finished());
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    fair_waiter_served_after_the_pause(&mut c, &mut rc, waiter);
}

#[test]
fn a_waiter_whose_block_timeout_falls_in_a_pause_gets_the_refusal_and_nothing_is_written() {
    let mut s = Server::start();
    let mut c = s.conn();
    // A lease that ends in the pause: the lock reads as free but cannot be taken: refused, 0.
    ok(&mut c, &["LOCK.ACQUIRE", K, "holder", LEASE]);
    let lock_waiter = spawn_call(&s, &["LOCK.ACQUIRE", K, "w", "30000", "BLOCK", "1300"]);
    // A fair lock still held: its waiter gets the lock's PTTL, and leaves the queue only
    // once writes resume.
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "fair", "holder", "60000", "60000"]);
    let fair_waiter = spawn_call(&s, &["FAIRLOCK.ACQUIRE", "fair", "w", "30000", "60000", "BLOCK", "1000"]);
    wait_blocked(&mut c, 2);
    let keys_before = dbsize(&mut c);
    let paused_at = pause(&mut c, "WRITE");
    assert!(!lock_waiter.is_finished() && !fair_waiter.is_finished(), "the setup outlasted the timeouts");
    sleep_until(paused_at + CHECK_AT);
    assert!(s.alive());
    assert!(lock_waiter.is_finished() && fair_waiter.is_finished(), "both timed out in the pause");
    assert_eq!(reply_of(lock_waiter), Ok(Value::Int(0)), "refused, never nil for a write not done");
    let ttl = int(&reply_of(fair_waiter).expect("a refusal"));
    assert!(ttl > 0 && ttl <= 60_000, "the fair lock's PTTL: {ttl}");
    assert_eq!(hgetall(&mut c, K), BTreeMap::new());
    assert_eq!(dbsize(&mut c), keys_before, "nothing written");
    let fair_queue: Vec<String> =
        redis::cmd("LRANGE").arg("redisson_lock_queue:{fair}").arg(0).arg(-1).query(&mut c).expect("LRANGE");
    assert_eq!(fair_queue, ["w"], "the cancel waits for the pause to end");
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while dbsize(&mut c) != 1 {
        assert!(Instant::now() < deadline, "the cancel did not run: {:?}", keys(&mut c));
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(keys(&mut c), ["fair"], "the timed-out waiter left the fair queue; the ended lease is gone");
    assert_eq!(hgetall(&mut c, "fair"), map(&[("holder", "1")]));
}

/// INFO replication's `master_failover_state`.
fn failover_state(c: &mut redis::Connection) -> String {
    let info: String = redis::cmd("INFO").arg("replication").query(c).expect("INFO");
    info.lines().find_map(|l| l.strip_prefix("master_failover_state:")).unwrap_or("").trim().to_string()
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill");
    assert!(status.success());
}

#[test]
fn a_failover_that_times_out_on_a_lagging_replica_leaves_the_primary_up_and_its_fair_waiter_served() {
    let mut s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    let waiter = fair_waiter_due_for_keep_alive(&s, &mut c);
    wait_replica(&mut c);
    // Stopped, the replica never catches up: FAILOVER pauses writes until its timeout.
    signal(r.pid(), "-STOP");
    ok(&mut c, &["SET", "lag", "1"]);
    let started = Instant::now();
    ok(&mut c, &["FAILOVER", "TIMEOUT", "2000"]);
    let before = (lrange(&mut c), zrange(&mut c));
    sleep_until(started + CHECK_AT);
    assert!(s.alive(), "the primary survived the keep-alive during FAILOVER");
    assert_eq!(ping(&mut c), "PONG");
    assert_eq!((lrange(&mut c), zrange(&mut c)), before, "no deadline moved during the failover");
    let deadline = Instant::now() + Duration::from_secs(20);
    while failover_state(&mut c) != "no-failover" {
        assert!(Instant::now() < deadline, "the failover did not time out");
        thread::sleep(Duration::from_millis(20));
    }
    signal(r.pid(), "-CONT");
    assert!(!waiter.is_finished(), "still parked: the failover was aborted");
    fair_waiter_served_after_the_pause(&mut c, &mut r.conn(), waiter);
}

#[test]
fn a_failover_with_a_parked_fair_waiter_releases_it_with_an_error_and_keeps_both_servers_up() {
    let mut s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    let waiter = fair_waiter_due_for_keep_alive(&s, &mut c);
    wait_replica(&mut c);
    ok(&mut c, &["FAILOVER"]);
    let err = reply_of(waiter).expect_err("an error, never a grant on a demoted primary");
    assert!(err.starts_with("UNBLOCKED"), "{err}");
    let mut rc = r.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while failover_state(&mut c) != "no-failover"
        || !redis::cmd("ROLE")
            .query::<Vec<Value>>(&mut rc)
            .expect("ROLE")
            .first()
            .is_some_and(|v| *v == Value::BulkString(b"master".to_vec()))
    {
        assert!(Instant::now() < deadline, "the failover did not complete");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(s.alive(), "the old primary survived");
    assert_eq!(ping(&mut c), "PONG");
    wait_replica(&mut rc);
    assert_eq!(hgetall(&mut rc, K), map(&[("holder", "1")]), "the holder still holds it");
    assert_eq!(hgetall(&mut c, K), map(&[("holder", "1")]));
    assert_eq!((lrange(&mut c), zrange(&mut c)), (lrange(&mut rc), zrange(&mut rc)), "no divergence");
}

/// A lock freed by another client's command (no module write: only the poll of parked locks
/// notices) in the transaction that starts a write pause: the poll's grant waits for the pause
/// to end, and then reaches the replica.
#[test]
fn a_lock_freed_by_another_client_as_a_write_pause_starts_is_granted_by_the_poll_after_it() {
    let mut s = Server::start_with(true, &[]);
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", K, "holder", "60000"]);
    let waiter = spawn_call(&s, &Kind::Lock.wait());
    wait_blocked(&mut c, 1);
    let paused_at = Instant::now();
    let mut tx = redis::pipe();
    tx.atomic().cmd("DEL").arg(K).cmd("CLIENT").arg("PAUSE").arg(PAUSE.as_millis() as u64).arg("WRITE");
    let _: redis::Value = tx.query(&mut c).expect("DEL and CLIENT PAUSE in one transaction");
    sleep_until(paused_at + CHECK_AT);
    assert!(s.alive(), "the server survived the poll's tick in the pause");
    assert!(!waiter.is_finished(), "the waiter is not answered while writes are paused");
    assert_eq!(hgetall(&mut c, K), BTreeMap::new(), "nothing written in the pause");
    assert_eq!(hgetall(&mut replica.conn(), K), BTreeMap::new());
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(reply_of(waiter), Ok(Value::Nil), "granted once writes resume");
    assert_eq!(hgetall(&mut c, K), Kind::Lock.granted());
    wait_replica(&mut c);
    assert_eq!(hgetall(&mut replica.conn(), K), Kind::Lock.granted(), "the replica has the grant");
}
