//! `GCRA` against a real server (issue 30): Redis' replies (hand-computed tables), the stored
//! arrival time and its expiry, errors that change nothing, keyspace events, `WATCH`, ACL,
//! paused writes, a replica, the AOF and `DEBUG RELOAD` (with `CL.THROTTLE` beside it), and
//! the command's metadata. Redisson's own calls are in `gcra_redisson.rs`.

use crate::common;

use std::time::Duration;

use common::acl::{conn_as, snapshot, user};
use common::gcra::{assert_tat, expiry_of, five, in_one_exec, run, server_us, tat, CELL_PER_MS, GCRA_PER_MS};
use common::parked::wait_blocked;
use common::*;

const S: i64 = 1_000_000; // one second in GCRA's microseconds

#[rustfmt::skip]
#[test]
fn gcra_replies_as_redis_documents_and_stores_the_arrival_time_in_microseconds() {
    let s = Server::start();
    let mut c = s.conn();
    let t0 = server_us(&mut c);
    let call: &[&str] = &["GCRA", "api:user:123", "5", "10", "60"];
    // 10 per 60 s: one every 6 s, a burst of 6 (Redis' own GCRA page shows the first and last).
    assert_eq!(in_one_exec(&mut c, &[call; 7]), [
        [0, 6, 5, -1, 6],
        [0, 6, 4, -1, 12],
        [0, 6, 3, -1, 18],
        [0, 6, 2, -1, 24],
        [0, 6, 1, -1, 30],
        [0, 6, 0, -1, 36],
        [1, 6, 0, 6, 36],
    ]);
    let stored = assert_tat(&mut c, "api:user:123", GCRA_PER_MS, t0, 36 * S);
    assert_eq!(stored % 1000, 0, "GCRA reads the clock in whole ms, as Redis");
    // A cost above the burst never fits: no retry time, nothing taken.
    assert_eq!(run(&mut c, &["GCRA", "other", "5", "10", "60", "TOKENS", "7"]), [1, 6, 6, -1, 0]);
    assert_eq!(tat(&mut c, "other"), None);
}

#[rustfmt::skip]
#[test]
fn gcra_takes_fractional_periods_tokens_and_a_burst_of_zero() {
    let s = Server::start();
    let mut c = s.conn();
    // Redisson's trySetRate(2, 4, 250 ms) sends "0.25": 62.5 ms apart, a burst of 3.
    let call: &[&str] = &["GCRA", "q", "2", "4", "0.25"];
    assert_eq!(in_one_exec(&mut c, &[call; 4]), [[0, 3, 2, -1, 1], [0, 3, 1, -1, 1], [0, 3, 0, -1, 1], [1, 3, 0, 1, 1]]);
    assert_eq!(run(&mut c, &["GCRA", "t", "2", "4", "0.25", "tokens", "2"]), [0, 3, 1, -1, 1]);
    let m: &[&str] = &["GCRA", "m", "0", "1", "1"];
    assert_eq!(in_one_exec(&mut c, &[m, m]), [[0, 1, 0, -1, 1], [1, 1, 0, 1, 1]]);
    // 3 per 100 s: 33,333,333 us apart, so the key expires at a millisecond rounded up.
    run(&mut c, &["GCRA", "third", "0", "3", "100"]);
    let v = tat(&mut c, "third").expect("stored");
    assert_eq!(pexpiretime(&mut c, "third"), expiry_of(v, GCRA_PER_MS));
}

#[test]
fn a_refused_request_writes_nothing_fires_no_event_and_keeps_watch() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KA"]);
    let sub = s.subscriber();
    let call = ["GCRA", "k", "0", "1", "60"];
    assert_eq!(run(&mut c, &call)[0], 0);
    assert_eq!(sub.take(), msgs(&[("__keyspace@0__:k", "set"), ("__keyspace@0__:k", "expire")]));
    let (value, at) = (tat(&mut c, "k"), pexpiretime(&mut c, "k"));
    let mut w = s.conn();
    ok(&mut w, &["WATCH", "k"]);
    assert_eq!(run(&mut c, &call)[0], 1, "refused");
    assert_eq!((tat(&mut c, "k"), pexpiretime(&mut c, "k")), (value, at));
    assert_eq!(sub.take(), msgs(&[]), "a refusal fires no event");
    ok(&mut w, &["MULTI"]);
    ok(&mut w, &["SET", "x", "1"]);
    assert_eq!(ok(&mut w, &["EXEC"]), Value::Array(vec![Value::Okay]), "WATCH saw no change");
}

