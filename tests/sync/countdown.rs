//! COUNTDOWN.* against a real redis-server (issue 26): replies, the keyspace, the latch's
//! channel (`1` when a count is set, `0` at zero), bad input, ACL, a replica.

use crate::common;

use common::acl::{conn_as, denied, snapshot, user};
use common::*;

const CH: &str = "redisson_countdownlatch__channel__{l}";

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn trysetcount_sets_an_absent_latch_once_and_publishes_one() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "l", "2"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "l", "5"]), Value::Int(0));
    ok(&mut c, &["HSET", "h", "f", "v"]);
    assert_eq!(ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "h", "5"]), Value::Int(0), "any key is present");
    assert_eq!(get(&mut c, "l").as_deref(), Some("2"));
    assert_eq!(pttl(&mut c, "l"), -1);
    assert_eq!(ok(&mut c, &["COUNTDOWN.COUNT", "l"]), Value::Int(2));
    assert_eq!(sub.take(), msgs(&[(CH, "1")]));
}

#[test]
fn decr_counts_down_and_at_zero_deletes_the_latch_and_publishes_zero() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "l", "2"]);
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["COUNTDOWN.AWAIT", "l"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(1));
    assert_eq!(get(&mut c, "l").as_deref(), Some("1"));
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(0));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(ok(&mut c, &["COUNTDOWN.AWAIT", "l"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["COUNTDOWN.COUNT", "l"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(0), "absent: nothing written");
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take(), msgs(&[(CH, "0")]));
}

#[test]
fn a_count_below_zero_is_deleted_without_a_message() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "l", "-3"]);
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["COUNTDOWN.AWAIT", "l"]), Value::Int(0), "open only at exactly 0");
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(0));
    assert_eq!(keys(&mut c), Vec::<String>::new());
    assert_eq!(sub.take(), msgs(&[]));
}

#[test]
fn bad_input_gets_an_error_and_writes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "text", "x"]);
    ok(&mut c, &["SET", "min", &i64::MIN.to_string()]);
    ok(&mut c, &["RPUSH", "list", "a"]);
    let before = snapshot(&mut c);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["COUNTDOWN.TRYSETCOUNT", "n", "-1"], "ERR count must be a non-negative integer"),
        (&["COUNTDOWN.TRYSETCOUNT", "n", "two"], "ERR value is not an integer or out of range"),
        (&["COUNTDOWN.DECR", "text"], "ERR value is not an integer or out of range"),
        (&["COUNTDOWN.DECR", "min"], "ERR increment or decrement would overflow"),
        (&["COUNTDOWN.DECR", "list"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["COUNTDOWN.AWAIT", "list"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["COUNTDOWN.AWAIT", "text", "BLOCK", "10"], "ERR value is not an integer or out of range"),
        (&["COUNTDOWN.AWAIT", "n", "BLOCK", "x"], "ERR value is not an integer or out of range"),
        (&["COUNTDOWN.AWAIT", "n", "NOW"], "ERR syntax error"),
        (&["COUNTDOWN.COUNT", "text"], "ERR value is not an integer or out of range"),
        (&["COUNTDOWN.DECR", "n", "1"], "ERR wrong number of arguments for 'countdown.decr' command"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before);
}

#[test]
fn a_user_who_may_not_publish_on_the_latch_channel_gets_noperm_and_nothing_is_written() {
    let s = Server::start();
    let mut admin = s.conn();
    ok(&mut admin, &["COUNTDOWN.TRYSETCOUNT", "l", "1"]);
    user(&mut admin, "app", &["~*", "&other", "+@all"]);
    let mut c = conn_as(&s, "app");
    let no = "NOPERM No permissions to access the 'redisson_countdownlatch__channel__{l}' channel";
    denied(&mut admin, &mut c, &["COUNTDOWN.DECR", "l"], no);
    denied(
        &mut admin,
        &mut c,
        &["COUNTDOWN.TRYSETCOUNT", "m", "1"],
        "NOPERM No permissions to access the 'redisson_countdownlatch__channel__{m}' channel",
    );
    assert_eq!(ok(&mut c, &["COUNTDOWN.COUNT", "l"]), Value::Int(1));
}

#[test]
fn a_replica_and_a_reload_have_the_same_latches() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "a", "3"]);
    ok(&mut c, &["COUNTDOWN.DECR", "a"]);
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "b", "1"]);
    ok(&mut c, &["COUNTDOWN.DECR", "b"]);
    wait_replica(&mut c);
    let mut r = replica.conn();
    assert_eq!(keys(&mut r), ["a"]);
    assert_eq!(get(&mut r, "a").as_deref(), Some("2"));
    assert_eq!(ok(&mut r, &["COUNTDOWN.COUNT", "a"]), Value::Int(2), "read-only: a replica answers");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(keys(&mut c), ["a"]);
    assert_eq!(get(&mut c, "a").as_deref(), Some("2"));
}
