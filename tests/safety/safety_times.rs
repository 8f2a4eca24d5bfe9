//! Times that overflow are refused: every time argument whose deadline would pass what
//! `PEXPIREAT` accepts (i64::MAX ms) gets Redis' own `SET ... PX` error, before anything is
//! written; counts and fencing tokens at i64::MAX get `HINCRBY`'s overflow error.
//! Each test is a reproduction from issue 16, with the keyspace checked after it.

use crate::common;

use std::thread;

use common::parked::wait_blocked;
use common::*;

const MAX: &str = "9223372036854775807";

fn expire_error(cmd: &str) -> Result<Value, String> {
    Err(format!("ERR invalid expire time in '{cmd}' command"))
}

/// The server's clock in ms (`TIME`).
fn server_ms(c: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).expect("EXISTS") == 1
}

/// Every key, with its value (`DUMP`) and absolute expiry (`PEXPIRETIME`): equal before and
/// after means nothing was written.
fn keyspace(c: &mut redis::Connection) -> Vec<(String, Vec<u8>, i64)> {
    keys(c)
        .into_iter()
        .map(|k| {
            let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query(c).expect("DUMP");
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (k, dump, at)
        })
        .collect()
}

#[test]
fn a_lease_of_i64_max_is_refused_by_every_acquire_and_leaves_no_lock() {
    let s = Server::start();
    let mut c = s.conn();
    for (args, cmd) in [
        (vec!["LOCK.ACQUIRE", "l1", "o", MAX], "lock.acquire"),
        (vec!["LOCK.ACQUIRE", "l1", "o", MAX, "TOKEN"], "lock.acquire"),
        (vec!["RWLOCK.RLOCK", "l1", "o", MAX], "rwlock.rlock"),
        (vec!["RWLOCK.WLOCK", "l1", "o", MAX], "rwlock.wlock"),
        (vec!["FAIRLOCK.ACQUIRE", "l1", "o", MAX, "5000"], "fairlock.acquire"),
        (vec!["FAIRLOCK.ACQUIRE", "l1", "o", "5000", MAX], "fairlock.acquire"),
        // 2^63-1-10^12: the clock (about 1.7e12 ms) pushes it past the range.
        (vec!["LOCK.ACQUIRE", "l1", "o", "9223371036854775807"], "lock.acquire"),
        (vec!["LOCK.ACQUIRE", "l1", "o", "1000", "BLOCK", MAX], "lock.acquire"),
    ] {
        assert_eq!(call(&mut c, &args), expire_error(cmd), "{args:?}");
    }
    assert_eq!(keys(&mut c), Vec::<String>::new(), "no lock, no hold key, no queue, no counter");
}

#[test]
fn unlock_renew_and_latch_times_that_overflow_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "o", "30000"]);
    ok(&mut c, &["RWLOCK.WLOCK", "w", "o", "30000"]);
    ok(&mut c, &["RWLOCK.WLOCK", "w", "o", "30000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "o", "30000", "5000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "x", "30000", "5000"]);
    let before = keyspace(&mut c);
    for (args, cmd) in [
        (vec!["LOCK.UNLOCK", "l", "o", MAX], "lock.unlock"),
        (vec!["LOCK.UNLOCK", "l", "o", "1000", "LATCH", "req", MAX], "lock.unlock"),
        (vec!["LOCK.RENEW", "l", "o", MAX], "lock.renew"),
        (vec!["RWLOCK.UNLOCK", "w", "o", "WRITE", MAX], "rwlock.unlock"),
        (vec!["RWLOCK.UNLOCK", "rw", "o", "READ", "1000", "LATCH", "req", MAX], "rwlock.unlock"),
        (vec!["RWLOCK.RENEW", "rw", "o", MAX], "rwlock.renew"),
        (vec!["FAIRLOCK.UNLOCK", "f", "o", MAX], "fairlock.unlock"),
        (vec!["FAIRLOCK.UNLOCK", "f", "o", "1000", "LATCH", "req", MAX], "fairlock.unlock"),
        (vec!["FAIRLOCK.RENEW", "f", "o", MAX], "fairlock.renew"),
        (vec!["FAIRLOCK.CANCEL", "f", "x", MAX], "fairlock.cancel"),
        (vec!["RWLOCK.RLOCK", "rw", "o", "1000", "BLOCK", MAX], "rwlock.rlock"),
    ] {
        assert_eq!(call(&mut c, &args), expire_error(cmd), "{args:?}");
    }
    assert_eq!(keyspace(&mut c), before);
}

