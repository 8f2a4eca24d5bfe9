//! Command metadata for Redis 7: `COMMAND DOCS`, `COMMAND GETKEYS` and `COMMAND INFO` for every
//! registered command of the module.

use crate::common;

use common::*;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => panic!("expected an array, got {other:?}"),
    }
}

/// A field of a RESP2 flat field/value array.
fn get(v: &Value, name: &str) -> Value {
    let a = list(v);
    a.chunks(2).find(|p| text(&p[0]) == name).unwrap_or_else(|| panic!("no {name} in {v:?}"))[1].clone()
}

fn module_commands(c: &mut redis::Connection) -> Vec<String> {
    let mut names: Vec<String> =
        redis::cmd("COMMAND").arg("LIST").arg("FILTERBY").arg("MODULE").arg("lockmod").query(c).expect("LIST");
    // Registered in lowercase, as Redis' own commands.
    names.iter_mut().for_each(|n| *n = n.to_uppercase());
    // The module's own on Redis 7.2, not a client's (tests/grants/answer_order.rs checks it), and
    // the one command without a key (its own test below).
    names.retain(|n| n != "LOCKMOD.HANDOVER" && n != "LOCK.CONTENDED");
    names.sort();
    names
}

/// A valid call of each command, for `COMMAND GETKEYS`.
fn example(name: &str) -> Vec<&'static str> {
    match name {
        "LOCK.INFO" | "LOCK.FORCEUNLOCK" | "FAIRLOCK.FORCEUNLOCK" => vec!["k"],
        "RWLOCK.FORCEUNLOCK" => vec!["k", "READ"],
        "LOCK.HOLDS" | "RWLOCK.HOLDS" | "FAIRLOCK.HOLDS" => vec!["k", "o"],
        "RWLOCK.UNLOCK" => vec!["k", "o", "WRITE", "1000"],
        "FAIRLOCK.ACQUIRE" => vec!["k", "o", "1000", "1000"],
        // The synchronizers (issue 26).
        "SEMAPHORE.DRAIN" | "SEMAPHORE.AVAILABLE" | "PSEMAPHORE.AVAILABLE" | "PSEMAPHORE.ACQUIRED" => vec!["k"],
        "COUNTDOWN.DECR" | "COUNTDOWN.COUNT" | "COUNTDOWN.AWAIT" | "SYNC.INFO" => vec!["k"],
        "SEMAPHORE.TRYSETPERMITS" | "SEMAPHORE.ACQUIRE" | "SEMAPHORE.RELEASE" | "SEMAPHORE.ADDPERMITS" => {
            vec!["k", "1"]
        }
        "PSEMAPHORE.TRYSETPERMITS" | "PSEMAPHORE.SETPERMITS" | "COUNTDOWN.TRYSETCOUNT" => vec!["k", "1"],
        "PSEMAPHORE.RELEASE" => vec!["k", "ab"],
        "PSEMAPHORE.ACQUIRE" => vec!["k", "1", "1000"],
        "PSEMAPHORE.UPDATELEASE" => vec!["k", "ab", "1000"],
        // GCRA and CL.THROTTLE (issue 30).
        "GCRA" => vec!["k", "1", "1", "0.5"],
        "CL.THROTTLE" => vec!["k", "1", "1", "60"],
        // The rate limiter (issue 30).
        "RATELIMITER.TRYSETRATE" | "RATELIMITER.SETRATE" => vec!["k", "OVERALL", "10", "1000"],
        "RATELIMITER.ACQUIRE" | "RATELIMITER.RELEASE" => vec!["k", "1"],
        "RATELIMITER.AVAILABLE" => vec!["k"],
        _ => vec!["k", "o", "1000"],
    }
}

