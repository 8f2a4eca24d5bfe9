//! Production hardening (issue 16, part 5): commands that change nothing leave `WATCH` and
//! client-side caching alone; `LOCK.INFO` is bounded; parked fair waiters leaving at once are
//! cheap and reported to `LATENCY`; no latch is written over `maxmemory`; load arguments are
//! checked; one version number everywhere.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::names::*;
use common::*;

// ---------------------------------------------------------------------------------------------
// WATCH and client-side caching.

/// Lock states for the no-op commands: `l` held by `a`, `rw` write-held by `a`, `f` a fair lock
/// held by `a` with `w` queued, `free` and `ffree` absent, `t` fenced by `a`, `str` a string.
fn plant_locks(c: &mut redis::Connection) {
    ok(c, &["LOCK.ACQUIRE", "l", "a", "30000"]);
    ok(c, &["RWLOCK.WLOCK", "rw", "a", "30000"]);
    ok(c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "60000"]);
    ok(c, &["FAIRLOCK.ACQUIRE", "f", "w", "30000", "60000"]);
    ok(c, &["LOCK.ACQUIRE", "t", "a", "30000", "TOKEN"]);
    ok(c, &["SET", "str", "x"]);
}

/// Every key the no-op commands could touch, the absent ones included.
fn watched_keys() -> Vec<String> {
    let mut k: Vec<String> = ["l", "rw", "f", "free", "ffree", "t", "str"].iter().map(|s| s.to_string()).collect();
    for lock in ["f", "ffree", "str"] {
        k.push(fair_queue(lock));
        k.push(fair_timeouts(lock));
    }
    k.push(token("t"));
    k.push(read_timeout("rw", "b", 1));
    k
}

/// Commands that change nothing on the planted locks: refusals, calls by non-holders, reads.
const NO_OPS: &[&[&str]] = &[
    &["LOCK.INFO", "l"],
    &["LOCK.INFO", "rw"],
    &["LOCK.INFO", "f"],
    &["LOCK.INFO", "free"],
    &["LOCK.ACQUIRE", "l", "b", "30000"],
    &["LOCK.ACQUIRE", "t", "b", "30000", "TOKEN"],
    &["LOCK.UNLOCK", "l", "b", "30000"],
    &["LOCK.UNLOCK", "free", "b", "30000"],
    &["LOCK.RENEW", "l", "b", "30000"],
    &["LOCK.FORCEUNLOCK", "free"],
    &["RWLOCK.RLOCK", "rw", "b", "30000"],
    &["RWLOCK.WLOCK", "rw", "b", "30000"],
    &["RWLOCK.UNLOCK", "rw", "b", "WRITE", "30000"],
    &["RWLOCK.UNLOCK", "rw", "b", "READ", "30000"],
    &["RWLOCK.RENEW", "rw", "b", "30000"],
    &["RWLOCK.FORCEUNLOCK", "rw", "READ"],
    &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "60000", "NOQUEUE"],
    &["FAIRLOCK.UNLOCK", "f", "b", "30000"],
    &["FAIRLOCK.CANCEL", "f", "b", "60000"],
    &["FAIRLOCK.RENEW", "f", "b", "30000"],
    &["FAIRLOCK.FORCEUNLOCK", "ffree"],
    // An error changes nothing either.
    &["LOCK.ACQUIRE", "str", "b", "30000"],
    &["FAIRLOCK.ACQUIRE", "str", "b", "30000", "60000"],
];

/// WATCHes every key on `w`, runs `cmd` on `other`, then runs a transaction on `w`: true if
/// EXEC ran it (nil means a watched key was signalled as modified).
fn watch_survives(w: &mut redis::Connection, other: &mut redis::Connection, cmd: &[&str]) -> bool {
    let mut watch = redis::cmd("WATCH");
    for k in watched_keys() {
        watch.arg(k);
    }
    watch.query::<()>(w).expect("WATCH");
    let _ = call(other, cmd);
    ok(w, &["MULTI"]);
    ok(w, &["PING"]);
    ok(w, &["EXEC"]) != Value::Nil
}

#[test]
fn commands_that_change_nothing_do_not_abort_a_watched_transaction() {
    let s = Server::start();
    let (mut w, mut c) = (s.conn(), s.conn());
    plant_locks(&mut c);
    let before = keys(&mut c);
    for cmd in NO_OPS {
        assert!(watch_survives(&mut w, &mut c, cmd), "{cmd:?} aborted the transaction");
    }
    assert_eq!(keys(&mut c), before, "the no-op commands wrote nothing");
    // A real change still aborts it (the check can fail).
    assert!(!watch_survives(&mut w, &mut c, &["LOCK.RENEW", "l", "a", "30000"]), "a renewal is a change");
    assert!(!watch_survives(&mut w, &mut c, &["LOCK.UNLOCK", "l", "a", "30000"]), "a release is a change");
    assert!(!watch_survives(&mut w, &mut c, &["FAIRLOCK.CANCEL", "f", "w", "60000"]), "a cancel is a change");
}

/// A raw RESP3 connection with client-side caching in broadcasting mode: it is told about a
/// change to any key.
struct Tracking(TcpStream);

impl Tracking {
    fn start(s: &Server) -> Tracking {
        let t = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        t.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        let mut t = Tracking(t);
        t.send(&["HELLO", "3"]);
        t.send(&["CLIENT", "TRACKING", "ON", "BCAST"]);
        t.drain();
        t
    }

    fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.0.write_all(out.as_bytes()).expect("write");
    }

    /// Everything the server sent until the reply to a PING: invalidations of earlier commands
    /// are queued before it (Redis flushes broadcast invalidations before serving the PING).
    fn drain(&mut self) -> String {
        self.send(&["PING"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while !seen.contains("+PONG\r\n") {
            assert!(Instant::now() < deadline, "no PONG; got {seen:?}");
            if let Ok(n) = self.0.read(&mut buf) {
                seen.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
        seen
    }
}

#[test]
fn commands_that_change_nothing_send_no_client_side_caching_invalidation() {
    let s = Server::start();
    let mut c = s.conn();
    plant_locks(&mut c);
    let mut t = Tracking::start(&s);
    for cmd in NO_OPS {
        let _ = call(&mut c, cmd);
        let seen = t.drain();
        assert!(!seen.contains("invalidate"), "{cmd:?} sent an invalidation: {seen:?}");
    }
    ok(&mut c, &["LOCK.UNLOCK", "l", "a", "30000"]);
    let seen = t.drain();
    assert!(seen.contains("invalidate") && seen.contains("\r\nl\r\n"), "a release invalidates: {seen:?}");
}