#[test]
fn a_latch_time_that_overflows_is_refused_on_the_primary_and_the_replica_stays_equal() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o", "30000"]);
    let unlock = ["LOCK.UNLOCK", "l", "o", "30000", "LATCH", "req", MAX];
    assert_eq!(call(&mut c, &unlock), expire_error("lock.unlock"));
    ok(&mut c, &["SET", "marker", "1"]);
    wait_replica(&mut c);
    let latch = names::latch("l", "req");
    for conn in [&mut c, &mut rc] {
        assert!(!exists(conn, &latch), "no latch key");
        assert_eq!(hgetall(conn, "l"), map(&[("o", "1")]), "still held");
        assert_near(pttl(conn, "l"), 30_000, 1_000);
    }
    assert_eq!(keys(&mut c), keys(&mut rc));
    let info: String = redis::cmd("INFO").arg("replication").query(&mut rc).expect("INFO");
    assert!(info.contains("master_link_status:up"), "{info}");
}

#[test]
fn write_reentry_whose_ttl_plus_lease_overflows_is_refused_and_keeps_the_count() {
    let s = Server::start();
    let mut c = s.conn();
    // A lease ending a million ms short of the largest expiry time.
    let lease = (i64::MAX - server_ms(&mut c) - 1_000_000).to_string();
    assert_eq!(ok(&mut c, &["RWLOCK.WLOCK", "w", "o", &lease]), Value::Nil);
    let ttl = pttl(&mut c, "w");
    assert_eq!(call(&mut c, &["RWLOCK.WLOCK", "w", "o", "2000000"]), expire_error("rwlock.wlock"));
    assert_eq!(hgetall(&mut c, "w"), map(&[("mode", "write"), ("o:write", "1")]));
    assert!(pttl(&mut c, "w") <= ttl);
    // A reentry that still fits is granted.
    assert_eq!(ok(&mut c, &["RWLOCK.WLOCK", "w", "o", "1"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "w"), map(&[("mode", "write"), ("o:write", "2")]));
}

#[test]
fn a_block_timeout_below_zero_says_what_is_valid_and_a_long_one_still_parks() {
    let s = Server::start();
    let mut c = s.conn();
    let err = call(&mut c, &["LOCK.ACQUIRE", "l", "w", "1000", "BLOCK", "-1"]);
    assert_eq!(err, Err("ERR timeout must be a non-negative integer (ms; 0 waits without a limit)".into()));
    assert!(!exists(&mut c, "l"));
    ok(&mut c, &["LOCK.ACQUIRE", "l", "h", "30000"]);
    // 4.6e18 ms fits the clock; Redis is handed "no limit" for it.
    let mut w = s.conn();
    let waiter =
        thread::spawn(move || call(&mut w, &["LOCK.ACQUIRE", "l", "w", "30000", "BLOCK", "4611686018427387904"]));
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "l", "h", "30000"]), Value::Int(1));
    assert_eq!(waiter.join().expect("waiter"), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "l"), map(&[("w", "1")]));
}

