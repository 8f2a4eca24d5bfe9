//! Fencing tokens never go back (issue 35): after a promotion past a partition, in a split
//! brain, and after a restart from a snapshot older than the last grants, every path that
//! grants a token (`LOCK.ACQUIRE`, `RWLOCK.WLOCK` and `FAIRLOCK.ACQUIRE` with `TOKEN`, and
//! Redisson's `RFencedLock` body as Lua and run natively) grants above every token the lost
//! history handed out: the next era's. The replica's link goes through a proxy the test cuts,
//! so the lost grants never arrive. The new primary's replica and AOF hold the moved values;
//! an old primary that rejoins as a replica takes the new history and moves nothing itself.

use crate::common;

use common::fenced::{counter, era, fencing, grant, load_body, recorded_era, wait_moved, Path, PATHS};
use common::proxy::{replica_through, Proxy};
use common::*;

/// Grants `owner` `n` more tokens on every path, each the next of the sequence from `first`.
fn grants(c: &mut redis::Connection, owner: &str, first: i64, n: i64) {
    for path in PATHS {
        for t in first..first + n {
            assert_eq!(grant(c, path, owner), t, "{path:?}");
        }
    }
}

#[test]
fn a_replica_promoted_after_a_partition_grants_above_every_lost_token() {
    let p = Server::start();
    let proxy = Proxy::start(p.port);
    let mut r = replica_through(&p, &proxy, &["--appendonly", "yes", "--appendfsync", "always"]);
    let r2 = r.replica();
    let mut pc = p.conn();
    load_body(&mut pc);
    grants(&mut pc, "a", 1, 1);
    wait_replica(&mut pc);
    // The partition: tokens 2..=6 are granted, and never reach the replica.
    proxy.cut();
    grants(&mut pc, "a", 2, 5);
    // A name the lost history created: the replica has no counter for it at all.
    assert_eq!(token_of_lock(&mut pc, "fz-new"), 1);
    drop(pc);
    drop(p);
    let mut rc = r.conn();
    for path in PATHS {
        assert_eq!(counter(&mut rc, path), Some(1), "{path:?}: the replica has token 1 only");
    }
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    load_body(&mut rc);
    grants(&mut rc, "a", era(1) + 1, 2);
    assert_eq!(recorded_era(&mut rc), Some(1), "the era is recorded, ahead of its first write");
    assert_eq!(token_of_lock(&mut rc, "fz-new"), era(1) + 1, "a name the replica never saw starts in the era");
    wait_moved(&mut rc);
    assert_eq!(fencing(&mut rc, "era"), 1);
    // The new primary's replica holds the moved values and the record, as effects.
    wait_replica_for_all(&mut rc);
    let mut r2c = r2.conn();
    for path in PATHS {
        assert_eq!(counter(&mut r2c, path), Some(era(1) + 2), "{path:?} on the replica");
    }
    assert_eq!(recorded_era(&mut r2c), Some(1));
    assert_eq!(fencing(&mut r2c, "moved"), 0, "a replica moves nothing itself");
    // So does its AOF: a restart from it goes one era further (an AOF without the record would
    // give era 1 again, and its tokens).
    drop(rc);
    r.restart();
    let mut rc = r.conn();
    assert_eq!(recorded_era(&mut rc), Some(2));
    load_body(&mut rc);
    grants(&mut rc, "a", era(2) + 1, 1);
}

fn token_of_lock(c: &mut redis::Connection, name: &str) -> i64 {
    common::fenced::token_of(&ok(c, &["LOCK.ACQUIRE", name, "a", "60000", "TOKEN"]))
}