#[rustfmt::skip]
#[test]
fn bad_arguments_and_keys_get_redis_own_errors_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RPUSH", "list", "a"]);
    ok(&mut c, &["SET", "text", "abc"]);
    ok(&mut c, &["SET", "zero", "0"]);
    ok(&mut c, &["SET", "negative", "-5"]);
    ok(&mut c, &["SET", "far", "9223372036854775000"]);
    run(&mut c, &["GCRA", "held", "1", "1", "60"]);
    let before = snapshot(&mut c);
    let range = "ERR value is out of range, value must between 1 and 9223372036854775807";
    let period = "ERR period must be > 0 and < 1e12";
    let tokens_overflow = "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow";
    let cases: &[(&[&str], &str)] = &[
        (&["GCRA", "k", "5", "10"],                        "ERR wrong number of arguments for 'gcra' command"),
        (&["GCRA", "k", "5", "10", "1", "TOKENS", "1", "x"], "ERR wrong number of arguments for 'gcra' command"),
        (&["GCRA", "held", "-1", "5", "10"],               "ERR value is out of range, must be positive"),
        (&["GCRA", "held", "x", "5", "10"],                "ERR value is out of range, must be positive"),
        (&["GCRA", "held", "5", "0", "10"],                range),
        (&["GCRA", "held", "5", "-1", "10"],               range),
        (&["GCRA", "held", "5", "x", "10"],                "ERR value is not an integer or out of range"),
        (&["GCRA", "held", "5", "10", "0"],                period),
        (&["GCRA", "held", "5", "10", "-1"],               period),
        (&["GCRA", "held", "5", "10", "1e12"],             period),
        (&["GCRA", "held", "5", "10", "inf"],              period),
        (&["GCRA", "held", "5", "10", "x"],                "ERR value is not a valid float"),
        (&["GCRA", "held", "5", "10", " 1"],               "ERR value is not a valid float"),
        (&["GCRA", "held", "5", "10", "nan"],              "ERR value is not a valid float"),
        (&["GCRA", "held", "5", "10", "10", "TOKENS"],     "ERR Missing TOKENS value"),
        (&["GCRA", "held", "5", "10", "10", "NUM_REQUESTS", "2"], "ERR syntax error"),
        (&["GCRA", "held", "5", "10", "10", "TOKENS", "0"], range),
        (&["GCRA", "held", "5", "10", "10", "TOKENS", "x"], "ERR value is not an integer or out of range"),
        // The overflows Redis' own tests trigger.
        (&["GCRA", "held", "1", "1", "86400", "TOKENS", "200000000"], tokens_overflow),
        (&["GCRA", "held", "200000000", "1", "86400"], "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow"),
        (&["GCRA", "held", "1", "1", "2147483647", "TOKENS", "2147483647"], tokens_overflow),
        (&["GCRA", "far", "1", "1", "60"],                 tokens_overflow),
        (&["GCRA", "list", "1", "1", "60"],                "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["GCRA", "text", "1", "1", "60"],                "ERR Invalid GCRA key"),
        (&["GCRA", "zero", "1", "1", "60"],                "ERR Negative time is invalid value for GCRA"),
        (&["GCRA", "negative", "1", "1", "60"],            "ERR Negative time is invalid value for GCRA"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before);
}

/// (value, expiry) of every key, for comparing a replica or a reload with the primary.
fn state(c: &mut redis::Connection) -> Vec<(String, Option<i64>, i64)> {
    keys(c).into_iter().map(|k| (k.clone(), tat(c, &k), pexpiretime(c, &k))).collect()
}

/// `cmdstat_<name>` calls in `INFO commandstats` (0 when absent).
fn calls(c: &mut redis::Connection, name: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).expect("INFO");
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|l| l.to_lowercase().strip_prefix(&prefix).map(|r| r.split(',').next().unwrap_or("0").to_string()))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_replica_the_aof_and_a_reload_end_with_the_same_value_and_expiry() {
    let s = Server::start_with(true, &["--appendonly", "yes"]);
    let replica = s.replica();
    let mut c = s.conn();
    let mut granted = 0;
    for args in [
        &["GCRA", "g", "1", "1", "60"][..],
        &["GCRA", "g", "1", "1", "60"],
        &["GCRA", "g", "1", "1", "60"], // refused
        &["GCRA", "f", "2", "3", "60", "TOKENS", "2"],
        &["CL.THROTTLE", "c", "1", "3", "60"],
        &["CL.THROTTLE", "c", "1", "3", "60", "2"], // refused
        &["CL.THROTTLE", "c", "1", "3", "60", "0"], // a peek
    ] {
        granted += i64::from(run(&mut c, args)[0] == 0 && args.get(5) != Some(&"0"));
    }
    wait_replica(&mut c);
    let primary = state(&mut c);
    assert_eq!(primary.iter().map(|k| k.0.as_str()).collect::<Vec<_>>(), ["c", "f", "g"]);
    let mut r = replica.conn();
    assert_eq!(state(&mut r), primary, "the replica's values and absolute expiries");
    // The replica got each grant's effect, `SET key tat PXAT ms`: never the command, which
    // would read the replica's own clock.
    assert_eq!(calls(&mut r, "set"), granted);
    assert_eq!((calls(&mut r, "gcra"), calls(&mut r, "cl.throttle")), (0, 0));
    assert_eq!(
        call(&mut r, &["GCRA", "g", "1", "1", "60"]),
        Err("READONLY You can't write against a read only replica.".into())
    );
    ok(&mut c, &["DEBUG", "LOADAOF"]);
    assert_eq!(state(&mut c), primary, "the AOF replayed");
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(state(&mut c), primary, "the RDB reloaded");
}

