//! The rate limiter never grants past its rate and never takes what it cannot read (issue 36):
//! a rate changed for another client, a hash field the module cannot read, and every other bad
//! input, each an error that writes nothing. Times are given with `NOW`.

use crate::common;

use common::acl::snapshot;
use common::*;

const T0: i64 = 1_000_000;

fn now(t: i64) -> String {
    (T0 + t).to_string()
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn acquire(c: &mut redis::Connection, n: &str, t: i64) -> Value {
    ok(c, &["RATELIMITER.ACQUIRE", "r", n, "NOW", &now(t)])
}

fn limiter(s: &Server, rate: &str, interval: &str) -> redis::Connection {
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", rate, interval]), Value::Int(1));
    c
}

/// Permits per millisecond of the grant zset (ms after T0).
fn grants(c: &mut redis::Connection, key: &str) -> Vec<(i64, u32)> {
    common::ratelimiter::grants_per_ms(c, key).into_iter().map(|(t, p)| (t - T0, p)).collect()
}

/// Issue 36's repro: a rate lowered for another client (`SETRATE ... KEEPSTATE CLIENT c2`)
/// left c1's value above what c1's window leaves; the next call took the excess for a release
/// and deleted c1's grants, and 13 permits went in one 50 s window of rate 10.
#[test]
fn a_rate_changed_for_another_client_never_lets_a_window_pass_its_rate() {
    let s = Server::start();
    let mut c = s.conn();
    let at = |t: i64| now(t);
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "rl", "PER_CLIENT", "10", "50000"]);
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "rl", "3", "CLIENT", "c1", "NOW", &at(0)]), Value::Nil);
    ok(&mut c, &["RATELIMITER.SETRATE", "rl", "PER_CLIENT", "1", "50000", "KEEPSTATE", "CLIENT", "c2", "NOW", &at(0)]);
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "rl", "CLIENT", "c1", "NOW", &at(0)]), Value::Int(0));
    assert_eq!(grants(&mut c, "{rl}:permits:c1"), [(0, 3)], "c1's grants stay");
    ok(&mut c, &["RATELIMITER.SETRATE", "rl", "PER_CLIENT", "10", "50000", "KEEPSTATE", "CLIENT", "c1", "NOW", &at(1)]);
    assert_eq!(get(&mut c, "{rl}:value:c1").as_deref(), Some("7"), "as Redisson's setRate(KEEPSTATE) body leaves it");
    let granted = (0..10)
        .filter(|_| ok(&mut c, &["RATELIMITER.ACQUIRE", "rl", "1", "CLIENT", "c1", "NOW", &at(2)]) == Value::Nil)
        .count();
    assert_eq!(granted, 7, "10 permits in the window, the rate");
    assert_eq!(grants(&mut c, "{rl}:permits:c1").iter().map(|g| g.1).sum::<u32>(), 10);
}

