//! `WAIT` after a grant made while parked (issue 29): a client granted a lock or permits while
//! parked with `BLOCK` must be able to make sure the grant reached the replicas with `WAIT`
//! (and `WAITAOF`) on its own connection, as the client libraries do after every grant. The
//! grant's writes are made by another client's command, a timer or a keyspace event, not by
//! the waiter's command, so this holds only if the server advances the waiter's wait offset
//! when it unblocks it (Redis and Valkey set it to the replication offset after the module's
//! reply callback).
//!
//! Each case: the waiter's connection first writes something the replica acknowledges (its
//! wait offset is then old but non-zero), the waiter parks, the replica is stopped (SIGSTOP:
//! it acknowledges nothing more), the grant comes from elsewhere. `WAIT 1` on the waiter's
//! connection must then time out with 0: the replica has not acknowledged the grant. Had the
//! offset not been advanced, the old acknowledgement would satisfy it at once (a control
//! connection with the same history shows that it does). Once the replica runs again, `WAIT`
//! returns 1 and the replica holds the grant.

use crate::common;

use std::thread;
use std::time::{Duration, Instant};

use common::parked::wait_blocked;
use common::*;

/// How long a `WAIT` that must time out is given.
const SHORT_WAIT_MS: &str = "300";

/// Stops a process with SIGSTOP and continues it on drop (a failing test too).
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        signal(pid, "-STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill {sig} {pid}");
}

fn wait(c: &mut redis::Connection, replicas: i64, ms: &str) -> i64 {
    redis::cmd("WAIT").arg(replicas).arg(ms).query(c).expect("WAIT")
}

/// A connection whose wait offset is old but not zero: it wrote, and the replica acknowledged.
fn acknowledged_conn(s: &Server, key: &str) -> redis::Connection {
    let mut c = s.conn();
    ok(&mut c, &["SET", key, "1"]);
    assert_eq!(wait(&mut c, 1, "5000"), 1, "the replica acknowledged the first write");
    c
}

/// Parks `cmd` on the waiter's connection `w`; returns the connection with the reply.
fn park(
    c: &mut redis::Connection,
    mut w: redis::Connection,
    cmd: &[&str],
) -> thread::JoinHandle<(redis::Connection, Result<Value, String>)> {
    let n = parked::blocked_clients(c);
    let args: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
    let h = thread::spawn(move || {
        let reply = call(&mut w, &args.iter().map(String::as_str).collect::<Vec<_>>());
        (w, reply)
    });
    wait_blocked(c, n + 1);
    h
}

/// The body of every case: `setup` makes the waiter wait, `cmd` parks it, `grant` (run while
/// the replica is stopped) makes the grant happen, `granted` checks the waiter's reply, and
/// `on_replica` checks (given that reply) that the replica holds the grant once it caught up.
fn grant_while_parked_is_covered_by_wait(
    setup: &[&[&str]],
    cmd: &[&str],
    grant: impl FnOnce(&mut redis::Connection),
    granted: impl FnOnce(&Value),
    on_replica: impl FnOnce(&mut redis::Connection, &Value),
) {
    // No 5 s delay before the replica's first sync.
    let s = Server::start_with(true, &["--repl-diskless-sync-delay", "0"]);
    let r = s.replica();
    let mut c = s.conn();
    for args in setup {
        ok(&mut c, args);
    }
    let waiter = acknowledged_conn(&s, "waiter:before");
    let mut control = acknowledged_conn(&s, "control:before");
    let parked = park(&mut c, waiter, cmd);
    let (mut w, reply) = {
        let _stopped = Stopped::new(r.pid());
        grant(&mut c);
        let (mut w, reply) = parked.join().expect("waiter thread");
        let reply = reply.expect("the waiter got a reply, not an error");
        granted(&reply);
        // The control's old acknowledgement satisfies WAIT at once: what a waiter whose wait
        // offset was not advanced would see.
        assert_eq!(wait(&mut control, 1, SHORT_WAIT_MS), 1, "control: an old offset is acknowledged");
        let started = Instant::now();
        assert_eq!(
            wait(&mut w, 1, SHORT_WAIT_MS),
            0,
            "WAIT on the waiter's connection covers its grant: a stopped replica has not acknowledged it"
        );
        assert!(started.elapsed() >= Duration::from_millis(250), "WAIT waited for the replica");
        (w, reply)
    };
    assert_eq!(wait(&mut w, 1, "10000"), 1, "the replica, running again, acknowledged the grant");
    on_replica(&mut r.conn(), &reply);
}

