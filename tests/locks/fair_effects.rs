//! FAIRLOCK.* effects beyond the keyspace: the replication stream (absolute scores, one
//! variadic `ZADD` for a grant's deadline moves), the keyspace events compared with those of
//! the Lua reference, a grant over a long queue, and the unlock latch.

use crate::common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;

const K: &str = "doc";
const Q: &str = "redisson_lock_queue:{doc}";
const Z: &str = "redisson_lock_timeout:{doc}";
const CH: &str = "redisson_lock__channel:{doc}";

/// What the primary sends a replica while `f` runs, as upper-case text.
fn replication_stream(s: &Server, f: impl FnOnce(&mut redis::Connection)) -> String {
    let mut c = s.conn();
    let mut feed = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    feed.set_read_timeout(Some(Duration::from_millis(300))).expect("timeout");
    feed.write_all(b"SYNC\r\n").expect("SYNC");
    std::thread::sleep(Duration::from_millis(300));
    let mut sink = vec![0u8; 1 << 16];
    let _ = feed.read(&mut sink);
    f(&mut c);
    let mut stream = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = feed.read(&mut buf) {
        if n == 0 {
            break;
        }
        stream.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&stream).to_uppercase()
}

#[test]
fn a_grant_replicates_one_variadic_zadd_with_absolute_scores() {
    let s = Server::start();
    let text = replication_stream(&s, |c| {
        ok(c, &["FAIRLOCK.ACQUIRE", K, "a", "30000", "5000"]);
        for w in ["w1", "w2", "w3", "w4"] {
            ok(c, &["FAIRLOCK.ACQUIRE", K, w, "30000", "5000"]);
        }
        ok(c, &["FAIRLOCK.UNLOCK", K, "a", "30000"]);
        assert_eq!(ok(c, &["FAIRLOCK.ACQUIRE", K, "w1", "30000", "5000"]), Value::Nil);
    });
    // The grant moves w2..w4 in one command: ZADD, the key, then three (score, member) pairs.
    assert!(text.contains("*8\r\n$4\r\nZADD\r\n"), "no variadic ZADD for the grant: {text}");
    for absent in ["FAIRLOCK", "ZINCRBY", "\r\nPEXPIRE\r\n"] {
        assert!(!text.contains(absent), "{absent:?} in the replication stream: {text}");
    }
    for present in ["RPUSH", "LPOP", "ZREM", "PEXPIREAT", "PUBLISH"] {
        assert!(text.contains(present), "{present} missing from the replication stream: {text}");
    }
}

/// The keyspace events (`__keyevent@0__:<event>`, key) a story fires on one server.
fn events(s: &Server, story: &[Vec<String>]) -> Vec<(String, String)> {
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let sub = s.subscriber();
    for cmd in story {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let _ = call(&mut c, &args);
    }
    sub.take().into_iter().filter(|(ch, _)| ch.starts_with("__keyevent@")).collect()
}

/// One fair-lock command as the module runs it and as the Lua reference does.
fn both(module: &[&str], script: &str, keys: &[&str], args: &[&str]) -> (Vec<String>, Vec<String>) {
    let path = format!("{}/bench/lua/{script}.lua", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(path).expect("script");
    let mut lua = vec!["EVAL".to_string(), src, keys.len().to_string()];
    lua.extend(keys.iter().chain(args).map(|s| s.to_string()));
    (module.iter().map(|s| s.to_string()).collect(), lua)
}

/// Event for event, as the Lua reference fires them. (A grant with two or more waiters behind
/// it fires one `zincr` where the Lua fires one per waiter: see docs/design.md. The grant
/// here has one waiter behind it, so the streams are identical.)
#[test]
fn keyspace_events_are_those_of_the_lua_reference() {
    let mut steps = Vec::new();
    let acq = |o: &'static str| {
        both(&["FAIRLOCK.ACQUIRE", K, o, "30000", "5000"], "fair_acquire", &[K, Q, Z], &[o, "30000", "5000", ""])
    };
    steps.push(acq("a"));
    steps.push(acq("b"));
    steps.push(acq("c"));
    steps.push(acq("d"));
    steps.push(both(&["FAIRLOCK.CANCEL", K, "c", "5000"], "fair_cancel", &[K, Q, Z], &["c", "5000"]));
    steps.push(both(&["FAIRLOCK.UNLOCK", K, "a", "30000"], "fair_unlock", &[K, Q, Z, CH], &["a", "30000", ""]));
    steps.push(acq("b"));
    steps.push(acq("b"));
    steps.push(both(&["FAIRLOCK.FORCEUNLOCK", K], "fair_forceunlock", &[K, Q, Z, CH], &[""]));
    steps.push(acq("d"));
    let (m, l): (Vec<_>, Vec<_>) = steps.into_iter().unzip();
    let (ms, ls) = (Server::start(), Server::start_plain());
    let (em, el) = (events(&ms, &m), events(&ls, &l));
    for event in ["rpush", "lpop", "lrem", "zadd", "zrem", "zincr", "del", "hset", "expire"] {
        assert!(em.iter().any(|(ch, _)| ch.ends_with(&format!(":{event}"))), "no {event} event: {em:?}");
    }
    assert_eq!(em, el);
}

