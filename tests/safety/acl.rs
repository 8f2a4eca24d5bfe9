//! ACL: every key and channel a command derives from the lock name is checked against the
//! caller, before anything is written; a client parked with BLOCK is checked again at its
//! grant; the key specs and command flags tell Redis the real access.

use crate::common;

use std::thread;
use std::time::Duration;

use common::acl::{conn_as, denied, snapshot, user};
use common::parked::wait_blocked;
use common::*;

/// Keys and channels under `app:` only: the derived names (`redisson_...:{app:x}`,
/// `{app:x}:...`) are outside them.
const TENANT: &[&str] = &["~app:*", "&app:*", "+@all"];
/// Patterns that cover the derived names too: docs/configuration.md's recipe.
const COVERED: &[&str] = &["~app:*", "~*{app:*}*", "&*{app:*}*", "+@all"];

fn key(name: &str) -> String {
    format!("NOPERM No permissions to access the '{name}' key")
}

fn channel(name: &str) -> String {
    format!("NOPERM No permissions to access the '{name}' channel")
}

#[test]
fn a_tenant_is_refused_every_derived_key_and_channel_outside_its_patterns_and_nothing_changes() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "t", TENANT);
    let mut t = conn_as(&s, "t");
    let sub = s.subscriber();
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    ok(&mut admin, &["RWLOCK.RLOCK", "app:y", "r1", "30000"]);
    ok(&mut admin, &["FAIRLOCK.ACQUIRE", "app:z", "t1", "30000", "5000"]);
    ok(&mut admin, &["FAIRLOCK.ACQUIRE", "app:z", "t2", "30000", "5000"]);
    let (token, latch) = ("redisson_lock_token:{app:x}", "redisson_unlock_latch:{app:x}:r1");
    let (lock_ch, rw_ch, queue) =
        ("redisson_lock__channel:{app:x}", "redisson_rwlock:{app:y}", "redisson_lock_queue:{app:z}");
    let cases: &[(&[&str], String)] = &[
        (&["LOCK.ACQUIRE", "app:n", "o", "30000", "TOKEN"], key("redisson_lock_token:{app:n}")),
        (&["RWLOCK.WLOCK", "app:n", "o", "30000", "TOKEN"], key("redisson_lock_token:{app:n}")),
        (&["FAIRLOCK.ACQUIRE", "app:n", "o", "30000", "5000", "TOKEN"], key("redisson_lock_token:{app:n}")),
        // A free name: its fair queue is read (one name, one kind).
        (&["LOCK.ACQUIRE", "app:n", "o", "30000"], key("redisson_lock_queue:{app:n}")),
        (&["RWLOCK.WLOCK", "app:n", "o", "30000"], key("redisson_lock_queue:{app:n}")),
        (&["LOCK.UNLOCK", "app:x", "o", "30000"], channel(lock_ch)),
        (&["LOCK.UNLOCK", "app:x", "o", "30000", "LATCH", "r1", "1000"], channel(lock_ch)),
        (&["LOCK.FORCEUNLOCK", "app:x"], channel(lock_ch)),
        (&["LOCK.INFO", "app:x"], key(token)),
        (&["RWLOCK.RLOCK", "app:y", "r1", "30000"], key("{app:y}:r1:rwlock_timeout:2")),
        (&["RWLOCK.RLOCK", "app:n", "r1", "30000"], key("{app:n}:r1:rwlock_timeout:1")),
        (&["RWLOCK.UNLOCK", "app:y", "r1", "READ", "30000"], channel(rw_ch)),
        (&["RWLOCK.RENEW", "app:y", "r1", "30000"], key("{app:y}:r1:rwlock_timeout:1")),
        (&["RWLOCK.FORCEUNLOCK", "app:y", "READ"], channel(rw_ch)),
        (&["FAIRLOCK.ACQUIRE", "app:z", "t3", "30000", "5000"], key(queue)),
        (&["FAIRLOCK.ACQUIRE", "app:z", "t3", "30000", "5000", "NOQUEUE"], key(queue)),
        (&["FAIRLOCK.UNLOCK", "app:z", "t1", "30000"], key(queue)),
        (&["FAIRLOCK.CANCEL", "app:z", "t2", "5000"], key(queue)),
        (&["FAIRLOCK.FORCEUNLOCK", "app:z"], key(queue)),
    ];
    for (args, error) in cases {
        denied(&mut admin, &mut t, args, error);
    }
    // The channels allowed, the latch and the fair waiter's channel are still outside.
    user(&mut admin, "t2", &["~app:*", "~redisson_lock_*{app:z}", "&*", "+@all"]);
    let mut t2 = conn_as(&s, "t2");
    denied(&mut admin, &mut t2, &["LOCK.UNLOCK", "app:x", "o", "30000", "LATCH", "r1", "1000"], key(latch));
    user(&mut admin, "t3", &["~app:*", "~redisson_lock_*{app:z}", "&app:*", "+@all"]);
    let mut t3 = conn_as(&s, "t3");
    denied(
        &mut admin,
        &mut t3,
        &["FAIRLOCK.UNLOCK", "app:z", "t1", "30000"],
        channel("redisson_lock__channel:{app:z}:t2"),
    );
    denied(&mut admin, &mut t3, &["FAIRLOCK.FORCEUNLOCK", "app:z"], channel("redisson_lock__channel:{app:z}:t2"));
    // What touches only the lock key works: renewals, queries, acquires of a held name.
    assert_eq!(ok(&mut t, &["LOCK.RENEW", "app:x", "o", "30000"]), Value::Int(1));
    assert_eq!(ok(&mut t, &["LOCK.ACQUIRE", "app:x", "o", "30000"]), Value::Nil);
    assert_eq!(ok(&mut t, &["LOCK.HOLDS", "app:x", "o"]), Value::Int(2));
    assert_eq!(ok(&mut t, &["RWLOCK.HOLDS", "app:y", "r1"]), Value::Array(vec![Value::Int(1), Value::Int(0)]));
    assert_eq!(ok(&mut t, &["FAIRLOCK.HOLDS", "app:z", "t1"]), Value::Int(1));
    assert!(matches!(ok(&mut t, &["RWLOCK.WLOCK", "app:y", "o", "30000"]), Value::Int(_)));
    // Read access to the fair queue and deadlines is enough to acquire a free name.
    user(&mut admin, "t4", &[TENANT, &["%R~redisson_lock_queue:{app:*}", "%R~redisson_lock_timeout:{app:*}"]].concat());
    let mut t4 = conn_as(&s, "t4");
    assert_eq!(ok(&mut t4, &["LOCK.ACQUIRE", "app:n", "o", "30000"]), Value::Nil);
    assert_eq!(ok(&mut t4, &["RWLOCK.WLOCK", "app:w", "o", "30000"]), Value::Nil);
    denied(
        &mut admin,
        &mut t4,
        &["FAIRLOCK.ACQUIRE", "app:v", "o", "30000", "5000"],
        key("redisson_lock_queue:{app:v}"),
    );
    assert!(sub.take().is_empty());
}