#[test]
fn bad_input_gets_an_error_and_writes_nothing() {
    let s = Server::start();
    let mut c = limiter(&s, "10", "1000");
    acquire(&mut c, "1", 0);
    ok(&mut c, &["HSET", "half", "rate", "1"]);
    ok(&mut c, &["HSET", "bad", "rate", "x", "interval", "1000", "type", "0"]);
    ok(&mut c, &["HSET", "badtype", "rate", "5", "interval", "1000", "type", "2"]);
    ok(&mut c, &["SET", "str", "1"]);
    ok(&mut c, &["HSET", "wv", "rate", "5", "interval", "1000", "type", "0"]);
    ok(&mut c, &["LPUSH", "{wv}:value", "x"]);
    let before = snapshot(&mut c);
    let t = now(0);
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["RATELIMITER.ACQUIRE", "none", "1"], "ERR RateLimiter is not initialized"),
        (&["RATELIMITER.ACQUIRE", "half", "1"], "ERR RateLimiter is not initialized"),
        (&["RATELIMITER.AVAILABLE", "none"], "ERR RateLimiter is not initialized"),
        (&["RATELIMITER.RELEASE", "none", "1"], "ERR RateLimiter is not initialized"),
        (&["RATELIMITER.ACQUIRE", "r", "0"], "ERR permits must be an integer from 1 to 4294967295"),
        (&["RATELIMITER.ACQUIRE", "r", "-2"], "ERR permits must be an integer from 1 to 4294967295"),
        (&["RATELIMITER.ACQUIRE", "r", "4294967296"], "ERR permits must be an integer from 1 to 4294967295"),
        (&["RATELIMITER.RELEASE", "r", "0"], "ERR permits must be an integer from 1 to 4294967295"),
        (&["RATELIMITER.ACQUIRE", "r", "1.5"], "ERR value is not an integer or out of range"),
        (&["RATELIMITER.ACQUIRE", "r", "11"], "ERR Requested permits amount cannot exceed defined rate"),
        (&["RATELIMITER.ACQUIRE", "bad", "1"], "ERR rate limiter field 'rate' is not an integer of at least 1: the limiter's hash is not one Redisson writes"),
        (&["RATELIMITER.ACQUIRE", "badtype", "1"], "ERR rate limiter field 'type' is not 0 or 1: the limiter's hash is not one Redisson writes"),
        (&["RATELIMITER.ACQUIRE", "str", "1"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RATELIMITER.ACQUIRE", "wv", "1"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RATELIMITER.ACQUIRE", "r", "1", "NOW", "-1"], "ERR NOW must be a time in ms from 0 to 9007199254740992"),
        (&["RATELIMITER.ACQUIRE", "r", "1", "NOW", &t, "BLOCK", "10"], "ERR NOW cannot be combined with BLOCK"),
        (&["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "-1"], "ERR timeout must be a non-negative integer (ms; 0 waits without a limit)"),
        (&["RATELIMITER.ACQUIRE", "r", "1", "CLIENT"], "ERR syntax error"),
        (&["RATELIMITER.ACQUIRE", "r", "1", "NOW", &t, "NOW", &t], "ERR syntax error"),
        (&["RATELIMITER.TRYSETRATE", "n", "SOME", "1", "1000"], "ERR syntax error"),
        (&["RATELIMITER.TRYSETRATE", "n", "OVERALL", "0", "1000"], "ERR rate must be a positive integer"),
        (&["RATELIMITER.TRYSETRATE", "n", "OVERALL", "1", "0"], "ERR interval must be a positive integer"),
        (&["RATELIMITER.TRYSETRATE", "n", "OVERALL", "1", "1000", "KEEPALIVE", "999"], "ERR keepalive must be at least the interval"),
        (&["RATELIMITER.TRYSETRATE", "n", "OVERALL", "1", "1000", "KEEPSTATE"], "ERR syntax error"),
        (&["RATELIMITER.TRYSETRATE", "str", "OVERALL", "1", "1000"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RATELIMITER.SETRATE", "str", "OVERALL", "1", "1000"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RATELIMITER.SETRATE", "wv", "OVERALL", "1", "1000", "KEEPSTATE"], "WRONGTYPE Operation against a key holding the wrong kind of value"),
        (&["RATELIMITER.SETRATE", "n", "OVERALL", "1", "9223372036854775807"], "ERR invalid expire time in 'ratelimiter.setrate' command"),
        (&["RATELIMITER.ACQUIRE", "r"], "ERR wrong number of arguments for 'ratelimiter.acquire' command"),
        (&["RATELIMITER.TRYSETRATE", "r", "OVERALL", "1"], "ERR wrong number of arguments for 'ratelimiter.trysetrate' command"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before, "an error writes nothing");
    // A malformed grant (not struct.pack('Bc0I')) is found before anything is written.
    ok(&mut c, &["ZADD", "{r}:permits", &now(1), "\x10ab"]);
    let before = snapshot(&mut c);
    let err = call(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &now(5)]);
    assert_eq!(err, Err("ERR rate limiter grant is not struct.pack('Bc0I', #random, random, permits)".into()));
    assert_eq!(snapshot(&mut c), before);
}

/// Issue 36: a hash field the module cannot read (a negative rate was taken, and AVAILABLE and
/// RELEASE replied 0): every command that reads the limiter fails with an error naming the
/// field, and nothing changes.
#[test]
fn a_limiter_hash_the_module_cannot_read_fails_every_command_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    #[rustfmt::skip]
    let bad: &[(&str, &str, &str)] = &[
        ("rate", "-5", "an integer of at least 1"), ("rate", "0", "an integer of at least 1"),
        ("rate", "2.5", "an integer of at least 1"), ("rate", "many", "an integer of at least 1"),
        ("interval", "0", "an integer of at least 1"), ("interval", "-1000", "an integer of at least 1"),
        ("type", "2", "0 or 1"), ("keepAliveTime", "soon", "an integer"),
    ];
    for &(field, value, want) in bad {
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "10", "1000"]);
        acquire(&mut c, "4", 0);
        ok(&mut c, &["HSET", "r", field, value]);
        let before = snapshot(&mut c);
        let err =
            format!("ERR rate limiter field '{field}' is not {want}: the limiter's hash is not one Redisson writes");
        for cmd in [
            &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &now(1)][..],
            &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "100"],
            &["RATELIMITER.AVAILABLE", "r", "NOW", &now(1)],
            &["RATELIMITER.RELEASE", "r", "1", "NOW", &now(1)],
        ] {
            assert_eq!(call(&mut c, cmd), Err(err.clone()), "{field} = {value}: {cmd:?}");
        }
        assert_eq!(snapshot(&mut c), before, "{field} = {value}");
    }
}