#[test]
fn every_registered_command_is_documented_with_summary_since_complexity_and_arguments() {
    let s = Server::start();
    let mut c = s.conn();
    let names = module_commands(&mut c);
    assert!(names.len() >= 10, "{names:?}");
    assert!(names.contains(&"LOCK.INFO".to_string()));
    let mut documented = names.clone();
    documented.push("LOCK.CONTENDED".into());
    for name in &documented {
        let docs = ok(&mut c, &["COMMAND", "DOCS", name]);
        let docs = list(&docs);
        assert_eq!(text(&docs[0]).to_uppercase(), *name);
        let d = &docs[1];
        assert!(!text(&get(d, "summary")).is_empty(), "{name}");
        assert_eq!(text(&get(d, "since")), "0.1.0", "{name}");
        assert!(text(&get(d, "complexity")).starts_with("O("), "{name}");
        let args = list(&get(d, "arguments"));
        if name == "LOCK.CONTENDED" {
            continue;
        }
        // The locks' key is `key`, a synchronizer's and a rate limiter's `name` (issues 26, 30).
        let first = text(&get(&args[0], "name"));
        let sync =
            ["SEMAPHORE.", "PSEMAPHORE.", "COUNTDOWN.", "SYNC.", "RATELIMITER."].iter().any(|p| name.starts_with(p));
        assert_eq!(first, if sync { "name" } else { "key" }, "{name}");
        assert_eq!(text(&get(&args[0], "type")), "key", "{name}");
    }
}

#[test]
fn lock_acquire_documents_block_and_token_as_optional_tokens() {
    let s = Server::start();
    let mut c = s.conn();
    let docs = list(&ok(&mut c, &["COMMAND", "DOCS", "LOCK.ACQUIRE"]));
    let args = list(&get(&docs[1], "arguments"));
    let names: Vec<String> = args.iter().map(|a| text(&get(a, "name"))).collect();
    assert_eq!(names, ["key", "owner", "lease", "ms", "token"]);
    assert_eq!(text(&get(&args[2], "type")), "integer");
    assert_eq!(text(&get(&args[3], "token")), "BLOCK");
    assert_eq!(text(&get(&args[4], "type")), "pure-token");
    assert_eq!(text(&get(&args[4], "token")), "TOKEN");
    assert_eq!(list(&get(&args[4], "flags")).iter().map(text).collect::<Vec<_>>(), ["optional"]);
}

#[test]
fn rwlock_unlock_documents_read_or_write_as_oneof_and_latch_as_a_block() {
    let s = Server::start();
    let mut c = s.conn();
    let docs = list(&ok(&mut c, &["COMMAND", "DOCS", "RWLOCK.UNLOCK"]));
    let args = list(&get(&docs[1], "arguments"));
    assert_eq!(text(&get(&args[2], "type")), "oneof");
    let sides: Vec<String> = list(&get(&args[2], "arguments")).iter().map(|a| text(&get(a, "token"))).collect();
    assert_eq!(sides, ["READ", "WRITE"]);
    assert_eq!(text(&get(&args[4], "type")), "block");
    assert_eq!(text(&get(&args[4], "token")), "LATCH");
    assert_eq!(list(&get(&args[4], "arguments")).len(), 2);
}

#[test]
fn command_getkeys_finds_the_lock_key_of_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    for name in module_commands(&mut c) {
        let mut cmd = vec!["COMMAND", "GETKEYS", name.as_str()];
        cmd.extend(example(&name));
        assert_eq!(ok(&mut c, &cmd), Value::Array(vec![Value::BulkString(b"k".to_vec())]), "{name}");
    }
}