#[test]
fn a_read_hold_cannot_overwrite_a_key_outside_the_tenants_patterns() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "t", TENANT);
    let mut t = conn_as(&s, "t");
    ok(&mut admin, &["SET", "{app:q}:victim:rwlock_timeout:1", "data"]);
    denied(&mut admin, &mut t, &["RWLOCK.RLOCK", "app:q", "victim", "30000"], key("{app:q}:victim:rwlock_timeout:1"));
    assert_eq!(ok(&mut admin, &["GET", "{app:q}:victim:rwlock_timeout:1"]), Value::BulkString(b"data".to_vec()));
    assert_eq!(int(&ok(&mut admin, &["EXISTS", "app:q"])), 0);
}

#[test]
fn the_same_commands_from_a_script_are_checked_as_the_scripts_caller() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "t", TENANT);
    let mut t = conn_as(&s, "t");
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    let before = snapshot(&mut admin);
    let script = "return redis.call('LOCK.UNLOCK', KEYS[1], 'o', '30000')";
    let e = call(&mut t, &["EVAL", script, "1", "app:x"]).expect_err("denied");
    assert!(e.contains("No permissions to access the 'redisson_lock__channel:{app:x}' channel"), "{e}");
    assert_eq!(snapshot(&mut admin), before);
    // The default user, unrestricted, is not held back.
    assert_eq!(ok(&mut admin, &["EVAL", script, "1", "app:x"]), Value::Int(1));
}

