//! `LOCK.HOLDS`, `FAIRLOCK.HOLDS`, `RWLOCK.HOLDS`: an owner's hold counts, read-only, O(1),
//! answered on a replica and after a restart, for clients settling a lost reply.

use crate::common;

use common::*;

fn ints(a: &[i64]) -> Value {
    Value::Array(a.iter().map(|n| Value::Int(*n)).collect())
}

#[test]
fn lock_holds_counts_reentry_and_unlock_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "a"]), Value::Int(0), "absent lock");
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000", "TOKEN"]);
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "a"]), Value::Int(2), "a fenced grant is a hold too");
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "b"]), Value::Int(0));
    let ttl = pttl(&mut c, "k");
    ok(&mut c, &["LOCK.HOLDS", "k", "a"]);
    assert_eq!(hgetall(&mut c, "k"), map(&[("a", "2")]));
    assert!(pttl(&mut c, "k") <= ttl, "a query does not renew the lease");
    assert_eq!(keys(&mut c), ["k", "redisson_lock_token:{k}"]);
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "a"]), Value::Int(1));
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "a"]), Value::Int(0));
}

#[test]
fn fairlock_holds_counts_the_holder_not_the_queued_waiters() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "5000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "5000"]);
    assert!(matches!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "5000"]), Value::Int(_)));
    let queue: Vec<String> = redis::cmd("LRANGE").arg("redisson_lock_queue:{f}").arg(0).arg(-1).query(&mut c).unwrap();
    assert_eq!(queue, ["b"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.HOLDS", "f", "a"]), Value::Int(2));
    assert_eq!(ok(&mut c, &["FAIRLOCK.HOLDS", "f", "b"]), Value::Int(0), "queued is not held");
    assert_eq!(hgetall(&mut c, "f"), map(&[("a", "2")]));
}

#[test]
fn rwlock_holds_replies_read_and_write_counts_through_a_downgrade() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "w"]), ints(&[0, 0]));
    ok(&mut c, &["RWLOCK.WLOCK", "rw", "w", "30000"]);
    ok(&mut c, &["RWLOCK.WLOCK", "rw", "w", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "w", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "w"]), ints(&[1, 2]));
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "r"]), ints(&[0, 0]));
    ok(&mut c, &["RWLOCK.UNLOCK", "rw", "w", "WRITE", "30000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "rw", "w", "WRITE", "30000"]);
    assert_eq!(hgetall(&mut c, "rw"), map(&[("mode", "read"), ("w", "1")]), "downgraded");
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "w"]), ints(&[1, 0]));
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "r"]), ints(&[2, 0]));
}

#[test]
fn holds_errors_are_wrongtype_corrupt_count_arity_and_the_reserved_owner() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "str", "x"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for cmd in ["LOCK.HOLDS", "FAIRLOCK.HOLDS", "RWLOCK.HOLDS"] {
        assert_eq!(call(&mut c, &[cmd, "str", "a"]).err().as_deref(), Some(wrongtype), "{cmd}");
        let arity = format!("ERR wrong number of arguments for '{}' command", cmd.to_lowercase());
        assert_eq!(call(&mut c, &[cmd, "str"]).err(), Some(arity.clone()), "{cmd}");
        assert_eq!(call(&mut c, &[cmd, "str", "a", "b"]).err(), Some(arity), "{cmd}");
    }
    ok(&mut c, &["HSET", "bad", "mode", "write", "a", "many", "b:write", "x"]);
    let corrupt = "ERR lock hash field is not an integer hold count";
    assert_eq!(call(&mut c, &["LOCK.HOLDS", "bad", "a"]).err().as_deref(), Some(corrupt));
    assert_eq!(call(&mut c, &["FAIRLOCK.HOLDS", "bad", "a"]).err().as_deref(), Some(corrupt));
    assert_eq!(call(&mut c, &["RWLOCK.HOLDS", "bad", "a"]).err().as_deref(), Some(corrupt));
    assert_eq!(call(&mut c, &["RWLOCK.HOLDS", "bad", "b"]).err().as_deref(), Some(corrupt));
    let reserved = "ERR owner name 'mode' is reserved by the read-write lock";
    assert_eq!(call(&mut c, &["RWLOCK.HOLDS", "bad", "mode"]).err().as_deref(), Some(reserved));
    assert_eq!(hgetall(&mut c, "bad"), map(&[("mode", "write"), ("a", "many"), ("b:write", "x")]));
    assert_eq!(ok(&mut c, &["GET", "str"]), Value::BulkString(b"x".to_vec()));
}

#[test]
fn a_replica_answers_holds_and_they_survive_debug_reload() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "30000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "30000", "5000"]);
    ok(&mut c, &["RWLOCK.WLOCK", "rw", "a", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "a", "30000"]);
    wait_replica(&mut c);
    let mut rc = r.conn();
    for conn in [&mut rc, &mut c] {
        assert_eq!(ok(conn, &["LOCK.HOLDS", "k", "a"]), Value::Int(2));
        assert_eq!(ok(conn, &["FAIRLOCK.HOLDS", "f", "a"]), Value::Int(1));
        assert_eq!(ok(conn, &["RWLOCK.HOLDS", "rw", "a"]), ints(&[1, 1]));
    }
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(ok(&mut c, &["LOCK.HOLDS", "k", "a"]), Value::Int(2));
    assert_eq!(ok(&mut c, &["RWLOCK.HOLDS", "rw", "a"]), ints(&[1, 1]));
}

#[test]
fn holds_commands_are_readonly_fast_with_one_read_key_spec() {
    let s = Server::start();
    let mut c = s.conn();
    for cmd in ["LOCK.HOLDS", "FAIRLOCK.HOLDS", "RWLOCK.HOLDS"] {
        let keys = ok(&mut c, &["COMMAND", "GETKEYS", cmd, "k", "o"]);
        assert_eq!(keys, Value::Array(vec![Value::BulkString(b"k".to_vec())]), "{cmd}");
        let info = match ok(&mut c, &["COMMAND", "INFO", cmd]) {
            Value::Array(mut a) => a.remove(0),
            other => panic!("{other:?}"),
        };
        let Value::Array(info) = info else { panic!("{info:?}") };
        assert_eq!(int(&info[1]), 3, "{cmd}");
        let flags: Vec<String> = match &info[2] {
            Value::Array(f) => f.iter().map(|v| redis::from_redis_value(v).unwrap()).collect(),
            other => panic!("{other:?}"),
        };
        assert!(flags.contains(&"readonly".into()) && flags.contains(&"fast".into()), "{cmd}: {flags:?}");
        assert!(!flags.contains(&"write".into()), "{cmd}: {flags:?}");
    }
}
