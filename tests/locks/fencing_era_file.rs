//! The node's era file (`lockmod.fencing-era-file`): the keyspace's record of the fencing era is
//! lost with the history it records, so a node that restarts twice from one snapshot, or that
//! restarts with nothing to load, would start an era it already used and hand its tokens out
//! again. The file in the server's `dir` keeps the largest era the node opened, written before
//! the era's first grant: every path that grants a token (`LOCK.ACQUIRE`, `RWLOCK.WLOCK` and
//! `FAIRLOCK.ACQUIRE` with `TOKEN`, Redisson's `RFencedLock` body as Lua and natively) then
//! grants above everything the node granted before. A replica writes none; a file that cannot
//! be written is counted and warned of, and grants go on.

use crate::common;

use std::collections::BTreeMap;

use common::fenced::{era, fencing, grant, load_body, recorded_era, Path, PATHS};
use common::proxy::{replica_through, Proxy};
use common::*;

const FILE: &str = "lockmod-fencing-era";

/// The tokens a node granted so far, per path: every later grant must be above them all.
#[derive(Default)]
struct Granted(BTreeMap<String, Vec<i64>>);

impl Granted {
    /// `n` grants on every path, each above every token this node granted on that path before.
    fn more(&mut self, c: &mut redis::Connection, n: usize) {
        for path in PATHS {
            for _ in 0..n {
                let t = grant(c, path, "a");
                let seen = self.0.entry(format!("{path:?}")).or_default();
                if let Some(top) = seen.iter().max() {
                    assert!(t > *top, "{path:?}: token {t} after {top}: a token repeated or went back");
                }
                seen.push(t);
            }
        }
    }

    /// The last token granted on `path`.
    fn last(&self, path: Path) -> i64 {
        *self.0[&format!("{path:?}")].last().expect("a grant")
    }
}

/// What the node's file holds (None: no file).
fn file_era(s: &Server) -> Option<i64> {
    std::fs::read_to_string(s.dir.join(FILE)).ok().map(|t| t.trim().parse().expect("an era in the file"))
}

/// Kills the server as a crash would (no save, no shutdown), and starts it again.
fn crash_and_restart(s: &mut Server) {
    let pid = s.pid().to_string();
    assert!(std::process::Command::new("kill").args(["-9", &pid]).status().expect("kill").success());
    s.restart();
}

#[test]
fn two_crashes_in_a_row_from_one_snapshot_never_repeat_a_token() {
    let mut s = Server::start();
    let mut c = s.conn();
    let mut granted = Granted::default();
    load_body(&mut c);
    granted.more(&mut c, 2);
    // An era recorded in the snapshot: restarts from it start one above.
    ok(&mut c, &["DEBUG", "RELOAD"]);
    granted.more(&mut c, 1);
    ok(&mut c, &["SAVE"]);
    assert_eq!(recorded_era(&mut c), Some(1));
    drop(c);
    // Restart 1 loads record 1 and starts era 2; its grants never reach a snapshot.
    crash_and_restart(&mut s);
    let mut c = s.conn();
    load_body(&mut c);
    granted.more(&mut c, 3);
    assert_eq!(granted.last(Path::Lock), era(2) + 3);
    drop(c);
    // Restart 2 loads record 1 again: the keyspace alone would start era 2 again.
    crash_and_restart(&mut s);
    let mut c = s.conn();
    load_body(&mut c);
    granted.more(&mut c, 2);
    assert_eq!((granted.last(Path::LuaPlain), fencing(&mut c, "era")), (era(3) + 2, 3));
    drop(c);
    // And a third: era 4.
    crash_and_restart(&mut s);
    let mut c = s.conn();
    load_body(&mut c);
    granted.more(&mut c, 1);
    assert_eq!((granted.last(Path::Fair), file_era(&s)), (era(4) + 1, Some(4)));
}

#[test]
fn a_crash_before_any_snapshot_does_not_count_from_one_again() {
    let mut s = Server::start();
    let mut c = s.conn();
    let mut granted = Granted::default();
    load_body(&mut c);
    granted.more(&mut c, 3);
    drop(c);
    // No RDB, no AOF: nothing is loaded, so no load event; the file alone starts era 1.
    crash_and_restart(&mut s);
    assert!(!s.dir.join("dump.rdb").exists(), "nothing to load");
    let mut c = s.conn();
    load_body(&mut c);
    granted.more(&mut c, 2);
    assert_eq!(granted.last(Path::LuaNative), era(1) + 2);
    assert_eq!((fencing(&mut c, "era"), file_era(&s)), (1, Some(1)));
    drop(c);
    // Again: era 2, above era 1's grants.
    crash_and_restart(&mut s);
    let mut c = s.conn();
    load_body(&mut c);
    granted.more(&mut c, 1);
    assert_eq!(granted.last(Path::Write), era(2) + 1);
}

