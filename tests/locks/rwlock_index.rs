//! The read-hold index behind RWLOCK.UNLOCK READ: built by the first read unlock that needs
//! the largest remaining lease, kept current by the module's own writes, and dropped when
//! anyone else touches the lock or its timeout keys, so every unlock still sees the keyspace.

use crate::common;

use std::collections::HashMap;
use std::thread::sleep;
use std::time::Duration;

use common::*;

fn t(owner: &str) -> String {
    names::read_timeout("doc", owner, 1)
}

/// Asserts the lock expires with the hold `key` (the longest remaining one), however long the
/// test took to ask: both PTTLs read in one script, which sees one time throughout (and by
/// commands the index ignores: a `PEXPIRETIME` of a timeout key would drop its entry).
fn assert_follows(c: &mut redis::Connection, key: &str) {
    let script = "return {redis.call('pttl', KEYS[1]), redis.call('pttl', KEYS[2])}";
    let (lock, hold): (i64, i64) = redis::cmd("EVAL").arg(script).arg(2).arg("doc").arg(key).query(c).expect("EVAL");
    assert!(hold > 0 && (lock - hold).abs() <= 1, "the lock's PTTL is {lock}, {key}'s {hold}");
}

fn indexed(c: &mut redis::Connection) -> i64 {
    let text: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    let fields: HashMap<&str, &str> =
        text.lines().filter_map(|l| l.strip_prefix("lockmod_")?.split_once(':')).collect();
    fields.get("indexed_read_holds").and_then(|v| v.trim().parse().ok()).expect("indexed_read_holds")
}

/// Ten readers `r0..r9`, `ri` with a lease of 10 s + i s; `r0` released, which builds the index.
fn ten_readers_one_released(c: &mut redis::Connection) {
    for i in 0..10 {
        ok(c, &["RWLOCK.RLOCK", "doc", &format!("r{i}"), &(10_000 + i * 1000).to_string()]);
    }
    assert_eq!(indexed(c), 0, "nothing is indexed before a read unlock needs it");
    assert_eq!(ok(c, &["RWLOCK.UNLOCK", "doc", "r0", "READ", "1"]), Value::Int(0));
    assert_eq!(indexed(c), 9);
    assert_follows(c, &t("r9"));
}

#[test]
fn module_writes_keep_the_index_and_its_answers_exact() {
    let s = Server::start();
    let mut c = s.conn();
    ten_readers_one_released(&mut c);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "40000"]);
    assert_eq!(indexed(&mut c), 10, "a second hold of r1 joins the entry");
    ok(&mut c, &["RWLOCK.RENEW", "doc", "r2", "50000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r3", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r2"));
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &names::read_timeout("doc", "r1", 2));
    assert_eq!(indexed(&mut c), 8, "still indexed: only the module wrote");
}

#[test]
fn foreign_writes_to_timeout_keys_are_seen_by_the_next_unlock() {
    let s = Server::start();
    let mut c = s.conn();
    ten_readers_one_released(&mut c);

    ok(&mut c, &["PEXPIRE", &t("r1"), "60000"]);
    assert_eq!(indexed(&mut c), 0, "a foreign PEXPIRE drops the entry");
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r1"));
    assert_eq!(indexed(&mut c), 8);

    ok(&mut c, &["DEL", &t("r1")]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r3", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r9"));

    // Redisson's read lock sets its timeout key from Lua.
    let script = "return redis.call('set', KEYS[1], '1', 'px', ARGV[1])";
    ok(&mut c, &["EVAL", script, "1", &t("r4"), "90000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r5", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r4"));

    ok(&mut c, &["PERSIST", &t("r4")]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r6", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r9"));
}

#[test]
fn foreign_writes_to_the_lock_hash_drop_the_entry() {
    let s = Server::start();
    let mut c = s.conn();
    ten_readers_one_released(&mut c);
    ok(&mut c, &["HSET", "doc", "r1", "2"]);
    assert_eq!(indexed(&mut c), 0);
    ok(&mut c, &["SET", &names::read_timeout("doc", "r1", 2), "1", "PX", "70000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r9", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &names::read_timeout("doc", "r1", 2));
}

/// A renewal refreshes the holds that still exist; one that expired stays gone, in the index
/// as in the keyspace, so the last unlock frees the lock.
#[test]
fn renewing_an_owner_does_not_revive_its_expired_hold() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "a", "100"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "b", "3000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "c", "3000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "c", "READ", "1"]), Value::Int(0));
    assert_eq!(indexed(&mut c), 2);
    sleep(Duration::from_millis(150));
    assert_eq!(ok(&mut c, &["RWLOCK.RENEW", "doc", "a", "60000"]), Value::Int(1));
    assert_eq!(pttl(&mut c, &t("a")), -2);
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "b", "READ", "1"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[("redisson_rwlock:{doc}", "0")]));
}