#[test]
fn a_grant_over_ten_thousand_waiters_leaves_the_replica_identical() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "holder", "600000", "10"]);
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("FAIRLOCK.ACQUIRE").arg(K).arg(format!("w{i}")).arg("600000").arg("10");
    }
    let _: Vec<Value> = p.query(&mut c).expect("enqueue");
    ok(&mut c, &["FAIRLOCK.UNLOCK", K, "holder", "600000"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "w0", "600000", "10"]), Value::Nil);
    wait_replica(&mut c);
    let zr = |c: &mut redis::Connection| -> Vec<(String, String)> {
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
    };
    let (zm, zrep) = (zr(&mut c), zr(&mut rc));
    assert_eq!(zm.len(), 9_999);
    assert_eq!(zm, zrep);
    let len: i64 = redis::cmd("LLEN").arg(Q).query(&mut rc).expect("LLEN");
    assert_eq!(len, 9_999);
}

#[test]
fn a_retried_latched_unlock_replays_the_first_outcome() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "a", "30000", "5000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "b", "30000", "5000"]);
    let unlock = ["FAIRLOCK.UNLOCK", K, "a", "30000", "LATCH", "r1", "5000"];
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[(&format!("{CH}:b"), "0")]));
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "b", "30000", "5000"]), Value::Nil);
    // The retry changes nothing and wakes nobody: b keeps the lock.
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[]));
    assert_eq!(hgetall(&mut c, K), map(&[("b", "1")]));
    assert_near(pttl(&mut c, "redisson_unlock_latch:{doc}:r1"), 5_000, 300);
}

/// The one documented difference: a grant moving several deadlines fires a single `zincr`.
#[test]
fn a_grant_fires_one_zincr_for_the_whole_move() {
    let acq = |o: &'static str| {
        both(&["FAIRLOCK.ACQUIRE", K, o, "30000", "5000"], "fair_acquire", &[K, Q, Z], &[o, "30000", "5000", ""])
    };
    let steps = vec![
        acq("a"),
        acq("b"),
        acq("c"),
        acq("d"),
        both(&["FAIRLOCK.UNLOCK", K, "a", "30000"], "fair_unlock", &[K, Q, Z, CH], &["a", "30000", ""]),
        acq("b"),
    ];
    let (m, l): (Vec<_>, Vec<_>) = steps.into_iter().unzip();
    let (ms, ls) = (Server::start(), Server::start_plain());
    let (em, el) = (events(&ms, &m), events(&ls, &l));
    let zincr = |e: &[(String, String)]| e.iter().filter(|(ch, _)| ch.ends_with(":zincr")).count();
    assert_eq!((zincr(&em), zincr(&el)), (1, 2), "c and d moved up");
    let others =
        |e: &[(String, String)]| e.iter().filter(|(ch, _)| !ch.ends_with(":zincr")).cloned().collect::<Vec<_>>();
    assert_eq!(others(&em), others(&el));
}