#[test]
fn command_info_reports_arity_flags_and_one_key_spec_per_command() {
    let s = Server::start();
    let mut c = s.conn();
    // Redis' ACL asks read permission for `access` and write permission for `insert`,
    // `update` or `delete`: what a user needs on the lock key.
    let expect: &[(&str, i64, &[&str])] = &[
        ("LOCK.ACQUIRE", -4, &["RW", "access", "update"]),
        ("LOCK.UNLOCK", -4, &["RW", "access", "update"]),
        ("LOCK.RENEW", 4, &["RW", "update"]),
        ("LOCK.FORCEUNLOCK", 2, &["RM", "delete"]),
        ("LOCK.INFO", -2, &["RO", "access"]),
        ("LOCK.HOLDS", 3, &["RO", "access"]),
        ("RWLOCK.HOLDS", 3, &["RO", "access"]),
        ("FAIRLOCK.HOLDS", 3, &["RO", "access"]),
        ("RWLOCK.RLOCK", -4, &["RW", "access", "update"]),
        ("RWLOCK.WLOCK", -4, &["RW", "access", "update"]),
        ("RWLOCK.UNLOCK", -5, &["RW", "access", "update"]),
        ("RWLOCK.RENEW", 4, &["RW", "update"]),
        ("RWLOCK.FORCEUNLOCK", 3, &["RW", "access", "delete"]),
        ("FAIRLOCK.ACQUIRE", -5, &["RW", "access", "update"]),
        ("FAIRLOCK.UNLOCK", -4, &["RW", "access", "update"]),
        ("FAIRLOCK.CANCEL", 4, &["RO"]),
        ("FAIRLOCK.RENEW", 4, &["RW", "update"]),
        ("FAIRLOCK.FORCEUNLOCK", 2, &["RM", "delete"]),
        ("GCRA", -5, &["RW", "access", "update"]),
        ("CL.THROTTLE", -5, &["RW", "access", "update"]),
        ("RATELIMITER.TRYSETRATE", -5, &["RW", "access", "update"]),
        ("RATELIMITER.SETRATE", -5, &["RW", "access", "update"]),
        ("RATELIMITER.ACQUIRE", -3, &["RW", "access", "update"]),
        ("RATELIMITER.AVAILABLE", -2, &["RW", "access", "update"]),
        ("RATELIMITER.RELEASE", -3, &["RW", "access", "update"]),
    ];
    for &(name, arity, want) in expect {
        let info = list(&ok(&mut c, &["COMMAND", "INFO", name]));
        let info = list(&info[0]);
        assert_eq!(text(&info[0]).to_uppercase(), name);
        assert_eq!(int(&info[1]), arity, "{name}");
        let specs = list(&info[8]);
        assert_eq!(specs.len(), 1, "{name}");
        let flags: Vec<String> = list(&get(&specs[0], "flags")).iter().map(text).collect();
        assert_eq!(flags, want, "{name}");
        assert_eq!(text(&get(&get(&specs[0], "begin_search"), "type")), "index");
        assert_eq!(int(&get(&get(&get(&specs[0], "begin_search"), "spec"), "index")), 1);
    }
    let info = list(&list(&ok(&mut c, &["COMMAND", "INFO", "LOCK.INFO"]))[0]);
    let flags: Vec<String> = list(&info[2]).iter().map(text).collect();
    assert!(flags.contains(&"readonly".to_string()) && !flags.contains(&"fast".to_string()), "{flags:?}");
}

/// `LOCK.CONTENDED` (issue 37) lists names across the keyspace: no key argument, no key spec
/// (its ACL check is its own, name by name), read-only and not `fast`; `COUNT` and `BY` are
/// optional.
#[test]
fn lock_contended_is_keyless_read_only_and_documented() {
    let s = Server::start();
    let mut c = s.conn();
    let info = list(&list(&ok(&mut c, &["COMMAND", "INFO", "LOCK.CONTENDED"]))[0]);
    assert_eq!(int(&info[1]), -1);
    let flags: Vec<String> = list(&info[2]).iter().map(text).collect();
    assert!(flags.contains(&"readonly".to_string()) && !flags.contains(&"fast".to_string()), "{flags:?}");
    assert!(!flags.contains(&"write".to_string()) && flags.contains(&"stale".to_string()), "{flags:?}");
    assert_eq!((int(&info[3]), int(&info[4]), int(&info[5])), (0, 0, 0), "no key positions");
    assert_eq!(list(&info[8]), Vec::<Value>::new(), "no key specs");
    let err = call(&mut c, &["COMMAND", "GETKEYS", "LOCK.CONTENDED", "COUNT", "1"]).expect_err("no keys");
    assert!(err.to_lowercase().contains("no key arguments"), "{err}");
    let docs = list(&ok(&mut c, &["COMMAND", "DOCS", "LOCK.CONTENDED"]));
    let args = list(&get(&docs[1], "arguments"));
    let tokens: Vec<String> = args.iter().map(|a| text(&get(a, "token"))).collect();
    assert_eq!(tokens, ["COUNT", "BY"]);
    let choices: Vec<String> = list(&get(&args[1], "arguments")).iter().map(|a| text(&get(a, "token"))).collect();
    assert_eq!(choices, ["WAIT", "WAITERS"]);
    for a in &args {
        assert_eq!(list(&get(a, "flags")).iter().map(text).collect::<Vec<_>>(), ["optional"]);
    }
    // Redis 7.0 gives module commands no ACL categories; 7.2+ and Valkey take the module's.
    let cats: Vec<String> = list(&info[6]).iter().map(|w| text(w).trim_start_matches('@').to_lowercase()).collect();
    let r = common::server_version::release();
    if !r.valkey && (r.major, r.minor) < (7, 2) {
        assert!(cats.is_empty(), "{cats:?}");
    } else {
        assert_eq!(cats, ["keyspace", "read", "slow"]);
    }
}
