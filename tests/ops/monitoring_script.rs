//! monitoring/redis_exporter.lua (issue 37), run as the redis_exporter runs it (`EVAL script 0
//! 0`) by the ACL user docs/operations.md sets up: every numeric field of `INFO lockmod`, the
//! wait-time histograms and who waits on what come back as key/value pairs the exporter can
//! parse; a server without the module, a user refused a call, a Redis Cluster node and a
//! replica all still answer. (The whole chain, exporter and Prometheus included, is
//! tests/monitoring/test_monitoring.py.)

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::contended::waits;
use common::parked::{lockmod_ints, spawn_call, wait_blocked};
use common::*;

fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn script() -> String {
    std::fs::read_to_string(root().join("monitoring/redis_exporter.lua")).expect("monitoring/redis_exporter.lua")
}

/// The exporter's user as docs/operations.md creates it: its `redis> ACL SETUSER
/// lockmod-exporter ...` line, run as written.
fn create_exporter_user(admin: &mut redis::Connection) {
    let docs = std::fs::read_to_string(root().join("docs/operations.md")).expect("docs/operations.md");
    let line = docs
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("redis> ACL SETUSER lockmod-exporter "))
        .expect("docs/operations.md creates the exporter's user");
    let mut args = vec!["ACL", "SETUSER", "lockmod-exporter"];
    args.extend(line.split_whitespace());
    ok(admin, &args);
}

fn exporter_conn(s: &Server) -> redis::Connection {
    let mut c = s.conn();
    ok(&mut c, &["AUTH", "lockmod-exporter", "change-me"]);
    c
}

/// The script's pairs, each value parsed as the exporter parses it (a float).
fn collect(c: &mut redis::Connection) -> BTreeMap<String, f64> {
    let reply = ok(c, &["EVAL", &script(), "0", "0"]);
    let Value::Array(items) = reply else { panic!("not an array: {reply:?}") };
    assert_eq!(items.len() % 2, 0);
    let mut out = BTreeMap::new();
    for p in items.chunks(2) {
        let (k, v) = (common::contended::text(&p[0]), common::contended::text(&p[1]));
        let value: f64 = v.parse().unwrap_or_else(|_| panic!("{k} = {v:?} is not a number"));
        assert!(out.insert(k.clone(), value).is_none(), "{k} twice");
    }
    out
}

