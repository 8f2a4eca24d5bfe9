//! SEMAPHORE.* against a real redis-server (issue 26): replies, the keyspace (`GET`, `PTTL`),
//! what a subscriber receives, bad input, ACL, a replica and `DEBUG RELOAD`.

use crate::common;

use common::acl::{conn_as, denied, snapshot, user};
use common::*;

const CH: &str = "redisson_sc:{s}";

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn trysetpermits_sets_an_absent_semaphore_once_and_publishes_the_permits() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "3"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "9"]), Value::Int(0));
    assert_eq!(get(&mut c, "s").as_deref(), Some("3"));
    assert_eq!(pttl(&mut c, "s"), -1);
    assert_eq!(sub.take(), msgs(&[(CH, "3")]));
    assert_eq!(ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "t", "2", "LEASE", "60000"]), Value::Int(1));
    assert_near(pttl(&mut c, "t"), 60_000, 1_000);
}

#[test]
fn acquire_takes_permits_while_enough_are_available_and_publishes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "3", "LEASE", "60000"]);
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "2"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "2"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["SEMAPHORE.AVAILABLE", "s"]), Value::Int(1));
    assert_eq!(get(&mut c, "s").as_deref(), Some("1"));
    assert_near(pttl(&mut c, "s"), 60_000, 1_000);
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "none", "1"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["SEMAPHORE.AVAILABLE", "none"]), Value::Int(0));
    assert_eq!(sub.take(), msgs(&[]));
    assert_eq!(keys(&mut c), ["s"]);
}

#[test]
fn release_and_addpermits_publish_the_count_and_drain_takes_everything() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["SEMAPHORE.RELEASE", "s", "2"]), Value::Int(2));
    ok(&mut c, &["PEXPIRE", "s", "60000"]);
    assert_eq!(ok(&mut c, &["SEMAPHORE.RELEASE", "s", "3"]), Value::Int(5));
    assert_near(pttl(&mut c, "s"), 60_000, 1_000);
    assert_eq!(ok(&mut c, &["SEMAPHORE.ADDPERMITS", "s", "-7"]), Value::Int(-2));
    assert_eq!(pttl(&mut c, "s"), -1, "addPermits writes with SET, as Redisson");
    assert_eq!(ok(&mut c, &["SEMAPHORE.ADDPERMITS", "s", "10"]), Value::Int(8));
    assert_eq!(ok(&mut c, &["SEMAPHORE.DRAIN", "s"]), Value::Int(8));
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    assert_eq!(ok(&mut c, &["SEMAPHORE.DRAIN", "none"]), Value::Int(0));
    assert_eq!(sub.take(), msgs(&[(CH, "2"), (CH, "5"), (CH, "-2"), (CH, "8")]));
    assert_eq!(keys(&mut c), ["s"]);
}

#[test]
fn the_writes_fire_the_keyspace_events_of_redissons_commands() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let sub = s.subscriber();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "3"]);
    ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]);
    ok(&mut c, &["SEMAPHORE.RELEASE", "s", "1"]);
    let events: Vec<(String, String)> =
        sub.take().into_iter().filter(|(ch, _)| ch.starts_with("__keyspace@0__:")).collect();
    let ks = "__keyspace@0__:s";
    // `DECRBY` fires `incrby` in Redis and Valkey (one function serves INCR, INCRBY, DECR and
    // DECRBY), in Redisson's Lua as on a replica replaying the module's `DECRBY`.
    assert_eq!(events, msgs(&[(ks, "set"), (ks, "incrby"), (ks, "incrby")]));
}

