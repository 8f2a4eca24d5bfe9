//! LOCK.* against a real redis-server: every branch, with the reply, the keyspace and what a
//! subscriber on another connection receives.

use crate::common;

use common::diff::now_ms;
use common::*;

const CH: &str = "redisson_lock__channel:{orders}";

#[test]
fn acquire_takes_a_free_lock_with_the_lease() {
    let s = Server::start();
    let mut c = s.conn();
    let since = now_ms();
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
    assert_lease(&mut c, "orders", 30_000, since);
}

#[test]
fn acquire_reenters_and_resets_the_lease() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "5000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "2")]));
    assert_lease(&mut c, "orders", 5_000, since);
}

#[test]
fn acquire_by_another_owner_replies_the_remaining_ttl_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    let at = pexpiretime(&mut c, "orders");
    std::thread::sleep(std::time::Duration::from_millis(100));
    // The remaining TTL at the refusal: between the PTTLs read just before and after it.
    let before = pttl(&mut c, "orders");
    let ttl = int(&ok(&mut c, &["LOCK.ACQUIRE", "orders", "w2:1", "30000"]));
    let after = pttl(&mut c, "orders");
    assert!(after <= ttl && ttl <= before && before <= 29_900, "{before} {ttl} {after}");
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
    assert_eq!(pexpiretime(&mut c, "orders"), at, "the refusal moved the expiry");
}

#[test]
fn acquire_succeeds_once_the_lease_has_expired() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "50"]);
    std::thread::sleep(std::time::Duration::from_millis(80));
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "orders", "w2:1", "1000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w2:1", "1")]));
}

#[test]
fn unlock_of_the_last_hold_deletes_and_publishes_zero() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take(), msgs(&[(CH, "0")]));
}

#[test]
fn unlock_of_one_of_several_holds_renews_the_lease_and_stays_silent() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "8000"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
    assert_lease(&mut c, "orders", 8_000, since);
    assert_eq!(sub.take(), vec![]);
}

#[test]
fn unlock_by_a_non_holder_replies_nil_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000"]), Value::Nil);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w2:1", "30000"]), Value::Nil);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
    assert_eq!(sub.take(), vec![]);
}

#[test]
fn a_retried_latched_unlock_replays_the_first_outcome() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    let latch = "redisson_unlock_latch:{orders}:req-1";
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000", "LATCH", "req-1", "5000"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["GET", latch]), Value::BulkString(b"1".to_vec()));
    assert_lease(&mut c, latch, 5_000, since);
    // The retry (say the reply was lost) is answered from the latch, not re-applied.
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w2:1", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000", "latch", "req-1", "5000"]), Value::Int(1));
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w2:1", "1")]));
    assert_eq!(sub.take(), msgs(&[(CH, "0")]));
}

#[test]
fn a_latched_partial_unlock_records_zero() {
    let s = Server::start();
    let mut c = s.conn();
    let latch = "redisson_unlock_latch:{orders}:r";
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000", "LATCH", "r", "800"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["GET", latch]), Value::BulkString(b"0".to_vec()));
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1:7", "30000", "LATCH", "r", "800"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
}

#[test]
fn renew_resets_only_the_holders_lease() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["LOCK.RENEW", "orders", "w1:7", "9000"]), Value::Int(0));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    let since = now_ms();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "1000"]);
    assert_eq!(ok(&mut c, &["LOCK.RENEW", "orders", "w2:1", "9000"]), Value::Int(0));
    assert_lease(&mut c, "orders", 1_000, since);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["LOCK.RENEW", "orders", "w1:7", "9000"]), Value::Int(1));
    assert_lease(&mut c, "orders", 9_000, since);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1:7", "1")]));
}

#[test]
fn force_unlock_deletes_whoever_holds_and_publishes() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["LOCK.FORCEUNLOCK", "orders"]), Value::Int(0));
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1:7", "30000"]);
    assert_eq!(ok(&mut c, &["LOCK.FORCEUNLOCK", "orders"]), Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take(), msgs(&[(CH, "0")]));
}