#[test]
fn in_a_split_brain_the_new_primary_grants_above_the_old_one_which_rejoins_its_history() {
    let p = Server::start();
    let proxy = Proxy::start(p.port);
    let r = replica_through(&p, &proxy, &[]);
    let mut pc = p.conn();
    load_body(&mut pc);
    grants(&mut pc, "a", 1, 1);
    wait_replica(&mut pc);
    proxy.cut();
    // The replica is promoted while the old primary goes on serving its clients.
    let mut rc = r.conn();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    load_body(&mut rc);
    grants(&mut pc, "a", 2, 25);
    grants(&mut rc, "a", era(1) + 1, 3);
    grants(&mut pc, "a", 27, 25);
    grants(&mut rc, "a", era(1) + 4, 2);
    // The old primary had no event: it moved nothing and kept its era.
    assert_eq!((fencing(&mut pc, "events"), fencing(&mut pc, "moved"), fencing(&mut pc, "era")), (0, 0, 0));
    // It rejoins as a replica of the new primary and takes its history, moving nothing.
    ok(&mut pc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while counter(&mut pc, Path::Lock) != Some(era(1) + 5) {
        assert!(std::time::Instant::now() < deadline, "the old primary never took the new history");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    wait_replica_for_all(&mut rc);
    for path in PATHS {
        assert_eq!(counter(&mut pc, path), Some(era(1) + 5), "{path:?}");
    }
    assert_eq!(recorded_era(&mut pc), Some(1));
    assert_eq!(diff::dump(&mut pc), diff::dump(&mut rc), "the old primary holds the new history");
    assert_eq!((fencing(&mut pc, "events"), fencing(&mut pc, "moved")), (0, 0));
}

#[test]
fn a_restart_from_a_snapshot_older_than_the_last_grants_grants_above_them() {
    let mut s = Server::start();
    let mut c = s.conn();
    load_body(&mut c);
    grants(&mut c, "a", 1, 3);
    ok(&mut c, &["SAVE"]);
    // Granted after the snapshot, then lost with the process (SHUTDOWN NOSAVE, no AOF).
    grants(&mut c, "a", 4, 6);
    drop(c);
    s.restart();
    let mut c = s.conn();
    load_body(&mut c);
    grants(&mut c, "a", era(1) + 1, 2);
    // The restart's era is recorded: the next snapshot and restart go one further.
    ok(&mut c, &["SAVE"]);
    grants(&mut c, "a", era(1) + 3, 2);
    drop(c);
    s.restart();
    let mut c = s.conn();
    load_body(&mut c);
    grants(&mut c, "a", era(2) + 1, 1);
}

#[test]
fn a_crash_with_the_aof_on_grants_above_every_token_it_fsynced() {
    let mut s = Server::start_with(true, &["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    load_body(&mut c);
    grants(&mut c, "a", 1, 3);
    let pid = s.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-9", &pid]).status().expect("kill").success());
    drop(c);
    s.restart();
    let mut c = s.conn();
    load_body(&mut c);
    grants(&mut c, "a", era(1) + 1, 1);
    // Each restart records its era at once, in the AOF too: two more restarts with no grant in
    // between give eras 2 and 3 (a record lost at start-up would give era 2 twice).
    drop(c);
    s.restart();
    assert_eq!(recorded_era(&mut s.conn()), Some(2));
    s.restart();
    let mut c = s.conn();
    assert_eq!((recorded_era(&mut c), fencing(&mut c, "era")), (Some(3), 3));
    load_body(&mut c);
    grants(&mut c, "a", era(3) + 1, 1);
}

#[test]
fn a_module_loaded_into_a_server_with_counters_moves_them_to_a_new_era() {
    let s = Server::start_plain();
    let mut c = s.conn();
    // Counters Redisson's Lua left, on a server the module was not loaded in.
    for path in PATHS {
        ok(&mut c, &["SET", &path.counter(), "41"]);
    }
    ok(&mut c, &["MODULE", "LOAD", module_path().to_str().expect("path")]);
    load_body(&mut c);
    grants(&mut c, "a", era(1) + 1, 1);
    wait_moved(&mut c);
    assert_eq!((fencing(&mut c, "events"), recorded_era(&mut c)), (1, Some(1)));
}

#[test]
fn every_counter_moves_in_steps_and_a_server_without_counters_writes_nothing() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    // No counter: an event records nothing and leaves no work behind.
    ok(&mut c, &["SET", "plain", "1"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(keys(&mut c), ["plain"]);
    assert_eq!((fencing(&mut c, "era"), fencing(&mut c, "moving"), fencing(&mut c, "moved")), (1, 0, 0));
    // Counters in two databases, more than one step's worth, and values a walk leaves alone.
    let n = 2_500;
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SET").arg(format!("redisson_lock_token:{{n{i}}}")).arg(i).ignore();
    }
    pipe.cmd("SET").arg("redisson_lock_token:{text}").arg("abc").ignore();
    pipe.cmd("HSET").arg("redisson_lock_token:{hash}").arg("f").arg("v").ignore();
    pipe.cmd("SET").arg("redisson_lock_token:{ahead}").arg(era(9) + 3).ignore();
    pipe.query::<()>(&mut c).expect("pipeline");
    ok(&mut c, &["SELECT", "3"]);
    ok(&mut c, &["SET", "redisson_lock_token:{db3}", "5"]);
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    wait_moved(&mut c);
    // The counter found past the era (9) raised it above itself, to 10; every other counter
    // moved to the floor in force when the walk reached it: era 2's, or 10's after the raise.
    let e = fencing(&mut c, "era") as i64;
    assert_eq!(e, 10, "one above the counter at era 9");
    let floors = [era(2), era(e)];
    for i in 0..n {
        let v: i64 = redis::cmd("GET").arg(format!("redisson_lock_token:{{n{i}}}")).query(&mut c).expect("GET");
        assert!(floors.contains(&v), "n{i}: {v}");
    }
    let ahead: i64 = redis::cmd("GET").arg("redisson_lock_token:{ahead}").query(&mut c).expect("GET");
    assert_eq!(ahead, era(e));
    assert_eq!(ok(&mut c, &["GET", "redisson_lock_token:{text}"]), Value::BulkString(b"abc".to_vec()));
    ok(&mut c, &["SELECT", "3"]);
    let db3: i64 = redis::cmd("GET").arg("redisson_lock_token:{db3}").query(&mut c).expect("GET");
    assert!(floors.contains(&db3), "{db3}");
    ok(&mut c, &["SELECT", "0"]);
    assert_eq!(recorded_era(&mut c), Some(e));
    assert!(fencing(&mut c, "moved") >= n as u64 + 2);
    // Every move reached the replica as it was made.
    wait_replica_for_all(&mut c);
    assert_eq!(diff::dump(&mut r.conn()), diff::dump(&mut c));
}

#[test]
fn while_counters_move_a_plain_incr_is_lifted_to_the_floor_even_when_writes_are_paused() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["SET", "redisson_lock_token:{held}", "7"]);
    ok(&mut c, &["SET", "redisson_lock_token:{other}", "9"]);
    // The reload and the pause in one round trip: the walk's first tick comes after both.
    let (_, _): (Value, Value) = redis::pipe()
        .cmd("DEBUG")
        .arg("RELOAD")
        .cmd("CLIENT")
        .arg("PAUSE")
        .arg("60000")
        .arg("WRITE")
        .query(&mut c)
        .expect("reload and pause");
    assert_eq!(fencing(&mut c, "moving"), 1, "nothing moves while writes are paused");
    assert_eq!(ok(&mut c, &["GET", "redisson_lock_token:{held}"]), Value::BulkString(b"7".to_vec()));
    // Postponed by the pause: it runs after it, lifted all the same.
    let mut w = s.conn();
    let incr = std::thread::spawn(move || ok(&mut w, &["INCR", "redisson_lock_token:{held}"]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ok(&mut c, &["CLIENT", "LIST"]).to_redis_string().contains("cmd=incr") {
        assert!(std::time::Instant::now() < deadline, "the INCR never arrived");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    // Exactly the era's first token if it ran before the walk reached the counter; if the
    // walk came first, higher (an era further at most): never below.
    let t = int(&incr.join().expect("INCR thread"));
    assert!(t > era(1) && t < era(3), "{t}");
    wait_moved(&mut c);
    let other: i64 = redis::cmd("GET").arg("redisson_lock_token:{other}").query(&mut c).expect("GET");
    assert_eq!(other, era(1));
    // The rewrite replicated as the INCRBY it became.
    wait_replica_for_all(&mut c);
    assert_eq!(diff::dump(&mut r.conn()), diff::dump(&mut c));
    // Once every counter moved, plain commands are not looked at: an INCR outside a script
    // counts as Redis' own does.
    assert_eq!(int(&ok(&mut c, &["INCR", "redisson_lock_token:{fresh}"])), 1);
}

#[test]
fn after_the_walk_a_script_naming_a_counter_starts_at_the_floor_even_queued_in_a_multi() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "plain", "1"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!((fencing(&mut c, "era"), fencing(&mut c, "moving")), (1, 0), "era 1, nothing to move");
    load_body(&mut c);
    // Redisson's body as Lua, on a name with no counter anywhere: the era's first token.
    assert_eq!(grant(&mut c, Path::LuaPlain, "a"), era(1) + 1);
    // Queued in a MULTI and run by an EXEC in another round trip, after the look the queued
    // script armed is over.
    let body = |name: &str| {
        let counter = names::token(name);
        vec![
            "EVALSHA".to_string(),
            common::fenced::FENCED_SHA.into(),
            "2".into(),
            name.into(),
            counter,
            "60000".into(),
            "a".into(),
        ]
    };
    ok(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "off"]);
    ok(&mut c, &["MULTI"]);
    let queued = body("fz-multi");
    assert_eq!(
        ok(&mut c, &queued.iter().map(String::as_str).collect::<Vec<_>>()),
        Value::SimpleString("QUEUED".into())
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    let exec = ok(&mut c, &["EXEC"]);
    assert_eq!(exec, Value::Array(vec![Value::Array(vec![Value::Int(-1), Value::Int(era(1) + 1)])]));
    // A counter set below the floor by hand is lifted by the next script that counts on it.
    ok(&mut c, &["SET", "redisson_lock_token:{fz-low}", "5"]);
    let low = body("fz-low");
    let got = ok(&mut c, &low.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(common::fenced::token_of(&got), era(1) + 1);
    // A client's own INCR of a counter that does not exist, outside a script, is Redis' own.
    assert_eq!(int(&ok(&mut c, &["INCR", "redisson_lock_token:{fz-plain}"])), 1);
    assert_eq!(recorded_era(&mut c), Some(1));
}

trait RedisString {
    fn to_redis_string(&self) -> String;
}

impl RedisString for Value {
    fn to_redis_string(&self) -> String {
        match self {
            Value::BulkString(b) => String::from_utf8_lossy(b).into(),
            Value::VerbatimString { text, .. } => text.clone(),
            other => format!("{other:?}"),
        }
    }
}