#[test]
fn a_user_who_may_not_write_the_key_is_refused_before_anything_is_written() {
    let s = Server::start();
    let mut admin = s.conn();
    user(&mut admin, "other", &["~other:*", "+@all"]);
    user(&mut admin, "reader", &["%R~*", "+@all"]);
    run(&mut admin, &["GCRA", "k", "0", "1", "60"]);
    let before = snapshot(&mut admin);
    for name in ["other", "reader"] {
        let mut c = conn_as(&s, name);
        for args in [
            &["GCRA", "k", "5", "1", "60"][..],
            &["GCRA", "new", "5", "1", "60"],
            &["CL.THROTTLE", "k", "5", "1", "60"],
        ] {
            let e = call(&mut c, args).expect_err("denied");
            assert!(e.starts_with("NOPERM"), "{name} {args:?}: {e}");
        }
    }
    assert_eq!(snapshot(&mut admin), before);
    let mut ok_user = conn_as(&s, "other");
    assert_eq!(run(&mut ok_user, &["GCRA", "other:k", "5", "1", "60"])[0], 0, "its own keys are fine");
}

#[test]
fn paused_writes_hold_a_request_until_the_pause_ends() {
    let s = Server::start();
    let mut admin = s.conn();
    ok(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    let mut c = s.conn();
    let waiter = std::thread::spawn(move || run(&mut c, &["GCRA", "k", "1", "1", "60"]));
    wait_blocked(&mut admin, 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(keys(&mut admin), Vec::<String>::new(), "nothing written while paused");
    ok(&mut admin, &["CLIENT", "UNPAUSE"]);
    assert_eq!(waiter.join().expect("waiter"), [0, 2, 1, -1, 60]);
    assert!(tat(&mut admin, "k").is_some());
}

#[test]
fn resp3_gets_the_same_five_integers() {
    let s = Server::start();
    let mut c = s.conn3();
    assert_eq!(five(&ok(&mut c, &["GCRA", "k", "5", "10", "60"])), [0, 6, 5, -1, 6]);
    assert_eq!(five(&ok(&mut c, &["CL.THROTTLE", "c", "15", "30", "60"])), [0, 16, 15, -1, 2]);
}

#[test]
fn both_commands_are_fast_writes_with_one_key_and_documented_arguments() {
    let s = Server::start();
    let mut c = s.conn();
    for name in ["GCRA", "CL.THROTTLE"] {
        let Value::Array(info) = ok(&mut c, &["COMMAND", "INFO", name]) else { panic!("COMMAND INFO") };
        let Value::Array(info) = &info[0] else { panic!("{name} unknown") };
        let flags = format!("{:?}", info[2]);
        for f in ["write", "denyoom", "fast"] {
            assert!(flags.contains(f), "{name}: {flags}");
        }
        assert_eq!((int(&info[3]), int(&info[4]), int(&info[5])), (1, 1, 1), "{name}: first, last, step");
    }
    let docs = format!("{:?}", ok(&mut c, &["COMMAND", "DOCS", "GCRA"]));
    for part in ["tokens_per_period", "\"double\"", "TOKENS"] {
        assert!(docs.contains(part), "{part} in {docs}");
    }
    let t0 = server_us(&mut c);
    assert_eq!(run(&mut c, &["CL.THROTTLE", "c", "0", "3", "10"]), [0, 1, 0, -1, 3]);
    assert_tat(&mut c, "c", CELL_PER_MS, t0, 3_333_333_333);
}