#[test]
fn a_tenant_whose_patterns_cover_the_derived_names_uses_every_command() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "t", COVERED);
    let mut t = conn_as(&s, "t");
    let sub = s.subscriber();
    let run = |t: &mut redis::Connection, args: &[&str]| ok(t, args);
    let (grant, one) = (Value::Nil, Value::Int(1));
    assert_eq!(run(&mut t, &["LOCK.ACQUIRE", "app:x", "o", "30000"]), grant);
    assert_eq!(run(&mut t, &["LOCK.ACQUIRE", "app:x", "o", "30000"]), grant);
    assert_eq!(run(&mut t, &["LOCK.RENEW", "app:x", "o", "30000"]), one);
    assert_eq!(run(&mut t, &["LOCK.UNLOCK", "app:x", "o", "30000", "LATCH", "r1", "60000"]), Value::Int(0));
    assert_eq!(run(&mut t, &["LOCK.UNLOCK", "app:x", "o", "30000", "LATCH", "r2", "60000"]), one);
    let fenced = |t| Value::Array(vec![Value::Int(-1), Value::Int(t)]);
    assert_eq!(run(&mut t, &["LOCK.ACQUIRE", "app:f", "o", "30000", "TOKEN"]), fenced(1));
    assert_eq!(run(&mut t, &["LOCK.FORCEUNLOCK", "app:f"]), one);
    assert_eq!(run(&mut t, &["RWLOCK.RLOCK", "app:y", "r1", "30000"]), grant);
    assert_eq!(run(&mut t, &["RWLOCK.RLOCK", "app:y", "r2", "30000"]), grant);
    assert_eq!(run(&mut t, &["RWLOCK.RENEW", "app:y", "r1", "30000"]), one);
    assert_eq!(run(&mut t, &["RWLOCK.UNLOCK", "app:y", "r1", "READ", "30000"]), Value::Int(0));
    assert_eq!(run(&mut t, &["RWLOCK.UNLOCK", "app:y", "r2", "READ", "30000"]), one);
    assert_eq!(run(&mut t, &["RWLOCK.WLOCK", "app:y", "w", "30000"]), grant);
    assert_eq!(run(&mut t, &["RWLOCK.UNLOCK", "app:y", "w", "WRITE", "30000"]), one);
    assert_eq!(run(&mut t, &["RWLOCK.RLOCK", "app:y", "r1", "30000"]), grant);
    assert_eq!(run(&mut t, &["RWLOCK.FORCEUNLOCK", "app:y", "READ"]), one);
    assert_eq!(run(&mut t, &["FAIRLOCK.ACQUIRE", "app:z", "t1", "30000", "5000"]), grant);
    assert!(matches!(run(&mut t, &["FAIRLOCK.ACQUIRE", "app:z", "t2", "30000", "5000"]), Value::Int(_)));
    assert!(matches!(run(&mut t, &["FAIRLOCK.ACQUIRE", "app:z", "t3", "30000", "5000"]), Value::Int(_)));
    assert_eq!(run(&mut t, &["FAIRLOCK.CANCEL", "app:z", "t3", "5000"]), one);
    assert!(matches!(run(&mut t, &["LOCK.INFO", "app:z"]), Value::Array(_)));
    assert_eq!(run(&mut t, &["FAIRLOCK.UNLOCK", "app:z", "t1", "30000"]), one);
    assert_eq!(run(&mut t, &["FAIRLOCK.ACQUIRE", "app:z", "t2", "30000", "5000"]), grant);
    assert_eq!(run(&mut t, &["FAIRLOCK.FORCEUNLOCK", "app:z"]), one);
    assert_eq!(
        sub.take_n(6, Duration::from_secs(2)),
        msgs(&[
            ("redisson_lock__channel:{app:x}", "0"),
            ("redisson_lock__channel:{app:f}", "0"),
            ("redisson_rwlock:{app:y}", "0"),
            ("redisson_rwlock:{app:y}", "1"),
            ("redisson_rwlock:{app:y}", "0"),
            ("redisson_lock__channel:{app:z}:t2", "0"),
        ])
    );
    // Redisson leaves a force-unlocked read hold's timeout key to expire; so do we.
    let left = ["redisson_lock_token:{app:f}", "redisson_unlock_latch:{app:x}:r1", "redisson_unlock_latch:{app:x}:r2"];
    assert_eq!(keys(&mut admin), [&left[..], &["{app:y}:r1:rwlock_timeout:1"]].concat());
}

