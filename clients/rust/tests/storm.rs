//! A storm on one lock from three languages at once (issue 34): Rust tasks, Python threads,
//! Python asyncio tasks and Node workers, each side sharing its lock objects as application code
//! does, acquire the lock `storm` over and over for `STORM_SECS` (15 by default) with random
//! waits (none, once, ms to s), cancel a quarter of their acquires at a random moment (a dropped
//! future or an aborted task, an asyncio cancellation, an `AbortSignal`), while a nemesis kills
//! or unblocks their parked waits (`CLIENT KILL ID`, `CLIENT UNBLOCK ... ERROR|TIMEOUT`), so that
//! every library settles lost replies. Inside the critical section each holder claims a
//! holder key with `SET NX` and checks its fencing token (tests/storm/rust_side.rs, `ENTER`):
//! never two holders at once. Asserted: no violation, every worker ended cleanly, the lock
//! free and nobody parked at the end, and every path taken on every side (the counts are
//! printed, outside the test harness' capture, for the record).

mod support;

#[path = "storm/nemesis.rs"]
mod nemesis;
#[path = "storm/rust_side.rs"]
mod rust_side;
#[path = "storm/tally.rs"]
mod tally;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_lockmod_client::LockClient;
use support::{info_field, node_lib, python, wait_until, Server};
use tally::{Tally, ACTIONS, SIDES};
use tokio::time::Instant;

/// The lock every side takes.
const NAME: &str = "storm";
/// Workers per side: Rust tasks, Python threads, Python asyncio tasks, Node workers.
const WORKERS: usize = 5;
/// The storm's length unless `STORM_SECS` says otherwise.
const DEFAULT_SECS: u64 = 15;

fn storm_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("storm")
}

/// A worker process of `side` (py-sync, py-asyncio or node) until `end_ms` (Unix ms).
fn spawn_side(s: &Server, side: &str, end_ms: u128) -> Child {
    let mut c = match side {
        "node" => {
            let mut c = Command::new("node");
            c.arg(storm_dir().join("worker.js")).env("LOCKMOD_NODE", node_lib());
            c
        }
        _ => {
            let mut c = Command::new(python());
            c.arg(storm_dir().join("worker.py")).arg(side.trim_start_matches("py-"));
            c
        }
    };
    c.env("PORT", s.port.to_string())
        .env("STORM_END_MS", end_ms.to_string())
        .env("STORM_WORKERS", WORKERS.to_string())
        .env("STORM_CLIENT_NAME", format!("storm-{side}"))
        .env("STORM_ENTER", rust_side::ENTER)
        .env("STORM_LEAVE", rust_side::LEAVE)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the {side} worker: {e}"))
}

/// Waits for a worker process (killed past `limit`); it must exit 0. Its stdout, and what
/// went wrong if anything did.
fn finish(child: Child, side: &str, limit: Duration) -> (String, Option<String>) {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return (String::new(), Some(format!("{side}: {e}"))),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            return (String::new(), Some(format!("the {side} worker did not end within {limit:?}")));
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let failed = (!out.status.success())
        .then(|| format!("the {side} worker failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    (stdout, failed)
}

/// A connection of the test's own: the critical sections, the nemesis. Its replies may take
/// as long as a loaded machine makes them (redis-rs gives up after 500 ms by default).
async fn connect(s: &Server) -> redis::aio::MultiplexedConnection {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(60)));
    s.client().get_multiplexed_async_connection_with_config(&config).await.expect("connect")
}

fn int(c: &mut redis::Connection, key: &str) -> i64 {
    let v: Option<i64> = redis::cmd("GET").arg(key).query(c).expect("GET");
    v.unwrap_or(0)
}

fn server_version(c: &mut redis::Connection) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(c).expect("INFO");
    let field = |f: &str| info.lines().find_map(|l| l.strip_prefix(f)).map(|v| v.trim().to_string());
    field("valkey_version:")
        .map(|v| format!("Valkey {v}"))
        .or_else(|| field("redis_version:").map(|v| format!("Redis {v}")))
        .unwrap_or_default()
}

