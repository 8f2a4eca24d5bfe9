//! `CL.THROTTLE` against a real server (issue 30): redis-cell's replies and rounding
//! (hand-computed tables with redis-cell 0.2.2's arithmetic), the stored arrival time in
//! nanoseconds and its expiry, peeks and oversize requests that write nothing, and errors with
//! Redis' codes that change nothing. Replication, ACL and pauses: `gcra.rs`.

use crate::common;

use common::acl::snapshot;
use common::gcra::{assert_tat, in_one_exec, run, server_us, tat, CELL_PER_MS};
use common::*;

const NS: i64 = 1_000_000_000; // one second in CL.THROTTLE's nanoseconds

#[test]
fn the_first_call_replies_as_redis_cells_readme() {
    let s = Server::start();
    let mut c = s.conn();
    let t0 = server_us(&mut c);
    // 30 per 60 s, burst 15: 2 s apart.
    assert_eq!(run(&mut c, &["CL.THROTTLE", "user123", "15", "30", "60"]), [0, 16, 15, -1, 2]);
    assert_tat(&mut c, "user123", CELL_PER_MS, t0, 2 * NS);
}

#[rustfmt::skip]
#[test]
fn replies_truncate_to_whole_seconds_as_redis_cell_does() {
    let s = Server::start();
    let mut c = s.conn();
    let t0 = server_us(&mut c);
    // 5 per 7 s, burst 3: 1.4 s apart, a tolerance of 5.6 s. Each TTL is k * 1.4 s less the
    // few microseconds the calls take, so truncation gives 1, 2, 4, 5 (never a boundary).
    let call: &[&str] = &["CL.THROTTLE", "k", "3", "5", "7"];
    let peek: &[&str] = &["CL.THROTTLE", "k", "3", "5", "7", "0"];
    assert_eq!(in_one_exec(&mut c, &[call, call, call, call, call, peek]), [
        [0, 4, 3, -1, 1],
        [0, 4, 2, -1, 2],
        [0, 4, 1, -1, 4],
        [0, 4, 0, -1, 5],
        [1, 4, 0, 1, 5],  // 1.4 s to wait, truncated
        [0, 4, 0, -1, 5], // a peek is never refused and takes nothing
    ]);
    assert_tat(&mut c, "k", CELL_PER_MS, t0, 4 * 1_400_000_000);
}

#[test]
fn a_peek_and_a_request_larger_than_the_burst_write_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    // redis-cell writes on a peek (the same TAT, or a key expiring at once): no change, so none.
    assert_eq!(run(&mut c, &["CL.THROTTLE", "fresh", "15", "30", "60", "0"]), [0, 16, 16, -1, 0]);
    // More than max_burst + 1 never fits: refused, no retry time.
    assert_eq!(run(&mut c, &["CL.THROTTLE", "big", "4", "1", "1", "6"]), [1, 5, 5, -1, 0]);
    assert_eq!(keys(&mut c), Vec::<String>::new());
    run(&mut c, &["CL.THROTTLE", "k", "4", "1", "60"]);
    let before = snapshot(&mut c);
    assert_eq!(run(&mut c, &["CL.THROTTLE", "k", "4", "1", "60", "0"])[..3], [0, 5, 4]);
    assert_eq!(run(&mut c, &["CL.THROTTLE", "k", "4", "1", "60", "6"])[..4], [1, 5, 4, -1]);
    assert_eq!(snapshot(&mut c), before);
}

/// Issue 36: redis-cell reads the real-time clock at each call, so a second call a moment
/// after a grant that emptied the bucket (one permit a second, no burst) has a little less than
/// a second to wait: 0 s, truncated. Reading the server's clock (whole ms on Redis 7.0, one
/// cached reading per `EXEC` on later servers) put both calls at one instant and replied 1 s.
#[test]
fn a_call_right_after_a_grant_replies_redis_cells_times() {
    let s = Server::start();
    let mut c = s.conn();
    let call: &[&str] = &["CL.THROTTLE", "k", "0", "1", "1"];
    for round in 0..20 {
        ok(&mut c, &["DEL", "k"]);
        assert_eq!(in_one_exec(&mut c, &[call, call]), [[0, 1, 0, -1, 1], [1, 1, 0, 0, 0]], "round {round}");
    }
}

#[test]
fn an_interval_below_a_microsecond_replies_redis_cells_saturated_remaining() {
    let s = Server::start();
    let mut c = s.conn();
    // 1.5 million per second: 666 ns apart. redis-cell divides whole microseconds (6 / 0).
    assert_eq!(run(&mut c, &["CL.THROTTLE", "k", "10", "1500000", "1"]), [0, 11, i64::MAX, -1, 0]);
}

#[rustfmt::skip]
#[test]
fn bad_arguments_get_redis_style_errors_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["HSET", "hash", "f", "v"]);
    ok(&mut c, &["SET", "text", "abc"]);
    ok(&mut c, &["SET", "negative", "-1"]);
    run(&mut c, &["CL.THROTTLE", "held", "1", "1", "60"]);
    let before = snapshot(&mut c);
    let overflow = "ERR CL.THROTTLE arguments overflow its nanosecond arithmetic";
    let cases: &[(&[&str], &str)] = &[
        (&["CL.THROTTLE", "k", "1", "1"],                 "ERR wrong number of arguments for 'cl.throttle' command"),
        (&["CL.THROTTLE", "k", "1", "1", "1", "1", "1"],  "ERR wrong number of arguments for 'cl.throttle' command"),
        (&["CL.THROTTLE", "held", "x", "1", "60"],        "ERR value is not an integer or out of range"),
        (&["CL.THROTTLE", "held", "1", "1.5", "60"],      "ERR value is not an integer or out of range"),
        (&["CL.THROTTLE", "held", "1", "1", "+60"],       "ERR value is not an integer or out of range"),
        (&["CL.THROTTLE", "held", "1", "1", "60", "q"],   "ERR value is not an integer or out of range"),
        (&["CL.THROTTLE", "held", "-1", "1", "60"],       "ERR max_burst must be a non-negative integer"),
        (&["CL.THROTTLE", "held", "1", "0", "60"],        "ERR count must be a positive integer"),
        (&["CL.THROTTLE", "held", "1", "-5", "60"],       "ERR count must be a positive integer"),
        (&["CL.THROTTLE", "held", "1", "1", "0"],         "ERR period must be a positive integer"),
        (&["CL.THROTTLE", "held", "1", "1", "-60"],       "ERR period must be a positive integer"),
        (&["CL.THROTTLE", "held", "1", "1", "60", "-1"],  "ERR quantity must be a non-negative integer"),
        (&["CL.THROTTLE", "held", "1", "2000000000", "1"], "ERR CL.THROTTLE rate too fast: period / count is below 1 ns"),
        (&["CL.THROTTLE", "held", "1", "1", "9223372037"], overflow),
        (&["CL.THROTTLE", "held", "9223372036854775807", "1", "1"], overflow),
        (&["CL.THROTTLE", "held", "1", "1", "60", "9223372036854775807"], overflow),
        (&["CL.THROTTLE", "hash", "1", "1", "60"],        "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["CL.THROTTLE", "text", "1", "1", "60"],        "ERR Invalid CL.THROTTLE key: not a non-negative integer arrival time"),
        (&["CL.THROTTLE", "negative", "1", "1", "60"],    "ERR Invalid CL.THROTTLE key: not a non-negative integer arrival time"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before);
    assert!(tat(&mut c, "held").is_some());
}