#[test]
fn a_write_only_user_cannot_acquire_and_learn_the_ttl() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "w", &["%W~app:*", "&*", "+@all"]);
    let mut w = conn_as(&s, "w");
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "holder", "30000"]);
    let before = snapshot(&mut admin);
    for cmd in [
        &["LOCK.ACQUIRE", "app:x", "o", "30000"][..],
        &["RWLOCK.WLOCK", "app:x", "o", "30000"],
        &["LOCK.INFO", "app:x"],
    ] {
        let e = call(&mut w, cmd).expect_err("a write-only user may not read the lock");
        assert!(e.starts_with("NOPERM"), "{cmd:?}: {e}");
    }
    assert_eq!(snapshot(&mut admin), before);
    // Renewing reads nothing it replies: write access is enough.
    assert_eq!(ok(&mut w, &["LOCK.RENEW", "app:x", "other", "30000"]), Value::Int(0));
}

/// Parks `args` on a connection of user `name`; the handle returns the reply.
fn park(s: &Server, name: &str, args: &[&str]) -> thread::JoinHandle<Result<Value, String>> {
    let mut c = conn_as(s, name);
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    thread::spawn(move || call(&mut c, &args.iter().map(String::as_str).collect::<Vec<_>>()))
}

#[test]
fn a_parked_client_whose_user_lost_the_key_gets_noperm_at_its_grant_and_nothing_is_written() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "p", COVERED);
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "holder", "30000"]);
    ok(&mut admin, &["RWLOCK.WLOCK", "app:y", "holder", "30000"]);
    let lock = park(&s, "p", &["LOCK.ACQUIRE", "app:x", "w", "30000", "BLOCK", "0"]);
    let read = park(&s, "p", &["RWLOCK.RLOCK", "app:y", "r", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 2);
    ok(&mut admin, &["ACL", "SETUSER", "p", "resetkeys"]);
    assert_eq!(ok(&mut admin, &["LOCK.UNLOCK", "app:x", "holder", "30000"]), Value::Int(1));
    assert_eq!(ok(&mut admin, &["RWLOCK.UNLOCK", "app:y", "holder", "WRITE", "30000"]), Value::Int(1));
    assert_eq!(lock.join().expect("thread"), Err(key("app:x")));
    assert_eq!(read.join().expect("thread"), Err(key("app:y")));
    assert_eq!(keys(&mut admin), Vec::<String>::new());
}

/// The same when another client frees the lock with a plain `DEL`: the poll of parked locks
/// serves it, as the parked client's user.
#[test]
fn a_parked_client_whose_user_lost_the_key_gets_noperm_when_the_poll_sees_a_foreign_release() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "p", COVERED);
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "holder", "30000"]);
    let lock = park(&s, "p", &["LOCK.ACQUIRE", "app:x", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 1);
    ok(&mut admin, &["ACL", "SETUSER", "p", "resetkeys"]);
    assert_eq!(ok(&mut admin, &["DEL", "app:x"]), Value::Int(1));
    assert_eq!(lock.join().expect("thread"), Err(key("app:x")));
    assert_eq!(keys(&mut admin), Vec::<String>::new());
}

