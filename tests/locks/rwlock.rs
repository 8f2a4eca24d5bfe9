//! RWLOCK.* against a real redis-server: every branch, with the reply, the keyspace (the lock
//! hash and each read hold's timeout key) and what a subscriber on another connection receives.

use crate::common;

use std::thread::sleep;
use std::time::Duration;

use common::diff::now_ms;
use common::*;

const CH: &str = "redisson_rwlock:{doc}";

fn t(owner: &str, i: i64) -> String {
    names::read_timeout("doc", owner, i)
}

#[test]
fn rlock_takes_a_free_lock_with_one_timeout_key() {
    let s = Server::start();
    let mut c = s.conn();
    let since = now_ms();
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1:1", "30000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1:1", "1")]));
    assert_lease(&mut c, "doc", 30_000, since);
    assert_eq!(ok(&mut c, &["GET", &t("r1:1", 1)]), Value::BulkString(b"1".to_vec()));
    assert_lease(&mut c, &t("r1:1", 1), 30_000, since);
}

/// Seed 001, first scenario, step by step: r1 holds two reads, r2 one; unlocks in turn.
#[test]
fn read_unlock_keeps_ttl_of_longest_remaining_hold() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    let since = now_ms();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "5000"]);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1", "2"), ("r2", "1")]));
    assert_eq!(keys(&mut c), vec!["doc".to_string(), t("r1", 1), t("r1", 2), t("r2", 1)]);
    assert_lease(&mut c, "doc", 30_000, since);

    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "30000"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r1", "1"), ("r2", "1")]));
    assert_eq!(pttl(&mut c, &t("r1", 2)), -2, "exactly the released hold's key goes");
    assert_lease(&mut c, "doc", 30_000, since);

    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "30000"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r2", "1")]));
    assert_lease(&mut c, "doc", 5_000, since);
    assert_eq!(sub.take(), vec![]);

    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "30000"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(CH, "0")]));
}

/// Seed 001, second scenario: one owner holds write then read, then releases both.
#[test]
fn the_writer_may_read_and_a_write_unlock_downgrades() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    let since = now_ms();
    assert_eq!(ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w:write", "1")]));
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "doc", "w", "10000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w", "1"), ("w:write", "1")]));
    assert_lease(&mut c, "doc", 30_000, since);
    // Another reader is refused while w writes, with the TTL (read between PTTLs around it).
    let before = pttl(&mut c, "doc");
    let ttl = int(&ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "1000"]));
    let after = pttl(&mut c, "doc");
    assert!(after <= ttl && ttl <= before, "{before} {ttl} {after}");

    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000"]), Value::Int(1));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("w", "1")]));
    assert_eq!(sub.take(), vec![], "a downgrade publishes nothing");
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "1000"]), Value::Nil, "readers share now");

    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r", "READ", "1"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "READ", "1"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(CH, "0")]));
}

#[test]
fn a_writer_is_refused_while_readers_hold_and_gets_the_ttl() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "20000"]);
    sleep(Duration::from_millis(100));
    // The remaining TTL at the refusal: between the PTTLs read just before and after it.
    let before = pttl(&mut c, "doc");
    let ttl = int(&ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "1000"]));
    let after = pttl(&mut c, "doc");
    assert!(after <= ttl && ttl <= before && before <= 19_900, "{before} {ttl} {after}");
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r", "1")]));
}

#[test]
fn write_reentry_adds_the_lease_and_partial_unlock_resets_it() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    let since = now_ms();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "10000"]);
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "10000"]);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w:write", "2")]));
    assert_lease(&mut c, "doc", 20_000, since);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "7000"]), Value::Int(0));
    assert_lease(&mut c, "doc", 7_000, since);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "WRITE", "7000"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(CH, "1")]));
}

#[test]
fn read_holds_whose_keys_expired_let_the_ttl_fall_back() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "long", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "short", "100"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "short", "100"]);
    ok(&mut c, &["PEXPIRE", &t("long", 1), "150"]);
    sleep(Duration::from_millis(250));
    // Every timeout key has expired on its own; two fields remain: the lock goes.
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "short", "READ", "1"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
}

