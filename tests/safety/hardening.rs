//! Production hardening (issue 16, part 5): commands that change nothing leave `WATCH` and
//! client-side caching alone; `LOCK.INFO` is bounded; no latch is written over `maxmemory`;
//! load arguments are checked; one version number everywhere. (Parked waiters leaving at once:
//! tests/safety/give_up.rs.)

use crate::common;

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

// ---------------------------------------------------------------------------------------------
// Load arguments, the load log line, the version.

/// Cargo's version as `MODULE LIST` must show it (independent of src/version.rs).
fn cargo_version_number() -> i64 {
    let p: Vec<i64> = env!("CARGO_PKG_VERSION").split('.').map(|x| x.parse().expect("a number")).collect();
    p[0] * 10000 + p[1] * 100 + p[2]
}

/// The `ver` of lockmod in `MODULE LIST`, if it is loaded.
fn listed_version(c: &mut redis::Connection) -> Option<i64> {
    let list: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(c).expect("MODULE LIST");
    list.iter().find_map(|m| {
        let field = |name: &str| {
            m.chunks(2)
                .find(|kv| redis::from_redis_value::<String>(&kv[0]).ok().as_deref() == Some(name))
                .map(|kv| &kv[1])
        };
        let name: String = redis::from_redis_value(field("name")?).ok()?;
        (name == "lockmod").then(|| redis::from_redis_value(field("ver")?).ok()).flatten()
    })
}

#[test]
fn module_list_shows_the_cargo_version_encoded_as_redis_modules_do() {
    let s = Server::start();
    assert_eq!(listed_version(&mut s.conn()), Some(cargo_version_number()));
    assert_eq!(cargo_version_number(), 100, "0.1.0 is 100; update this line with Cargo.toml");
}

#[test]
fn a_server_given_an_unknown_module_argument_refuses_to_start_and_logs_why() {
    let dir = std::env::temp_dir().join(format!("lockmod-badarg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let log = dir.join("server.log");
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let mut child = std::process::Command::new(server_binary())
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--logfile")
        .arg(&log)
        .arg("--loadmodule")
        .arg(module_path())
        .arg("pubsub")
        .arg("sharded")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the server");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.is_some_and(|s| !s.success()), "the server started anyway: {text}");
    assert!(text.contains(r#"unknown load argument "pubsub" (2 given; lockmod takes none)"#), "{text}");
}

#[test]
fn module_load_with_an_argument_fails_and_a_clean_load_logs_the_version_and_configuration() {
    let s = Server::start_plain();
    let mut c = s.conn();
    let path = module_path().display().to_string();
    let err = call(&mut c, &["MODULE", "LOAD", &path, "bogus"]).expect_err("loaded with an argument");
    assert!(err.contains("Error loading the extension"), "{err}");
    assert_eq!(listed_version(&mut c), None);
    assert!(s.log().contains(r#"unknown load argument "bogus""#), "{}", s.log());
    ok(&mut c, &["MODULE", "LOAD", &path]);
    assert_eq!(listed_version(&mut c), Some(cargo_version_number()));
    let line = format!(
        "lockmod {} (module version {}) loaded: lockmod.pubsub=global",
        env!("CARGO_PKG_VERSION"),
        cargo_version_number()
    );
    assert!(s.log().contains(&line), "no {line:?} in {}", s.log());
    ok(&mut c, &["MODULE", "UNLOAD", "lockmod"]);
    ok(&mut c, &["MODULE", "LOADEX", &path, "CONFIG", "lockmod.pubsub", "sharded"]);
    assert!(s.log().contains("loaded: lockmod.pubsub=sharded"), "{}", s.log());
}

// ---------------------------------------------------------------------------------------------
// maxmemory.

#[test]
fn over_maxmemory_an_unlock_of_an_absent_lock_replies_and_publishes_but_writes_no_latch() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "held", "a", "30000"]);
    let sub = s.subscriber();
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let oom = call(&mut c, &["LOCK.ACQUIRE", "x", "a", "30000"]).expect_err("acquire is deny-oom");
    assert!(oom.starts_with("OOM"), "{oom}");
    let unlock = |c: &mut redis::Connection, key: &str, req: &str| {
        call(c, &["RWLOCK.UNLOCK", key, "a", "WRITE", "30000", "LATCH", req, "5000"]).expect("unlock runs")
    };
    assert_eq!(unlock(&mut c, "rw", "r1"), Value::Nil);
    assert_eq!(keys(&mut c), ["held"], "no latch key in a full server");
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(&rwlock_channel("rw"), "1")]), "waiters are told");
    // A release of a real hold still works when memory is full, and keeps its retry guard.
    let released = call(&mut c, &["LOCK.UNLOCK", "held", "a", "30000", "LATCH", "r2", "5000"]).expect("release");
    assert_eq!(int(&released), 1);
    assert_eq!(keys(&mut c), [latch("held", "r2")]);
    // With room again, the same unlock records its latch (the check above can fail).
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(unlock(&mut c, "rw", "r3"), Value::Nil);
    assert_eq!(keys(&mut c), [latch("held", "r2"), latch("rw", "r3")]);
}