#[test]
fn a_covered_tenant_parked_with_block_is_granted_as_any_client() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "p", COVERED);
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "holder", "30000"]);
    ok(&mut admin, &["RWLOCK.WLOCK", "app:y", "holder", "30000"]);
    ok(&mut admin, &["FAIRLOCK.ACQUIRE", "app:z", "holder", "30000", "5000"]);
    let lock = park(&s, "p", &["LOCK.ACQUIRE", "app:x", "w", "30000", "BLOCK", "0", "TOKEN"]);
    let read = park(&s, "p", &["RWLOCK.RLOCK", "app:y", "r", "30000", "BLOCK", "0"]);
    let fair = park(&s, "p", &["FAIRLOCK.ACQUIRE", "app:z", "f", "30000", "5000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 3);
    ok(&mut admin, &["LOCK.UNLOCK", "app:x", "holder", "30000"]);
    ok(&mut admin, &["RWLOCK.UNLOCK", "app:y", "holder", "WRITE", "30000"]);
    ok(&mut admin, &["FAIRLOCK.UNLOCK", "app:z", "holder", "30000"]);
    assert_eq!(lock.join().expect("thread"), Ok(Value::Array(vec![Value::Int(-1), Value::Int(1)])));
    assert_eq!(read.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(fair.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut admin, "app:x"), map(&[("w", "1")]));
    assert_eq!(hgetall(&mut admin, "app:y"), map(&[("mode", "read"), ("r", "1")]));
    assert_eq!(hgetall(&mut admin, "app:z"), map(&[("f", "1")]));
}

#[test]
fn a_parked_fair_waiter_whose_user_lost_the_queue_gets_noperm() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "p", COVERED);
    ok(&mut admin, &["FAIRLOCK.ACQUIRE", "app:z", "holder", "30000", "5000"]);
    let w = park(&s, "p", &["FAIRLOCK.ACQUIRE", "app:z", "w", "30000", "5000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 1);
    // Its place is kept alive on its behalf, until its user may no longer write the queue.
    ok(&mut admin, &["ACL", "SETUSER", "p", "resetkeys", "~app:*"]);
    assert_eq!(w.join().expect("thread"), Err(key("redisson_lock_queue:{app:z}")));
    assert_eq!(hgetall(&mut admin, "app:z"), map(&[("holder", "1")]));
}

#[test]
fn a_parked_client_whose_user_was_deleted_is_not_granted() {
    for rules in [COVERED, &["~*", "&*", "+@all"]] {
        parked_client_of_a_deleted_user_is_not_granted(rules);
    }
}

fn parked_client_of_a_deleted_user_is_not_granted(rules: &[&str]) {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "p", rules);
    ok(&mut admin, &["LOCK.ACQUIRE", "app:x", "holder", "30000"]);
    let w = park(&s, "p", &["LOCK.ACQUIRE", "app:x", "w", "30000", "BLOCK", "0"]);
    wait_blocked(&mut admin, 1);
    // In one transaction: the user goes, then the lock is released while its client (closed
    // by DELUSER only after the command) is still parked.
    ok(&mut admin, &["MULTI"]);
    ok(&mut admin, &["ACL", "DELUSER", "p"]);
    ok(&mut admin, &["LOCK.UNLOCK", "app:x", "holder", "30000"]);
    assert_eq!(ok(&mut admin, &["EXEC"]), Value::Array(vec![Value::Int(1), Value::Int(1)]));
    let reply = w.join().expect("thread");
    assert!(reply.is_err(), "the waiter was answered {reply:?}");
    assert_eq!(keys(&mut admin), Vec::<String>::new());
}

