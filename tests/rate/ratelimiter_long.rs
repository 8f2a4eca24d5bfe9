//! What one rate limiter call does, on any window (issue 36): after a quiet spell on a long
//! window it removes at most 512 of the grants that left (`ZREMRANGEBYRANK`, replicated as
//! such), leaves the rest out of the value so that Redisson's body reads exactly what is
//! available, and the next calls remove the rest; a window that left whole goes with one
//! `UNLINK`; a grant is one `ZADD` (no fold of a millisecond that is still young); nothing is
//! summed again on a window the module wrote. Times are given with `NOW`; the work is shown by
//! the keyspace, the replication stream (a replica, and its keyspace) and the keyspace events.

use crate::common;

use common::parked::lockmod_field;
use common::ratelimiter::{self as rl, evalsha, grants_per_ms, run};
use common::*;

const T0: i64 = 1_700_000_000_000;
/// Removed by one call at most (`core::rate::index::STEP`).
const STEP: i64 = 512;

fn at(t: i64) -> String {
    (T0 + t).to_string()
}

fn zcard(c: &mut redis::Connection, key: &str) -> i64 {
    int(&ok(c, &["ZCARD", key]))
}

fn get(c: &mut redis::Connection, key: &str) -> Option<i64> {
    let v: Option<String> = redis::cmd("GET").arg(key).query(c).expect("GET");
    v.map(|v| v.parse().expect("an integer"))
}

/// A limiter `r` of `interval` ms with `n` grants of 2 permits, one every `every` ms from T0.
fn filled(c: &mut redis::Connection, interval: i64, n: i64, every: i64) {
    ok(c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "1000000000", &interval.to_string()]);
    for part in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut p = redis::pipe();
        for i in part {
            p.cmd("RATELIMITER.ACQUIRE").arg("r").arg(2).arg("NOW").arg(at(i * every));
        }
        let _: Vec<Value> = p.query(c).expect("fill");
    }
}

/// `lockmod_ratelimiter_window_sums`: how often a window's index was rebuilt by a walk.
fn sums(c: &mut redis::Connection) -> i64 {
    lockmod_field(c, "ratelimiter_window_sums")
}

#[test]
fn a_call_after_a_quiet_spell_on_a_long_window_removes_a_step_and_the_count_stays_exact() {
    let s = Server::start();
    let mut c = s.conn();
    let r = s.replica();
    let mut rc = r.conn();
    rl::load_on(&mut c, &rl::load());
    // 4,000 grants over 20 s; at 35 s, the 3,001 of the first 15 s have left.
    filled(&mut c, 20_000, 4_000, 5);
    let (rate, live) = (1_000_000_000, 2 * 999);
    let before = sums(&mut c);
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &at(35_000)]), Value::Int(rate - live));
    assert_eq!(zcard(&mut c, "{r}:permits"), 4_000 - STEP, "one step removed");
    // The rest is left out of the value: Redisson's availablePermits adds it back.
    let left = 2 * (3_001 - STEP);
    assert_eq!(get(&mut c, "{r}:value"), Some(rate - live - left));
    let body = evalsha(rl::AVAILABLE, &rl::keys("r", "c"), &[at(35_000).into_bytes()]);
    assert_eq!(run(&mut c, &body), Ok(Value::Int(rate - live)), "Redisson's body reads what is available");
    // Redisson's body removed the rest itself (its own `ZREMRANGEBYSCORE`).
    assert_eq!(zcard(&mut c, "{r}:permits"), 999);
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &at(35_000)]), Value::Int(rate - live));
    assert_eq!(sums(&mut c), before + 1, "summed once: Redisson's body wrote the window");
    ok(&mut c, &["FLUSHALL"]);
    filled(&mut c, 20_000, 4_000, 5);
    for call in 1..=6 {
        assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &at(35_000)]), Value::Nil);
        let gone = (call * STEP).min(3_001);
        assert_eq!(zcard(&mut c, "{r}:permits"), 4_000 - gone + call, "call {call}");
    }
    assert_eq!(sums(&mut c), before + 1, "a window the module wrote is never summed");
    wait_replica(&mut c);
    assert_eq!(grants_per_ms(&mut rc, "{r}:permits"), grants_per_ms(&mut c, "{r}:permits"));
    assert_eq!(get(&mut rc, "{r}:value"), get(&mut c, "{r}:value"));
}

#[test]
fn a_window_that_left_whole_is_unlinked_in_one_call() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    filled(&mut c, 20_000, 4_000, 5);
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "3", "NOW", &at(60_000)]), Value::Nil);
    assert_eq!(zcard(&mut c, "{r}:permits"), 1);
    assert_eq!(get(&mut c, "{r}:value"), Some(1_000_000_000 - 3));
    let events: Vec<(String, String)> = sub
        .take()
        .into_iter()
        .filter_map(|(ch, ev)| ch.strip_prefix("__keyspace@0__:").map(|k| (k.to_string(), ev)))
        .filter(|(k, _)| k == "{r}:permits")
        .collect();
    assert_eq!(events, msgs(&[("{r}:permits", "del"), ("{r}:permits", "zadd")]));
}

/// Issue 36 (per call): a grant on a busy millisecond is one `ZADD`, as Redisson's body makes
/// it: no scan and re-make of the millisecond's member (a `ZADD` and a `ZREM`) per grant. A
/// millisecond of 16 grants or more folds into one member once it is 16 ms old.
#[test]
fn a_grant_is_one_zadd_and_a_busy_millisecond_folds_when_it_is_old() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "1000", "60000"]);
    let sub = s.subscriber();
    for _ in 0..20 {
        assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &at(0)]), Value::Nil);
    }
    let zset: Vec<String> =
        sub.take().into_iter().filter(|(ch, _)| ch == "__keyspace@0__:{r}:permits").map(|(_, ev)| ev).collect();
    assert_eq!(zset, vec!["zadd"; 20], "one ZADD a grant");
    assert_eq!(zcard(&mut c, "{r}:permits"), 20);
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &at(15)]), Value::Nil);
    assert_eq!(zcard(&mut c, "{r}:permits"), 21, "15 ms old: not yet");
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &at(16)]), Value::Nil);
    assert_eq!(grants_per_ms(&mut c, "{r}:permits"), [(T0, 20), (T0 + 15, 1), (T0 + 16, 1)]);
    assert_eq!(zcard(&mut c, "{r}:permits"), 3);
}