/// The detector works: a second holder, and a token below one seen, are both caught.
fn the_critical_section_catches_two_holders(c: &mut redis::Connection) {
    let enter = |c: &mut redis::Connection, me: &str, token: &str| -> i64 {
        redis::cmd("EVAL").arg(rust_side::ENTER).arg(4).arg(&rust_side::KEYS).arg(me).arg(token).query(c).unwrap()
    };
    assert_eq!(enter(c, "a", "5"), 1);
    assert_eq!(enter(c, "b", ""), 0, "a second holder");
    let _: i64 = redis::cmd("EVAL").arg(rust_side::LEAVE).arg(1).arg("storm:holder").arg("a").query(c).unwrap();
    assert_eq!(enter(c, "c", "4"), 0, "a token below one seen");
    let _: i64 = redis::cmd("EVAL").arg(rust_side::LEAVE).arg(1).arg("storm:holder").arg("c").query(c).unwrap();
    assert_eq!(enter(c, "d", "9007199254740993"), 1, "above 2^53");
    let _: i64 = redis::cmd("EVAL").arg(rust_side::LEAVE).arg(1).arg("storm:holder").arg("d").query(c).unwrap();
    assert_eq!(enter(c, "e", "9007199254740992"), 0, "one below, which a double cannot tell apart");
    let log: Vec<String> = redis::cmd("LRANGE").arg("storm:log").arg(0).arg(-1).query(c).unwrap();
    assert_eq!(log, vec!["b: held by a", "c: token 4 after 5", "e: token 9007199254740992 after 9007199254740993"]);
    assert_eq!(int(c, "storm:violations"), 3);
    redis::cmd("DEL").arg(&rust_side::KEYS).exec(c).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_python_and_node_clients_never_hold_one_lock_at_once_through_cancels_kills_and_unblocks() {
    let tally = Arc::new(Tally::default());
    let unexpected = Arc::new(Mutex::new(Vec::new()));
    let counter = rust_side::SettleCounter { tally: tally.clone(), unexpected: unexpected.clone() };
    tracing::subscriber::set_global_default(counter).expect("the only subscriber of this test binary");
    // A panic anywhere (a task of the library) is a failure, even one nobody joins.
    let panics = unexpected.clone();
    let report_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        panics.lock().unwrap_or_else(|e| e.into_inner()).push(format!("panic: {info}"));
        report_panic(info)
    }));

    let s = Server::start();
    let mut c = s.conn();
    the_critical_section_catches_two_holders(&mut c);

    let secs = std::env::var("STORM_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_SECS);
    let storm = Duration::from_secs(secs);
    let end = Instant::now() + storm;
    let end_ms = (SystemTime::now() + storm).duration_since(UNIX_EPOCH).expect("clock").as_millis();
    let processes: Vec<(&str, Child)> = SIDES[1..].iter().map(|&side| (side, spawn_side(&s, side, end_ms))).collect();

    let locks = LockClient::new(s.client()).unwrap();
    let shared = [Arc::new(locks.lock(NAME)), Arc::new(locks.lock(NAME).fenced().with_lease(Duration::from_secs(60)))];
    let mut rust = Vec::new();
    for i in 0..WORKERS {
        let conn = connect(&s).await;
        rust.push(tokio::spawn(rust_side::worker(i, shared[i % 2].clone(), conn, end, tally.clone())));
    }
    let nemesis = tokio::spawn(nemesis::run(connect(&s).await, end, tally.clone()));
    let raw_holder = tokio::spawn(nemesis::raw_holder(connect(&s).await, end, tally.clone()));

    let limit = storm + Duration::from_secs(120);
    let outputs = tokio::task::spawn_blocking(move || {
        processes.into_iter().map(|(side, child)| (side, finish(child, side, limit))).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    // Every failure is gathered, so that the counts are printed whatever happened.
    let mut failures = Vec::new();
    for (side, (stdout, failed)) in outputs {
        let counted = tally.add_line(side, &stdout).err();
        failures.extend(failed.or(counted));
    }
    for (i, w) in rust.into_iter().enumerate() {
        match w.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("rust worker {i} panicked: {e}")),
        }
    }
    for (who, task) in [("the nemesis", nemesis), ("the nemesis' holds", raw_holder)] {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(e) => failures.push(format!("{who} panicked: {e}")),
        }
    }
    locks.close().await;

    let given_back = info_field(&mut c, "lockmod", "lockmod_grants_given_back");
    let handoffs = info_field(&mut c, "lockmod", "lockmod_handoffs");
    let latches: Vec<String> = redis::cmd("KEYS").arg("redisson_unlock_latch:*").query(&mut c).unwrap();
    let mut report = format!(
        "\n=== storm on {}: {secs} s, {WORKERS} workers per side on lock {NAME:?} ===\n{}\
         server: {handoffs} hand-offs, {given_back} grants given back (a strike met a grant); {} unlock latches left\n",
        server_version(&mut c),
        tally.table(),
        latches.len()
    );
    let log: Vec<String> = redis::cmd("LRANGE").arg("storm:log").arg(0).arg(20).query(&mut c).unwrap();
    if !log.is_empty() {
        report += &format!("violations (first 20): {log:#?}\n");
    }
    if !latches.is_empty() {
        report += &format!("unlock latches left (expiring): {:?}\n", &latches[..latches.len().min(5)]);
    }
    let _ = std::io::stderr().write_all(report.as_bytes());

    assert!(failures.is_empty(), "workers failed: {failures:#?}");
    assert_eq!(int(&mut c, "storm:violations"), 0, "never two holders at once: {log:#?}");
    let unexpected = unexpected.lock().unwrap().clone();
    assert!(unexpected.is_empty(), "the Rust client warned: {unexpected:#?}");
    wait_until(Duration::from_secs(20), "the lock free and nobody parked", || {
        let exists: i64 = redis::cmd("EXISTS").arg(NAME).arg("storm:holder").query(&mut c).unwrap();
        exists == 0 && info_field(&mut c, "lockmod", "lockmod_blocked_now") == 0
    });
    assert_eq!(info_field(&mut c, "clients", "blocked_clients"), 0);
    assert!(given_back > 0, "no strike met a grant on its way: the settle race was not run\n{report}");
    // A grant nobody knew of (leaked) is renewed by nobody: it frees itself when its lease ends,
    // which the wait above or the last waits of the storm would have seen as an expiry.
    let expired = info_field(&mut c, "lockmod", "lockmod_expired_while_held");
    assert_eq!(expired, 0, "a hold's lease ran out: a grant nobody knew of, or a stalled holder\n{report}");

    // Every path was taken on every side.
    for side in SIDES {
        for what in ["grants", "fenced", "timeouts", "settles"].into_iter().chain(ACTIONS) {
            assert!(tally.get(side, what) > 0, "{side}: no {what}\n{report}");
        }
        // Python threads cannot be cancelled; the others can.
        if side != "py-sync" {
            assert!(tally.get(side, "cancels") > 0, "{side}: no cancels\n{report}");
        }
        // The Node library sends an acquire UNBLOCKED with ERROR again; the others raise it.
        // Nothing but the nemesis unblocks.
        if side != "node" {
            let (seen, done) = (tally.get(side, "unblocked"), tally.get(side, "nemesis_unblock_error"));
            assert!(seen > 0 && seen <= done, "{side}: {seen} UNBLOCKED seen, {done} caused\n{report}");
        }
    }
}