#[test]
fn a_lease_of_centuries_with_a_parked_waiter_neither_spins_nor_frees_the_lock() {
    let s = Server::start();
    let mut c = s.conn();
    let lease = (i64::MAX - server_ms(&mut c) - 1_000_000).to_string();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "h", &lease]);
    let mut w = s.conn();
    let waiter = thread::spawn(move || call(&mut w, &["LOCK.ACQUIRE", "l", "w", "30000", "BLOCK", "300"]));
    // The waiter times out with the lock's TTL; the lock's wake-up timer did not fire early.
    let reply = waiter.join().expect("waiter");
    assert!(matches!(reply, Ok(Value::Int(t)) if t > 1_000_000_000_000), "{reply:?}");
    assert_eq!(hgetall(&mut c, "l"), map(&[("h", "1")]));
    let info: String = redis::cmd("INFO").arg("lockmod").query(&mut c).expect("INFO");
    assert!(info.contains("lockmod_handoffs:0"), "{info}");
}

#[test]
fn a_fencing_counter_at_i64_max_is_an_overflow_error_not_a_token_handed_out_twice() {
    let s = Server::start();
    let mut c = s.conn();
    let counter = names::token("t");
    ok(&mut c, &["SET", &counter, "9223372036854775806"]);
    let grant = ok(&mut c, &["LOCK.ACQUIRE", "t", "a", "30000", "TOKEN"]);
    assert_eq!(grant, Value::Array(vec![Value::Int(-1), Value::Int(i64::MAX)]));
    let again = call(&mut c, &["LOCK.ACQUIRE", "t", "a", "30000", "TOKEN"]);
    assert_eq!(again, Err("ERR increment or decrement would overflow".into()));
    assert_eq!(hgetall(&mut c, "t"), map(&[("a", "1")]), "the reentry was not taken either");
    let v: String = redis::cmd("GET").arg(&counter).query(&mut c).expect("GET");
    assert_eq!(v, MAX);
}

#[test]
fn a_hold_count_at_i64_max_is_an_overflow_error_that_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["HSET", "h", "a", MAX]);
    ok(&mut c, &["PEXPIRE", "h", "30000"]);
    ok(&mut c, &["HSET", "rw", "mode", "read", "r", MAX]);
    ok(&mut c, &["HSET", "wl", "mode", "write", "w:write", MAX]);
    ok(&mut c, &["HSET", "f", "a", MAX]);
    let before = keyspace(&mut c);
    let overflow = Err("ERR increment or decrement would overflow".to_string());
    assert_eq!(call(&mut c, &["LOCK.ACQUIRE", "h", "a", "1000"]), overflow);
    assert_eq!(call(&mut c, &["RWLOCK.RLOCK", "rw", "r", "1000"]), overflow);
    assert_eq!(call(&mut c, &["RWLOCK.WLOCK", "wl", "w", "1000"]), overflow);
    assert_eq!(call(&mut c, &["FAIRLOCK.ACQUIRE", "f", "a", "1000", "5000"]), overflow);
    assert_eq!(keyspace(&mut c), before);
}

#[test]
fn a_fair_deadline_planted_at_infinity_is_clamped_and_the_server_lives() {
    let mut s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "h", "30000", "5000"]);
    let (q, z) = (names::fair_queue("f"), names::fair_timeouts("f"));
    ok(&mut c, &["RPUSH", &q, "big"]);
    ok(&mut c, &["ZADD", &z, "inf", "big"]);
    let wait = (i64::MAX - server_ms(&mut c) - 1_000_000).to_string();
    let reply = ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "w", "30000", &wait]);
    assert_eq!(reply, Value::Int(i64::MAX), "the time the waiter ahead has: saturated");
    let lrange: Vec<String> = redis::cmd("LRANGE").arg(&q).arg(0).arg(-1).query(&mut c).expect("LRANGE");
    assert_eq!(lrange, ["big", "w"]);
    let score: f64 = redis::cmd("ZSCORE").arg(&z).arg("w").query(&mut c).expect("ZSCORE");
    assert_eq!(score, i64::MAX as f64);
    assert!(s.alive());
}