#[test]
fn names_with_a_hash_tag_keep_it_in_derived_names() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "a{b}c", "w1:7", "30000"]);
    ok(&mut c, &["LOCK.UNLOCK", "a{b}c", "w1:7", "30000", "LATCH", "q", "1000"]);
    assert_eq!(keys(&mut c), vec!["redisson_unlock_latch:a{b}c:q".to_string()]);
    assert_eq!(sub.take(), msgs(&[("redisson_lock__channel:a{b}c", "0")]));
}

#[test]
fn commands_work_inside_multi_exec() {
    let s = Server::start();
    let mut c = s.conn();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("orders")
        .arg("w1:7")
        .arg(30000)
        .cmd("LOCK.ACQUIRE")
        .arg("orders")
        .arg("w2:1")
        .arg(30000)
        .cmd("LOCK.UNLOCK")
        .arg("orders")
        .arg("w1:7")
        .arg(30000)
        .query(&mut c)
        .expect("EXEC");
    assert_eq!(replies[0], Value::Nil);
    assert!(matches!(replies[1], Value::Int(t) if t > 29_000));
    assert_eq!(replies[2], Value::Int(1));
    assert_eq!(keys(&mut c), Vec::<String>::new());
}

#[rustfmt::skip]
const BAD_INPUT: &[(&[&str], &str)] = &[
    (&["LOCK.ACQUIRE", "orders", "w1"],                 "ERR wrong number of arguments for 'lock.acquire' command"),
    (&["LOCK.ACQUIRE", "orders", "w1", "soon"],         "ERR value is not an integer or out of range"),
    (&["LOCK.ACQUIRE", "orders", "w1", "1.5"],          "ERR value is not an integer or out of range"),
    (&["LOCK.ACQUIRE", "orders", "w1", "0"],            "ERR lease must be a positive integer"),
    (&["LOCK.ACQUIRE", "orders", "w1", "-5"],           "ERR lease must be a positive integer"),
    (&["LOCK.ACQUIRE", "orders", "w1", "100", "NOPE"],  "ERR syntax error"),
    (&["LOCK.UNLOCK", "orders", "w1"],                  "ERR wrong number of arguments for 'lock.unlock' command"),
    (&["LOCK.UNLOCK", "orders", "w1", "100", "LATCH"],  "ERR syntax error"),
    (&["LOCK.UNLOCK", "orders", "w1", "100", "LATCH", "r"], "ERR syntax error"),
    (&["LOCK.UNLOCK", "orders", "w1", "100", "LATCH", "r", "x"], "ERR value is not an integer or out of range"),
    (&["LOCK.UNLOCK", "orders", "w1", "100", "LATCH", "r", "0"], "ERR latch time must be a positive integer"),
    (&["LOCK.UNLOCK", "orders", "w1", "100", "LATCH", "r", "5", "LATCH", "s", "5"], "ERR syntax error"),
    (&["LOCK.RENEW", "orders", "w1"],                   "ERR wrong number of arguments for 'lock.renew' command"),
    (&["LOCK.RENEW", "orders", "w1", "100", "x"],       "ERR wrong number of arguments for 'lock.renew' command"),
    (&["LOCK.RENEW", "orders", "w1", "0"],              "ERR lease must be a positive integer"),
    (&["LOCK.FORCEUNLOCK"],                             "ERR wrong number of arguments for 'lock.forceunlock' command"),
    (&["LOCK.FORCEUNLOCK", "orders", "x"],              "ERR wrong number of arguments for 'lock.forceunlock' command"),
];

#[test]
fn bad_input_gets_a_redis_error_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    let before = (hgetall(&mut c, "orders"), keys(&mut c));
    for (args, want) in BAD_INPUT {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(*want), "{args:?}");
        assert_eq!((hgetall(&mut c, "orders"), keys(&mut c)), before, "{args:?} changed the keyspace");
    }
}