#[test]
fn wait_after_a_lock_granted_by_another_clients_unlock_covers_the_grant() {
    grant_while_parked_is_covered_by_wait(
        &[&["LOCK.ACQUIRE", "l", "holder", "30000"]],
        &["LOCK.ACQUIRE", "l", "waiter", "30000", "BLOCK", "0"],
        |c| assert_eq!(ok(c, &["LOCK.UNLOCK", "l", "holder", "30000"]), Value::Int(1)),
        nil,
        |rc, _| assert_eq!(hgetall(rc, "l"), map(&[("waiter", "1")])),
    );
}

#[test]
fn wait_after_a_lock_granted_at_the_holders_lease_end_covers_the_grant() {
    // The grant comes from the module's timer, in no client's command.
    grant_while_parked_is_covered_by_wait(
        &[&["LOCK.ACQUIRE", "l", "holder", "1500"]],
        &["LOCK.ACQUIRE", "l", "waiter", "30000", "BLOCK", "0"],
        |_| {},
        nil,
        |rc, _| assert_eq!(hgetall(rc, "l"), map(&[("waiter", "1")])),
    );
}

#[test]
fn wait_after_a_lock_granted_on_a_plain_del_covers_the_grant() {
    // A DEL by a client that knows nothing of the module: the grant follows a keyspace event.
    grant_while_parked_is_covered_by_wait(
        &[&["LOCK.ACQUIRE", "l", "holder", "30000"]],
        &["LOCK.ACQUIRE", "l", "waiter", "30000", "BLOCK", "0"],
        |c| assert_eq!(ok(c, &["DEL", "l"]), Value::Int(1)),
        nil,
        |rc, _| assert_eq!(hgetall(rc, "l"), map(&[("waiter", "1")])),
    );
}

#[test]
fn wait_after_a_fair_lock_grant_covers_the_grant() {
    grant_while_parked_is_covered_by_wait(
        &[&["FAIRLOCK.ACQUIRE", "f", "holder", "30000", "60000"]],
        &["FAIRLOCK.ACQUIRE", "f", "waiter", "30000", "60000", "BLOCK", "0"],
        |c| assert_eq!(ok(c, &["FAIRLOCK.UNLOCK", "f", "holder", "30000"]), Value::Int(1)),
        nil,
        |rc, _| {
            assert_eq!(hgetall(rc, "f"), map(&[("waiter", "1")]));
            let queue: Vec<String> =
                redis::cmd("LRANGE").arg("redisson_lock_queue:{f}").arg(0).arg(-1).query(rc).expect("LRANGE");
            assert_eq!(queue, Vec::<String>::new(), "the waiter left the queue on the replica too");
        },
    );
}

#[test]
fn wait_after_a_write_lock_grant_covers_the_grant() {
    grant_while_parked_is_covered_by_wait(
        &[&["RWLOCK.RLOCK", "rw", "reader", "30000"]],
        &["RWLOCK.WLOCK", "rw", "writer", "30000", "BLOCK", "0"],
        |c| assert_eq!(ok(c, &["RWLOCK.UNLOCK", "rw", "reader", "READ", "30000"]), Value::Int(1)),
        nil,
        |rc, _| assert_eq!(hgetall(rc, "rw"), map(&[("mode", "write"), ("writer:write", "1")])),
    );
}

#[test]
fn wait_after_semaphore_permits_granted_by_a_release_covers_the_grant() {
    grant_while_parked_is_covered_by_wait(
        &[&["SEMAPHORE.TRYSETPERMITS", "s", "0"]],
        &["SEMAPHORE.ACQUIRE", "s", "2", "BLOCK", "0"],
        |c| assert_eq!(ok(c, &["SEMAPHORE.RELEASE", "s", "3"]), Value::Int(3), "3 available before the waiter's 2"),
        |v| assert_eq!(*v, Value::Int(1)),
        |rc, _| {
            let left: String = redis::cmd("GET").arg("s").query(rc).expect("GET");
            assert_eq!(left, "1", "the replica has the permits taken");
        },
    );
}