// ---------------------------------------------------------------------------------------------
// LOCK.INFO bounded.

fn field(v: &Value, name: &str) -> Value {
    let pairs: Vec<(String, Value)> = match v {
        Value::Array(a) => {
            a.chunks(2).map(|p| (redis::from_redis_value(&p[0]).expect("a name"), p[1].clone())).collect()
        }
        other => panic!("expected a flat map, got {other:?}"),
    };
    pairs.into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no {name} in {v:?}")).1
}

fn array_len(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        other => panic!("expected an array, got {other:?}"),
    }
}

#[test]
fn lock_info_on_a_planted_hash_of_a_million_read_holds_lists_count_of_them() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["HSET", "k", "mode", "read", "f0", "1048576", "f1", "1048576", "f2", "1048576", "f3", "1048576"]);
    for (args, want) in [(&["LOCK.INFO", "k"][..], 100), (&["LOCK.INFO", "k", "COUNT", "7"][..], 7)] {
        let r = ok(&mut c, args);
        assert_eq!(int(&field(&r, "holders_total")), 4);
        let holders = match field(&r, "holders") {
            Value::Array(h) => h,
            other => panic!("{other:?}"),
        };
        let ttls: usize = holders.iter().map(|h| array_len(&field(h, "read_holds_pttl"))).sum();
        assert_eq!(ttls, want, "{args:?}: read-hold TTLs in all");
        assert!(holders.iter().all(|h| int(&field(h, "count")) == 1_048_576));
    }
    assert_eq!(keys(&mut c), ["k"]);
}

#[test]
fn lock_info_on_a_long_fair_queue_lists_count_waiters_in_order_with_the_total() {
    let s = Server::start();
    let mut c = s.conn();
    let n = 20_000;
    let mut rpush = redis::cmd("RPUSH");
    let mut zadd = redis::cmd("ZADD");
    rpush.arg(fair_queue("q"));
    zadd.arg(fair_timeouts("q"));
    let far = 4_000_000_000_000i64;
    for i in 0..n {
        rpush.arg(format!("w{i}"));
        zadd.arg(far + i).arg(format!("w{i}"));
    }
    rpush.query::<()>(&mut c).expect("RPUSH");
    zadd.query::<()>(&mut c).expect("ZADD");
    let r = ok(&mut c, &["LOCK.INFO", "q", "COUNT", "50"]);
    assert_eq!(int(&field(&r, "queue_total")), n);
    let queue = match field(&r, "queue") {
        Value::Array(q) => q,
        other => panic!("{other:?}"),
    };
    assert_eq!(queue.len(), 50);
    let owner: String = redis::from_redis_value(&field(&queue[49], "owner")).expect("owner");
    assert_eq!(owner, "w49");
    assert!(int(&field(&queue[49], "deadline_in_ms")) > 0);
}