#[test]
fn a_key_of_another_type_is_wrongtype_and_left_alone() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "orders", "not a lock"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for args in [
        &["LOCK.ACQUIRE", "orders", "w1", "100"][..],
        &["LOCK.UNLOCK", "orders", "w1", "100"],
        &["LOCK.RENEW", "orders", "w1", "100"],
    ] {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(wrongtype), "{args:?}");
    }
    assert_eq!(ok(&mut c, &["GET", "orders"]), Value::BulkString(b"not a lock".to_vec()));
    assert_eq!(pttl(&mut c, "orders"), -1);
}

#[test]
fn a_latch_key_of_another_type_is_wrongtype_and_the_lock_is_kept() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    ok(&mut c, &["LPUSH", "redisson_unlock_latch:{orders}:r", "x"]);
    let err = call(&mut c, &["LOCK.UNLOCK", "orders", "w1", "100", "LATCH", "r", "100"]).err();
    assert_eq!(err.as_deref(), Some("WRONGTYPE Operation against a key holding the wrong kind of value"));
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1", "1")]));
}

#[test]
fn a_corrupt_hold_count_is_an_error_not_a_crash() {
    let mut s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["HSET", "orders", "w1", "lots"]);
    for args in [&["LOCK.ACQUIRE", "orders", "w1", "100"][..], &["LOCK.UNLOCK", "orders", "w1", "100"]] {
        assert_eq!(call(&mut c, args).err().as_deref(), Some("ERR lock hash field is not an integer hold count"));
    }
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1", "lots")]));
    assert!(s.alive());
}

#[test]
fn a_replica_gets_the_same_state_with_absolute_expiries() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let sub = r.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "20000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "stock", "w2", "60000"]);
    ok(&mut c, &["LOCK.UNLOCK", "stock", "w2", "60000", "LATCH", "q", "9000"]);
    wait_replica(&mut c);
    assert_eq!(keys(&mut rc), keys(&mut c));
    assert_eq!(hgetall(&mut rc, "orders"), map(&[("w1", "2")]));
    // Replicated as absolute times: equal but for rounding, however long between the reads.
    assert_near(pexpiretime(&mut rc, "orders"), pexpiretime(&mut c, "orders"), 5);
    assert_near(pttl(&mut rc, "redisson_unlock_latch:{stock}:q"), 9_000, 100);
    // The replica's subscribers hear the unlock message, as with Redisson's PUBLISH.
    assert_eq!(sub.take(), msgs(&[("redisson_lock__channel:{stock}", "0")]));
}

#[test]
fn the_replication_stream_carries_absolute_times_only() {
    let s = Server::start();
    let mut c = s.conn();
    // A fake replica: read what the primary sends after a SYNC, as Redis' own tests do.
    let mut feed = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    feed.set_read_timeout(Some(std::time::Duration::from_millis(300))).expect("timeout");
    use std::io::{Read, Write};
    feed.write_all(b"SYNC\r\n").expect("SYNC");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut sink = vec![0u8; 1 << 16];
    let _ = feed.read(&mut sink);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    ok(&mut c, &["LOCK.UNLOCK", "orders", "w1", "30000", "LATCH", "r", "500"]);
    let mut stream = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = feed.read(&mut buf) {
        if n == 0 {
            break;
        }
        stream.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&stream).to_uppercase();
    for expected in ["HINCRBY", "PEXPIREAT", "DEL", "PUBLISH", "PXAT", "MULTI", "EXEC"] {
        assert!(text.contains(expected), "{expected} missing from the replication stream: {text}");
    }
    for relative in ["LOCK.ACQUIRE", "LOCK.UNLOCK", "\r\nPEXPIRE\r\n", "\r\nPX\r\n"] {
        assert!(!text.contains(relative), "{relative:?} in the replication stream: {text}");
    }
}

#[test]
fn debug_reload_keeps_locks_and_their_expiries() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    ok(&mut c, &["LOCK.ACQUIRE", "orders", "w1", "30000"]);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(hgetall(&mut c, "orders"), map(&[("w1", "2")]));
    assert_near(pttl(&mut c, "orders"), 30_000, 200);
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1", "30000"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "orders", "w1", "30000"]), Value::Int(1));
}