#[test]
fn bad_input_gets_an_error_and_writes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "s", "5"]);
    ok(&mut c, &["SET", "text", "abc"]);
    ok(&mut c, &["SET", "max", &i64::MAX.to_string()]);
    ok(&mut c, &["HSET", "h", "f", "1"]);
    let before = snapshot(&mut c);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["SEMAPHORE.ACQUIRE", "s", "-1"], "ERR permits must be a non-negative integer"),
        (&["SEMAPHORE.ACQUIRE", "s", "1.5"], "ERR value is not an integer or out of range"),
        (&["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "-1"], "ERR timeout must be a non-negative integer (ms; 0 waits without a limit)"),
        (&["SEMAPHORE.ACQUIRE", "s", "1", "WAIT"], "ERR syntax error"),
        (&["SEMAPHORE.RELEASE", "s", "-2"], "ERR permits must be a non-negative integer"),
        (&["SEMAPHORE.TRYSETPERMITS", "n", "1", "LEASE", "0"], "ERR lease must be a positive integer"),
        (&["SEMAPHORE.TRYSETPERMITS", "n", "1", "TTL", "5"], "ERR syntax error"),
        (&["SEMAPHORE.TRYSETPERMITS", "n", "-1"], "ERR permits must be a non-negative integer"),
        (&["SEMAPHORE.ADDPERMITS", "s", "x"], "ERR value is not an integer or out of range"),
        (&["SEMAPHORE.ACQUIRE", "text", "1"], "ERR value is not an integer or out of range"),
        (&["SEMAPHORE.RELEASE", "text", "1"], "ERR value is not an integer or out of range"),
        (&["SEMAPHORE.DRAIN", "text"], "ERR value is not an integer or out of range"),
        (&["SEMAPHORE.RELEASE", "max", "1"], "ERR increment or decrement would overflow"),
        (&["SEMAPHORE.ADDPERMITS", "max", "1"], "ERR increment or decrement would overflow"),
        (&["SEMAPHORE.AVAILABLE", "h"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["SEMAPHORE.RELEASE", "h", "1"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["SEMAPHORE.RELEASE", "s"], "ERR wrong number of arguments for 'semaphore.release' command"),
        (&["SEMAPHORE.AVAILABLE", "s", "x"], "ERR wrong number of arguments for 'semaphore.available' command"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before);
}

#[test]
fn a_user_who_may_not_publish_on_the_channel_gets_noperm_and_nothing_is_written() {
    let s = Server::start();
    let mut admin = s.conn();
    ok(&mut admin, &["SEMAPHORE.TRYSETPERMITS", "s", "1"]);
    user(&mut admin, "app", &["~*", "&other", "+@all"]);
    let mut c = conn_as(&s, "app");
    let no = "NOPERM No permissions to access the 'redisson_sc:{s}' channel";
    denied(&mut admin, &mut c, &["SEMAPHORE.RELEASE", "s", "1"], no);
    denied(&mut admin, &mut c, &["SEMAPHORE.ADDPERMITS", "s", "1"], no);
    denied(
        &mut admin,
        &mut c,
        &["SEMAPHORE.TRYSETPERMITS", "new", "1"],
        "NOPERM No permissions to access the 'redisson_sc:{new}' channel",
    );
    // Taking and draining publish nothing: allowed.
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]), Value::Int(1));
    // A key the user may only read: the key spec makes Redis refuse a write.
    user(&mut admin, "ro", &["%R~*", "&*", "+@all"]);
    let mut r = conn_as(&s, "ro");
    assert_eq!(ok(&mut r, &["SEMAPHORE.AVAILABLE", "s"]), Value::Int(0));
    // The server's own wording: Redis 7.0's, or that of Redis 7.2+ and Valkey.
    denied(&mut admin, &mut r, &["SEMAPHORE.RELEASE", "s", "1"], server_version::key_denied());
}

/// The state a replica and a reload must reproduce: the value and the absolute expiry.
fn state(c: &mut redis::Connection) -> Vec<(String, Option<String>, i64)> {
    ["s", "t", "u"].iter().map(|k| (k.to_string(), get(c, k), pexpiretime(c, k))).collect()
}

#[test]
fn a_replica_and_a_reload_have_the_same_semaphores_with_the_same_absolute_expiry() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "4", "LEASE", "600000"]);
    ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "3"]);
    ok(&mut c, &["SEMAPHORE.RELEASE", "s", "2"]);
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "t", "9"]);
    ok(&mut c, &["SEMAPHORE.DRAIN", "t"]);
    ok(&mut c, &["SEMAPHORE.ADDPERMITS", "u", "-3"]);
    wait_replica(&mut c);
    let want = state(&mut c);
    assert_eq!(want[0].1.as_deref(), Some("3"));
    assert_eq!(state(&mut replica.conn()), want);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(state(&mut c), want);
}

#[test]
fn info_lockmod_counts_synchronizer_calls() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "1"]);
    ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]);
    ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]);
    let info: String = redis::cmd("INFO").arg("lockmod").query(&mut c).expect("INFO");
    for line in
        ["lockmod_sync_calls:3", "lockmod_sync_granted:1", "lockmod_sync_refused:1", "lockmod_sync_blocked_now:0"]
    {
        assert!(info.contains(line), "{line} in {info}");
    }
    assert!(info.contains("lockmod_acquired:0"), "the locks' fields are unchanged: {info}");
}
