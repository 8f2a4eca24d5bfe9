//! `GCRA` and `CL.THROTTLE` in the tests: replies as five integers, the stored arrival time
//! (TAT) and its expiry, and the server's clock around a call.

use super::{ok, Value};

/// GCRA keeps its TAT in microseconds, CL.THROTTLE in nanoseconds: units per millisecond.
pub const GCRA_PER_MS: i64 = 1_000;
pub const CELL_PER_MS: i64 = 1_000_000;

/// The five integers of a reply (Redisson's `GcraResultDecoder` needs exactly five integers).
pub fn five(v: &Value) -> [i64; 5] {
    match v {
        Value::Array(a) if a.len() == 5 => {
            let mut out = [0; 5];
            for (o, x) in out.iter_mut().zip(a) {
                *o = match x {
                    Value::Int(n) => *n,
                    other => panic!("a reply element is not an integer: {other:?} in {v:?}"),
                };
            }
            out
        }
        other => panic!("expected 5 integers, got {other:?}"),
    }
}

/// Every reply of a `MULTI ... EXEC` of `calls`, as five integers each: the calls run
/// back to back, so a table computed for one instant holds (the tables allow for the few
/// microseconds between them).
pub fn in_one_exec(c: &mut redis::Connection, calls: &[&[&str]]) -> Vec<[i64; 5]> {
    let mut p = redis::pipe();
    p.atomic();
    for args in calls {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        p.add_command(cmd);
    }
    let replies: Vec<Value> = p.query(c).expect("EXEC");
    replies.iter().map(five).collect()
}

/// The server's clock in microseconds (`TIME`).
pub fn server_us(c: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1_000_000 + us
}

/// The stored arrival time of `key` (None: no key).
pub fn tat(c: &mut redis::Connection, key: &str) -> Option<i64> {
    let v: Option<String> = redis::cmd("GET").arg(key).query(c).expect("GET");
    v.map(|s| s.parse().unwrap_or_else(|_| panic!("{key} holds {s:?}, not an integer")))
}

/// The first whole millisecond at or after `tat`: where the key must expire.
pub fn expiry_of(tat: i64, per_ms: i64) -> i64 {
    tat.div_euclid(per_ms) + i64::from(tat.rem_euclid(per_ms) != 0)
}

/// Asserts that `key` holds a TAT `ahead` (in its units) after some clock reading from `t0_us`
/// to now, and expires at that TAT's millisecond rounded up. Returns the TAT.
#[track_caller]
pub fn assert_tat(c: &mut redis::Connection, key: &str, per_ms: i64, t0_us: i64, ahead: i64) -> i64 {
    let t1_us = server_us(c);
    let per_us = per_ms / 1000;
    // A server without a microsecond clock (Redis 7.0) reads whole milliseconds.
    let (lo, hi) = ((t0_us / 1000 * 1000) * per_us + ahead, t1_us * per_us + ahead);
    let got = tat(c, key).unwrap_or_else(|| panic!("no {key}"));
    assert!((lo..=hi).contains(&got), "{key} holds {got}, not {ahead} after a moment in {lo}..={hi} (minus it)");
    assert_eq!(super::pexpiretime(c, key), expiry_of(got, per_ms), "{key}'s expiry");
    got
}

/// Runs a command that must succeed and returns its five integers.
pub fn run(c: &mut redis::Connection, args: &[&str]) -> [i64; 5] {
    five(&ok(c, args))
}