#[test]
fn the_exporter_user_collects_every_info_field_the_histograms_and_who_waits_on_what() {
    let s = Server::start();
    let mut admin = s.conn();
    create_exporter_user(&mut admin);
    // A hand-off (a wait in the histograms), a name with three waiters and awkward bytes in its
    // name and owner, and a read-write lock held for writing with a waiter.
    ok(&mut admin, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let w = spawn_call(&s, &["LOCK.ACQUIRE", "k", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 1);
    ok(&mut admin, &["LOCK.UNLOCK", "k", "h", "30000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    let hot = "hot;x\\y\u{e9}";
    ok(&mut admin, &["LOCK.ACQUIRE", hot, "o;1", "30000"]);
    let waiters: Vec<_> =
        (0..3).map(|i| spawn_call(&s, &["LOCK.ACQUIRE", hot, &format!("w{i}"), "30000", "BLOCK", "0"])).collect();
    ok(&mut admin, &["RWLOCK.WLOCK", "rw", "writer", "30000"]);
    let reader = spawn_call(&s, &["RWLOCK.RLOCK", "rw", "r", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 4);

    let mut exporter = exporter_conn(&s);
    let got = collect(&mut exporter);
    let info = lockmod_ints(&mut admin);
    assert!(info.len() > 40, "{info:?}");
    for (field, value) in &info {
        let key = format!("lockmod_{field}");
        let exported = got.get(&key).unwrap_or_else(|| panic!("{key} not exported"));
        // The module's own memory moves with every reply it builds; the rest stands still.
        if field != "memory_bytes" {
            assert_eq!(*exported, *value as f64, "{key}");
        }
    }
    for request in ["lock", "read", "write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"] {
        let h = waits(&mut admin, request);
        let l = format!(";request={request}");
        for (entry, value) in &h {
            let key = match entry.strip_prefix("le_") {
                Some("inf") => format!("lockmod_wait_seconds_bucket{l};le=+Inf"),
                Some(le) => format!("lockmod_wait_seconds_bucket{l};le={le}"),
                None if entry == "count" => format!("lockmod_wait_seconds_count{l}"),
                None if entry == "gave_up" => format!("lockmod_wait_gave_up{l}"),
                None => {
                    assert_eq!(entry, "sum_ms");
                    assert_eq!(got[&format!("lockmod_wait_seconds_sum{l}")], *value as f64 / 1000.0);
                    continue;
                }
            };
            assert_eq!(got.get(&key).copied(), Some(*value as f64), "{key}");
        }
    }
    assert_eq!(got["lockmod_wait_seconds_count;request=lock"], 1.0);
    let name = "db=0;kind=reentrant;name=hot\\x3bx\\\\y\\xc3\\xa9";
    assert_eq!(got[&format!("lockmod_contended_waiters;{name}")], 3.0);
    assert_eq!(got[&format!("lockmod_contended_holders;{name}")], 1.0);
    assert_eq!(got[&format!("lockmod_contended_holds;{name};holder=o\\x3b1")], 1.0);
    let oldest = got[&format!("lockmod_contended_oldest_wait_seconds;{name}")];
    assert!(oldest >= 0.0 && got[&format!("lockmod_contended_held_seconds;{name}")] >= oldest);
    let lease = got[&format!("lockmod_contended_lease_remaining_seconds;{name}")];
    assert!(lease > 0.0 && lease <= 30.0, "{lease}");
    assert_eq!(got["lockmod_contended_holds;db=0;kind=read-write;name=rw;holder=writer:write"], 1.0);
    assert_eq!(got["lockmod_contended_waiters;db=0;kind=read-write;name=rw"], 1.0);
    assert_eq!((got["lockmod_module_loaded"], got["lockmod_script_errors"]), (1.0, 0.0));
    for key in got.keys() {
        assert!(!key.split(';').skip(1).any(|l| !l.contains('=')), "every label is name=value: {key}");
    }

    ok(&mut admin, &["RWLOCK.FORCEUNLOCK", "rw", "WRITE"]);
    wait_blocked(&mut admin, 3);
    for left in (0..3).rev() {
        ok(&mut admin, &["LOCK.FORCEUNLOCK", hot]);
        wait_blocked(&mut admin, left);
    }
    for t in waiters.into_iter().chain([reader]) {
        assert!(t.join().expect("thread").is_ok());
    }
}

#[test]
fn a_server_without_the_module_or_a_user_refused_a_call_still_answers() {
    let plain = Server::start_plain();
    let got = collect(&mut plain.conn());
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        [("lockmod_module_loaded".into(), 0.0), ("lockmod_script_errors".into(), 0.0)]
    );

    let s = Server::start();
    let mut admin = s.conn();
    ok(&mut admin, &["ACL", "SETUSER", "partial", "on", ">pw", "%R~*", "-@all", "+eval", "+info"]);
    let mut c = s.conn();
    ok(&mut c, &["AUTH", "partial", "pw"]);
    let got = collect(&mut c);
    assert_eq!(got["lockmod_module_loaded"], 1.0);
    assert_eq!(got["lockmod_script_errors"], 2.0, "LOCK.CONTENDED refused, in each order");
    assert!(got.contains_key("lockmod_acquired"), "INFO's fields are still there");
}

#[test]
fn the_script_runs_on_a_cluster_node_and_on_a_replica() {
    let node = Server::start_with(true, &["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]);
    let mut c = node.conn();
    ok(&mut c, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).expect("CLUSTER INFO");
        if info.contains("cluster_state:ok") {
            break;
        }
        assert!(Instant::now() < deadline, "the one-node cluster never came up: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    create_exporter_user(&mut c);
    ok(&mut c, &["LOCK.ACQUIRE", "{orders}:lock", "h", "30000"]);
    let w = spawn_call(&node, &["LOCK.ACQUIRE", "{orders}:lock", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let got = collect(&mut exporter_conn(&node));
    assert_eq!(got["lockmod_contended_waiters;db=0;kind=reentrant;name={orders}:lock"], 1.0);
    assert_eq!(got["lockmod_script_errors"], 0.0);
    ok(&mut c, &["LOCK.UNLOCK", "{orders}:lock", "h", "30000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));

    let s = Server::start();
    let mut admin = s.conn();
    create_exporter_user(&mut admin);
    ok(&mut admin, &["LOCK.ACQUIRE", "k", "h", "30000"]);
    let r = s.replica();
    wait_replica(&mut admin);
    // ACL users are the server's own, not replicated.
    create_exporter_user(&mut r.conn());
    let got = collect(&mut exporter_conn(&r));
    assert_eq!((got["lockmod_module_loaded"], got["lockmod_script_errors"]), (1.0, 0.0));
    assert!(got.keys().all(|k| !k.starts_with("lockmod_contended_waiters")), "nobody parks on a replica");
    assert_eq!(hgetall(&mut r.conn(), "k"), map(&[("h", "1")]));
}