#[test]
fn read_unlock_in_write_mode_with_no_live_read_keys_keeps_the_ttl() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "w", "50"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "w", "50"]);
    let at = pexpiretime(&mut c, "doc");
    sleep(Duration::from_millis(120));
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "w", "READ", "1"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w", "1"), ("w:write", "1")]));
    assert_eq!(pexpiretime(&mut c, "doc"), at, "the write lease's expiry is kept as it was");
}

#[test]
fn unlock_by_a_non_holder_replies_nil_and_a_free_lock_still_publishes() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "x", "READ", "1"]), Value::Nil);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r", "WRITE", "1"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r", "1")]));
    assert_eq!(sub.take(), vec![]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "free", "x", "READ", "1"]), Value::Nil);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "free", "x", "WRITE", "1"]), Value::Nil);
    let ch = "redisson_rwlock:{free}";
    assert_eq!(sub.take_n(2, Duration::from_secs(2)), msgs(&[(ch, "0"), (ch, "1")]));
}

#[test]
fn a_latched_unlock_replays_its_first_outcome() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    let unlock = ["RWLOCK.UNLOCK", "doc", "w", "WRITE", "30000", "LATCH", "req-1", "5000"];
    let since = now_ms();
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "write"), ("w:write", "1")]), "the retry changed nothing");
    assert_lease(&mut c, "redisson_unlock_latch:{doc}:req-1", 5_000, since);
}

#[test]
fn renew_refreshes_every_read_hold_and_the_lock() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "1000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "2000"]);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["RWLOCK.RENEW", "doc", "r", "60000"]), Value::Int(1));
    for k in ["doc".to_string(), t("r", 1), t("r", 2)] {
        assert_lease(&mut c, &k, 60_000, since);
    }
    assert_eq!(ok(&mut c, &["RWLOCK.RENEW", "doc", "other", "60000"]), Value::Int(0));
    ok(&mut c, &["RWLOCK.WLOCK", "w", "owner", "1000"]);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["RWLOCK.RENEW", "w", "owner", "60000"]), Value::Int(1), "a writer renews too");
    assert_lease(&mut c, "w", 60_000, since);
}

#[test]
fn force_unlock_deletes_only_in_the_given_mode() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.FORCEUNLOCK", "doc", "WRITE"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["RWLOCK.FORCEUNLOCK", "doc", "read"]), Value::Int(1));
    assert_eq!(keys(&mut c), vec![t("r", 1)], "read holds' keys are left to expire, as Redisson does");
    ok(&mut c, &["RWLOCK.WLOCK", "doc", "w", "30000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.FORCEUNLOCK", "doc", "WRITE"]), Value::Int(1));
    assert_eq!(sub.take_n(2, Duration::from_secs(2)), msgs(&[(CH, "0"), (CH, "1")]));
}

#[test]
fn bad_input_is_an_error_that_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r", "30000"]);
    let before = hgetall(&mut c, "doc");
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RWLOCK.RLOCK", "doc", "r"], "ERR wrong number of arguments for 'rwlock.rlock' command"),
        (&["RWLOCK.WLOCK", "doc"], "ERR wrong number of arguments for 'rwlock.wlock' command"),
        (&["RWLOCK.UNLOCK", "doc", "r", "READ"], "ERR wrong number of arguments for 'rwlock.unlock' command"),
        (&["RWLOCK.RENEW", "doc", "r"], "ERR wrong number of arguments for 'rwlock.renew' command"),
        (&["RWLOCK.FORCEUNLOCK", "doc"], "ERR wrong number of arguments for 'rwlock.forceunlock' command"),
        (&["RWLOCK.RLOCK", "doc", "r", "ten"], "ERR value is not an integer or out of range"),
        (&["RWLOCK.WLOCK", "doc", "w", "0"], "ERR lease must be a positive integer"),
        (&["RWLOCK.UNLOCK", "doc", "r", "READ", "-5"], "ERR lease must be a positive integer"),
        (&["RWLOCK.UNLOCK", "doc", "r", "READING", "100"], "ERR syntax error"),
        (&["RWLOCK.FORCEUNLOCK", "doc", "BOTH"], "ERR syntax error"),
        (&["RWLOCK.RLOCK", "doc", "r", "100", "BLOCK"], "ERR syntax error"),
        (&["RWLOCK.RLOCK", "doc", "r", "100", "TOKEN"], "ERR syntax error"),
        (&["RWLOCK.UNLOCK", "doc", "r", "READ", "100", "LATCH", "q"], "ERR syntax error"),
        (&["RWLOCK.RLOCK", "doc", "mode", "100"], "ERR owner name 'mode' is reserved by the read-write lock"),
        (&["RWLOCK.UNLOCK", "doc", "mode", "READ", "100"], "ERR owner name 'mode' is reserved by the read-write lock"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(*want), "{args:?}");
    }
    assert_eq!(hgetall(&mut c, "doc"), before);
    assert_eq!(keys(&mut c), vec!["doc".to_string(), t("r", 1)]);
}