#[test]
fn a_user_who_loses_a_channel_is_refused_at_once_even_after_succeeding() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "u", &["~*", "&*", "+@all"]);
    let mut u = conn_as(&s, "u");
    ok(&mut u, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    ok(&mut u, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    assert_eq!(ok(&mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"]), Value::Int(0));
    ok(&mut admin, &["ACL", "SETUSER", "u", "resetchannels", "&app:*"]);
    denied(&mut admin, &mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"], channel("redisson_lock__channel:{app:x}"));
    // A change queued in a transaction counts once the transaction runs.
    ok(&mut admin, &["ACL", "SETUSER", "u", "&*"]);
    assert_eq!(ok(&mut u, &["LOCK.ACQUIRE", "app:x", "o", "30000"]), Value::Nil);
    ok(&mut admin, &["MULTI"]);
    ok(&mut admin, &["ACL", "SETUSER", "u", "resetchannels"]);
    assert_eq!(ok(&mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"]), Value::Int(0));
    ok(&mut admin, &["EXEC"]);
    denied(&mut admin, &mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"], channel("redisson_lock__channel:{app:x}"));
}

#[test]
fn with_acl_renamed_a_change_through_the_new_name_is_seen_at_once() {
    let s = Server::start_with(true, &["--rename-command", "ACL", "XACL"]);
    let mut admin = s.conn();
    ok(&mut admin, &["XACL", "SETUSER", "u", "on", "nopass", "~*", "&*", "+@all"]);
    let mut u = conn_as(&s, "u");
    ok(&mut u, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    ok(&mut u, &["LOCK.ACQUIRE", "app:x", "o", "30000"]);
    assert_eq!(ok(&mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"]), Value::Int(0));
    ok(&mut admin, &["XACL", "SETUSER", "u", "resetchannels"]);
    denied(&mut admin, &mut u, &["LOCK.UNLOCK", "app:x", "o", "30000"], channel("redisson_lock__channel:{app:x}"));
    assert!(s.log().contains("ACL or EXEC is renamed"), "{}", s.log());
}

#[test]
fn a_denied_key_or_channel_is_recorded_in_the_acl_log() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "t", TENANT);
    let mut t = conn_as(&s, "t");
    ok(&mut admin, &["ACL", "LOG", "RESET"]);
    call(&mut t, &["LOCK.ACQUIRE", "app:x", "o", "30000", "TOKEN"]).expect_err("denied");
    let log = ok(&mut admin, &["ACL", "LOG", "1"]);
    let text = format!("{log:?}");
    for part in ["\"key\"", "redisson_lock_token:{app:x}", "\"t\"", "module"] {
        assert!(text.contains(part), "{part} not in {text}");
    }
}

fn info(c: &mut redis::Connection, name: &str) -> Vec<Value> {
    match ok(c, &["COMMAND", "INFO", name]) {
        Value::Array(mut a) => match a.remove(0) {
            Value::Array(i) => i,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

/// The words of an array reply, lowercase, without a category's `@`.
fn words(v: &Value) -> Vec<String> {
    let word = |w: &Value| match w {
        Value::SimpleString(s) => s.clone(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other:?}"),
    };
    match v {
        Value::Array(a) => a.iter().map(|w| word(w).trim_start_matches('@').to_lowercase()).collect(),
        Value::Set(a) => a.iter().map(|w| word(w).trim_start_matches('@').to_lowercase()).collect(),
        other => panic!("{other:?}"),
    }
}

/// (major, minor) of the server as `INFO` reports it (Valkey reports the Redis 7.2.4 it is
/// compatible with).
fn server_version(c: &mut redis::Connection) -> (u32, u32) {
    let info: String = redis::cmd("INFO").arg("server").query(c).expect("INFO");
    let v = info.lines().find_map(|l| l.strip_prefix("redis_version:")).expect("redis_version").trim().to_string();
    let mut parts = v.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn acquire_commands_are_blocking_and_not_fast_with_the_categories_redis_gives_blpop() {
    let s = Server::start();
    let mut c = s.conn();
    for name in ["LOCK.ACQUIRE", "RWLOCK.RLOCK", "RWLOCK.WLOCK", "FAIRLOCK.ACQUIRE"] {
        let i = info(&mut c, name);
        let flags = words(&i[2]);
        assert!(flags.contains(&"blocking".into()) && !flags.contains(&"fast".into()), "{name}: {flags:?}");
        // Redis 7.0 gives module commands no ACL categories; 7.2+ and Valkey take ours.
        let cats = words(&i[6]);
        if server_version(&mut c) < (7, 2) {
            assert!(cats.is_empty(), "{name}: {cats:?}");
        } else {
            assert_eq!(cats, ["write", "slow", "blocking"], "{name}");
        }
    }
    let flags = words(&info(&mut c, "LOCK.UNLOCK")[2]);
    assert!(flags.contains(&"fast".into()) && !flags.contains(&"blocking".into()), "{flags:?}");
}