#[test]
fn reload_flush_and_swapdb_drop_everything() {
    let s = Server::start();
    let mut c = s.conn();
    ten_readers_one_released(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(indexed(&mut c), 0);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r9", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r8"));
    assert_eq!(indexed(&mut c), 8);
    ok(&mut c, &["SWAPDB", "0", "1"]);
    assert_eq!(indexed(&mut c), 0);
    ok(&mut c, &["SWAPDB", "0", "1"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r8", "READ", "1"]);
    assert_eq!(indexed(&mut c), 7);
    ok(&mut c, &["FLUSHALL"]);
    assert_eq!(indexed(&mut c), 0);
}

/// `MODULE UNLOAD` then `MODULE LOAD`: the module may come back with its memory as it left it,
/// but it saw none of the writes made in between, so it trusts nothing it remembered.
#[test]
fn a_reloaded_module_forgets_the_index_it_had() {
    let s = Server::start();
    let mut c = s.conn();
    ten_readers_one_released(&mut c);
    ok(&mut c, &["MODULE", "UNLOAD", "lockmod"]);
    // Unseen by the module: r1's hold now outlives every other.
    ok(&mut c, &["PEXPIRE", &t("r1"), "60000"]);
    let path = module_path();
    ok(&mut c, &["MODULE", "LOAD", path.to_str().expect("module path")]);
    assert_eq!(indexed(&mut c), 0);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(0));
    assert_follows(&mut c, &t("r1"));
    // Hash events are subscribed again with the new index entry: a foreign write drops it.
    assert_eq!(indexed(&mut c), 8);
    ok(&mut c, &["HSET", "doc", "r1", "1"]);
    assert_eq!(indexed(&mut c), 0);
}

/// The filter's cheap tests before any lookup (a bit per watched name, the first byte of an
/// indexed lock's timeout keys, a bit per command that names keys after `argv[1]`) miss no
/// timeout key: not one named later in a command, nor one of a lock whose name has a hash tag
/// (its timeout keys start with the name, not `{`); and writes to other keys keep the entry.
#[test]
fn timeout_keys_named_later_or_of_a_tagged_lock_drop_the_entry_and_other_keys_keep_it() {
    let s = Server::start();
    let mut c = s.conn();
    let lock = "app{doc}";
    let t = |owner: &str| names::read_timeout(lock, owner, 1);
    assert!(t("r1").starts_with("app{doc}:"), "{}", t("r1"));
    for i in 0..6 {
        ok(&mut c, &["RWLOCK.RLOCK", lock, &format!("r{i}"), &(10_000 + i * 1000).to_string()]);
    }
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", lock, "r0", "READ", "1"]), Value::Int(0));
    assert_eq!(indexed(&mut c), 5);

    ok(&mut c, &["DEL", "other:1", "other:2", "app{other}"]);
    ok(&mut c, &["MSET", "other:1", "1", "other:2", "2"]);
    ok(&mut c, &["SET", "app:{doc}:r1:rwlock_timeout:1", "1"]);
    assert_eq!(indexed(&mut c), 5, "writes to other keys keep the entry");

    ok(&mut c, &["PEXPIRE", &t("r1"), "60000"]);
    assert_eq!(indexed(&mut c), 0, "a PEXPIRE of a tagged lock's timeout key drops the entry");
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", lock, "r2", "READ", "1"]), Value::Int(0));
    assert_near(pttl(&mut c, lock), 60_000, 100);
    assert_eq!(indexed(&mut c), 4);

    ok(&mut c, &["DEL", "other:1", &t("r1")]);
    assert_eq!(indexed(&mut c), 0, "a DEL naming the timeout key second drops the entry");
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", lock, "r3", "READ", "1"]), Value::Int(0));
    assert_near(pttl(&mut c, lock), 15_000, 200);
    assert_eq!(indexed(&mut c), 3, "r1 (its hash field stays), r4 and r5");

    ok(&mut c, &["MSET", "other:1", "1", &t("r5"), "1"]);
    assert_eq!(indexed(&mut c), 0, "an MSET naming the timeout key later drops the entry");
}