#[test]
fn wait_after_expirable_permits_granted_at_a_lease_end_covers_the_grant() {
    // The expired permit comes back by the module's reclaim timer, which grants the waiter.
    grant_while_parked_is_covered_by_wait(
        &[&["PSEMAPHORE.TRYSETPERMITS", "p", "1"], &["PSEMAPHORE.ACQUIRE", "p", "1", "1500"]],
        &["PSEMAPHORE.ACQUIRE", "p", "1", "30000", "BLOCK", "0"],
        |_| {},
        |v| assert!(matches!(v, Value::Array(ids) if ids.len() == 1), "one permit id: {v:?}"),
        |rc, v| {
            let Value::Array(ids) = v else { unreachable!("checked above") };
            let Value::BulkString(id) = &ids[0] else { panic!("an id: {ids:?}") };
            // Members are the ids' bytes (Redisson's layout); the reply is their hex.
            let held: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg("{p}:timeout").arg(0).arg(-1).query(rc).expect("ZRANGE");
            let hex: Vec<String> = held.iter().map(|m| m.iter().map(|b| format!("{b:02x}")).collect()).collect();
            assert_eq!(hex, [String::from_utf8_lossy(id).to_string()], "the replica has the new permit only");
        },
    );
}

#[test]
fn waitaof_after_a_lock_granted_while_parked_covers_the_grant_where_the_server_has_it() {
    // Both with an AOF: WAITAOF counts the replicas that wrote the grant to theirs.
    let s = Server::start_with(true, &["--repl-diskless-sync-delay", "0", "--appendonly", "yes"]);
    let mut c = s.conn();
    if !has_command(&mut c, "WAITAOF") {
        // Redis 7.0: no WAITAOF (7.2 added it); the client libraries then send WAIT alone.
        let err = call(&mut c, &["WAITAOF", "1", "0", "10"]).expect_err("no WAITAOF here");
        assert!(err.starts_with("ERR unknown command"), "{err}");
        return;
    }
    let r = replica_with(&s, &["--appendonly", "yes"]);
    let waitaof = |c: &mut redis::Connection, ms: &str| -> Vec<i64> {
        redis::cmd("WAITAOF").arg(1).arg(1).arg(ms).query(c).expect("WAITAOF")
    };
    let acknowledged = |key: &str| {
        let mut w = s.conn();
        ok(&mut w, &["SET", key, "1"]);
        assert_eq!(waitaof(&mut w, "5000"), [1, 1], "local and replica AOF have the first write");
        w
    };
    ok(&mut c, &["LOCK.ACQUIRE", "l", "holder", "30000"]);
    let waiter = acknowledged("waiter:before");
    let mut control = acknowledged("control:before");
    let parked = park(&mut c, waiter, &["LOCK.ACQUIRE", "l", "waiter", "30000", "BLOCK", "0"]);
    let mut w = {
        let _stopped = Stopped::new(r.pid());
        assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "l", "holder", "30000"]), Value::Int(1));
        let (mut w, reply) = parked.join().expect("waiter thread");
        assert_eq!(reply, Ok(Value::Nil), "granted");
        assert_eq!(waitaof(&mut control, SHORT_WAIT_MS), [1, 1], "control: an old offset is acknowledged");
        let got = waitaof(&mut w, SHORT_WAIT_MS);
        assert_eq!(got[1], 0, "WAITAOF on the waiter's connection covers its grant: {got:?}");
        w
    };
    assert_eq!(waitaof(&mut w, "10000"), [1, 1], "both AOFs have the grant once the replica runs");
    assert_eq!(hgetall(&mut r.conn(), "l"), map(&[("waiter", "1")]));
}

/// True if the server knows `name` (`COMMAND INFO` answers nil for an unknown command).
fn has_command(c: &mut redis::Connection, name: &str) -> bool {
    let info: Vec<Value> = redis::cmd("COMMAND").arg("INFO").arg(name).query(c).expect("COMMAND INFO");
    info.first().is_some_and(|v| *v != Value::Nil)
}

/// A replica of `s` started with `extra` arguments, once it is in sync.
fn replica_with(s: &Server, extra: &[&str]) -> Server {
    let port = s.port.to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", &port];
    args.extend_from_slice(extra);
    let r = Server::start_with(true, &args);
    let mut rc = r.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut rc).expect("INFO");
        if info.contains("master_link_status:up") {
            return r;
        }
        assert!(Instant::now() < deadline, "the replica did not sync: {info}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The reply of a lock grant.
fn nil(v: &Value) {
    assert_eq!(*v, Value::Nil, "granted");
}