#[test]
fn the_old_primary_of_a_split_brain_restarting_as_a_primary_never_repeats_its_own_tokens() {
    let mut p = Server::start();
    let proxy = Proxy::start(p.port);
    let r = replica_through(&p, &proxy, &[]);
    let mut pc = p.conn();
    let mut old = Granted::default();
    load_body(&mut pc);
    old.more(&mut pc, 1);
    // An event on the primary (its snapshot, saved by the reload, predates era 1's record).
    ok(&mut pc, &["DEBUG", "RELOAD"]);
    old.more(&mut pc, 1);
    wait_replica_for_all(&mut pc);
    // The partition: the replica is promoted, the old primary goes on serving its clients.
    proxy.cut();
    let mut rc = r.conn();
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    load_body(&mut rc);
    assert_eq!(grant(&mut rc, Path::Lock, "a"), era(2) + 1);
    old.more(&mut pc, 3);
    assert_eq!(old.last(Path::Lock), era(1) + 4);
    drop(pc);
    // The old primary crashes and restarts as a primary, still cut off: from its snapshot alone
    // it would start era 1 again and hand out its own era-1 tokens a second time.
    crash_and_restart(&mut p);
    let mut pc = p.conn();
    load_body(&mut pc);
    old.more(&mut pc, 2);
    assert_eq!((old.last(Path::Lock), file_era(&p)), (era(2) + 2, Some(2)));
    // It rejoins as a replica and takes the new primary's history; it writes no file since.
    ok(&mut pc, &["REPLICAOF", "127.0.0.1", &r.port.to_string()]);
    wait_replica_for_all(&mut rc);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while diff::dump(&mut pc) != diff::dump(&mut rc) {
        assert!(std::time::Instant::now() < deadline, "the old primary never took the new history");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(file_era(&p), Some(2));
}

#[test]
fn a_replica_writes_no_file_and_the_file_follows_each_event_through_debug_reload() {
    let p = Server::start();
    let r = p.replica();
    let mut pc = p.conn();
    let mut granted = Granted::default();
    load_body(&mut pc);
    granted.more(&mut pc, 2);
    wait_replica_for_all(&mut pc);
    // The replica took every grant, and reloads its own copy: no event, no file.
    let mut rc = r.conn();
    ok(&mut rc, &["DEBUG", "RELOAD"]);
    assert_eq!(file_era(&r), None, "a replica writes no file");
    assert_eq!(fencing(&mut rc, "era_file_writes"), 0);
    // Each load on the primary: the file survives it and goes one era up, before any grant.
    for e in 1..=3 {
        ok(&mut pc, &["DEBUG", "RELOAD"]);
        assert_eq!(file_era(&p), Some(e), "after reload {e}");
        granted.more(&mut pc, 1);
        assert_eq!(granted.last(Path::Lock), era(e) + 1);
    }
    assert_eq!(fencing(&mut pc, "era_file_writes"), 4, "era 0's first grant, then each reload");
    assert_eq!(fencing(&mut pc, "era_file_errors"), 0);
    wait_replica_for_all(&mut pc);
    assert_eq!(file_era(&r), None);
    // Promoted, the replica is a primary like any: its era goes to its own file.
    ok(&mut rc, &["REPLICAOF", "NO", "ONE"]);
    load_body(&mut rc);
    assert_eq!(grant(&mut rc, Path::Lock, "a"), era(4) + 1);
    assert_eq!(file_era(&r), Some(4));
}

#[test]
fn a_file_that_cannot_be_written_is_counted_and_warned_of_once_and_grants_go_on() {
    let s = Server::start();
    // A directory where the file should be: neither read nor written (as root too).
    std::fs::create_dir(s.dir.join(FILE)).expect("mkdir");
    let mut c = s.conn();
    let mut granted = Granted::default();
    load_body(&mut c);
    granted.more(&mut c, 2);
    assert_eq!(granted.last(Path::Lock), 2);
    assert_eq!(fencing(&mut c, "era_file_errors"), 1, "era 0's write failed, once: no retry per grant");
    // The event cannot read it either: the keyspace's record (none here) is the bound.
    ok(&mut c, &["DEBUG", "RELOAD"]);
    granted.more(&mut c, 1);
    assert_eq!(granted.last(Path::Lock), era(1) + 1);
    assert_eq!(fencing(&mut c, "era_file_errors"), 3, "the event's read, era 1's write");
    assert_eq!(fencing(&mut c, "era_file_writes"), 0);
    let warnings = s.log().matches("fencing era file").count();
    assert_eq!(warnings, 1, "warned once: {}", s.log());
    // Once the file can be written, the next era is written.
    std::fs::remove_dir(s.dir.join(FILE)).expect("rmdir");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    granted.more(&mut c, 1);
    assert_eq!((granted.last(Path::Lock), file_era(&s)), (era(2) + 1, Some(2)));
    assert_eq!(fencing(&mut c, "era_file_writes"), 1);
}

#[test]
fn a_new_dir_or_file_name_gets_the_era_at_once_and_an_empty_name_turns_the_file_off() {
    let s = Server::start_with(true, &["--enable-protected-configs", "yes"]);
    let mut c = s.conn();
    let mut granted = Granted::default();
    load_body(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    granted.more(&mut c, 1);
    assert_eq!(file_era(&s), Some(1));
    // `CONFIG SET dir`: the server's files go elsewhere, and the era with them, before the
    // next snapshot there.
    let moved = s.dir.join("moved");
    std::fs::create_dir(&moved).expect("mkdir");
    ok(&mut c, &["CONFIG", "SET", "dir", moved.to_str().expect("path")]);
    assert_eq!(std::fs::read_to_string(moved.join(FILE)).expect("the era in the new dir"), "1\n");
    // A new name: written at once too.
    ok(&mut c, &["CONFIG", "SET", "lockmod.fencing-era-file", "era-of-this-node"]);
    assert_eq!(ok(&mut c, &["CONFIG", "GET", "lockmod.fencing-era-file"]), redis_pair("era-of-this-node"));
    assert_eq!(std::fs::read_to_string(moved.join("era-of-this-node")).expect("renamed"), "1\n");
    // A path is refused (the file stays in dir) and changes nothing.
    let e = call(&mut c, &["CONFIG", "SET", "lockmod.fencing-era-file", "../elsewhere"]).expect_err("a path");
    assert!(e.contains("file name"), "{e}");
    assert_eq!(ok(&mut c, &["CONFIG", "GET", "lockmod.fencing-era-file"]), redis_pair("era-of-this-node"));
    // Empty: off. An event reads and writes nothing.
    ok(&mut c, &["CONFIG", "SET", "lockmod.fencing-era-file", ""]);
    let writes = fencing(&mut c, "era_file_writes");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    granted.more(&mut c, 1);
    assert_eq!(granted.last(Path::Lock), era(2) + 1);
    assert_eq!(fencing(&mut c, "era_file_writes"), writes);
    assert_eq!(std::fs::read_to_string(moved.join("era-of-this-node")).expect("left"), "1\n");
}

#[test]
fn with_the_file_off_a_crash_before_any_snapshot_counts_from_one_again() {
    // What turning it off costs: only the keyspace records eras.
    let mut s = Server::start_with(true, &["--lockmod.fencing-era-file", ""]);
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["CONFIG", "GET", "lockmod.fencing-era-file"]), redis_pair(""));
    // A file name the server writes is protected, as `dir` is.
    let e = call(&mut c, &["CONFIG", "SET", "lockmod.fencing-era-file", "x"]).expect_err("protected");
    assert!(e.contains("protected"), "{e}");
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "off", "a", "60000", "TOKEN"]), token(1));
    drop(c);
    crash_and_restart(&mut s);
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "off", "a", "60000", "TOKEN"]), token(1), "the token repeats");
    let names: Vec<String> = std::fs::read_dir(&s.dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into())
        .collect();
    assert!(names.iter().all(|n| !n.contains(FILE)), "{names:?}");
}

fn redis_pair(value: &str) -> Value {
    Value::Array(vec![
        Value::BulkString(b"lockmod.fencing-era-file".to_vec()),
        Value::BulkString(value.as_bytes().to_vec()),
    ])
}

fn token(t: i64) -> Value {
    Value::Array(vec![Value::Int(-1), Value::Int(t)])
}