#[test]
fn a_lock_key_of_another_type_is_wrongtype_and_a_timeout_key_is_overwritten_as_set_does() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "doc", "x"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["RWLOCK.RLOCK", "doc", "r", "100"][..],
        &["RWLOCK.WLOCK", "doc", "r", "100"],
        &["RWLOCK.UNLOCK", "doc", "r", "READ", "100"],
        &["RWLOCK.UNLOCK", "doc", "r", "WRITE", "100"],
        &["RWLOCK.RENEW", "doc", "r", "100"],
        &["RWLOCK.FORCEUNLOCK", "doc", "READ"],
    ] {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(wrongtype), "{args:?}");
    }
    assert_eq!(ok(&mut c, &["GET", "doc"]), Value::BulkString(b"x".to_vec()));
    // Redisson's `set T:i 1` replaces whatever the timeout key held; so do we.
    ok(&mut c, &["RPUSH", &names::read_timeout("other", "r", 1), "junk"]);
    assert_eq!(ok(&mut c, &["RWLOCK.RLOCK", "other", "r", "1000"]), Value::Nil);
    assert_eq!(ok(&mut c, &["TYPE", &names::read_timeout("other", "r", 1)]), Value::SimpleString("string".into()));
    // A corrupt hold count is an error before any write.
    ok(&mut c, &["HSET", "bad", "mode", "read", "r", "many"]);
    let err = call(&mut c, &["RWLOCK.RLOCK", "bad", "r", "100"]).err();
    assert_eq!(err.as_deref(), Some("ERR lock hash field is not an integer hold count"));
    assert_eq!(hgetall(&mut c, "bad"), map(&[("mode", "read"), ("r", "many")]));
}

#[test]
fn a_replica_and_a_reload_keep_the_same_state_with_absolute_expiries() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let sub = r.subscriber();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "20000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "20000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "1"]);
    ok(&mut c, &["RWLOCK.WLOCK", "w", "o", "40000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "w", "o", "40000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "w", "o", "WRITE", "1"]);
    ok(&mut c, &["RWLOCK.WLOCK", "gone", "o", "40000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "gone", "o", "WRITE", "1"]);
    wait_replica(&mut c);
    assert_eq!(keys(&mut rc), keys(&mut c));
    for k in keys(&mut c) {
        // Replicated as absolute times: equal but for rounding, however long between the reads.
        assert_near(pexpiretime(&mut rc, &k), pexpiretime(&mut c, &k), 5);
    }
    assert_eq!(hgetall(&mut rc, "doc"), map(&[("mode", "read"), ("r2", "2")]));
    assert_near(pttl(&mut rc, "doc"), 20_000, 100);
    assert_eq!(hgetall(&mut rc, "w"), map(&[("mode", "read"), ("o", "1")]));
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[("redisson_rwlock:{gone}", "1")]));

    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("mode", "read"), ("r2", "2")]));
    assert_near(pttl(&mut c, &t("r2", 2)), 20_000, 300);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["EXISTS", "doc"]), Value::Int(0));
}
