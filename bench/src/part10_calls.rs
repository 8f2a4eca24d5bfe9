//! Part 10a: each `RRateLimiter` call three ways, in alternating chunks: the native
//! `RATELIMITER.*` command and Redisson's body run natively (`lockmod.redisson-scripts native`:
//! its `EVALSHA` answered by the module) on the module's server, and the body as Lua on the
//! server without the module. usec per call (`INFO commandstats`; the accelerated body counts
//! as the native command it was rewritten to) and server CPU per call (`INFO cpu`).

use redis::Value;

use crate::part9::chunk;
use crate::redisson_rate::*;
use crate::redisson_sync::{evalsha, Check};
use crate::report::Table;
use crate::server::{call_s, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

/// A limiter set up on both sides: the native command, and Redisson's trySetRate body.
pub fn set_native(k: &str, rate: &str, interval: &str) -> Vec<String> {
    strs(&["RATELIMITER.TRYSETRATE", k, "OVERALL", rate, interval])
}
pub fn set_lua(k: &str, rate: &str, interval: &str) -> Vec<String> {
    evalsha(TRY_SET, &[k.to_string()], &[rate, interval, "0", "0"])
}

/// A row: the state (a rate, an interval, what was taken) and the call on each side.
struct Row {
    method: &'static str,
    command: &'static str,
    rate: &'static str,
    interval: &'static str,
    /// Permits taken in the setup, in one call (0: none).
    taken: &'static str,
    /// Single permits taken in the setup one by one: a window full of grants.
    filled: usize,
    native: fn(&str) -> Vec<String>,
    native_ok: Check,
    sha: &'static str,
    lua: fn(&str) -> Vec<String>,
    lua_ok: Check,
    /// The 2x target over the Lua applies.
    target: bool,
}

fn is_int(v: &Value) -> bool {
    matches!(v, Value::Int(_))
}

fn acquire_native(k: &str) -> Vec<String> {
    strs(&["RATELIMITER.ACQUIRE", k, "1"])
}

fn acquire_lua(k: &str) -> Vec<String> {
    lua_acquire(k, "1", now_ms())
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    vec![
        Row { method: "tryAcquire, granted", command: "RATELIMITER.ACQUIRE", rate: "1000000000000", interval: "1000", taken: "0", filled: 0,
            native: acquire_native, native_ok: |v| *v == Value::Nil, sha: TRY_ACQUIRE, lua: acquire_lua, lua_ok: |v| *v == Value::Nil, target: true },
        Row { method: "tryAcquire, granted, a full window", command: "RATELIMITER.ACQUIRE", rate: "1000000000000", interval: "50", taken: "0", filled: 20_000,
            native: acquire_native, native_ok: |v| *v == Value::Nil, sha: TRY_ACQUIRE, lua: acquire_lua, lua_ok: |v| *v == Value::Nil, target: false },
        Row { method: "tryAcquire, refused", command: "RATELIMITER.ACQUIRE", rate: "1", interval: "1000000000", taken: "1", filled: 0,
            native: acquire_native, native_ok: is_int, sha: TRY_ACQUIRE, lua: acquire_lua, lua_ok: is_int, target: true },
        Row { method: "availablePermits", command: "RATELIMITER.AVAILABLE", rate: "1000000000000", interval: "1000000000", taken: "5", filled: 0,
            native: |k| strs(&["RATELIMITER.AVAILABLE", k]), native_ok: is_int,
            sha: AVAILABLE, lua: |k| evalsha(AVAILABLE, &keys(k), &[&now_ms().to_string()]),
            lua_ok: |v| is_int(v) || matches!(v, Value::BulkString(_)), target: false },
        Row { method: "release(1)", command: "RATELIMITER.RELEASE", rate: "1000000000000", interval: "1000000000", taken: "1000000", filled: 0,
            native: |k| strs(&["RATELIMITER.RELEASE", k, "1"]), native_ok: is_int,
            sha: RELEASE, lua: |k| evalsha(RELEASE, &keys(k), &["1"]), lua_ok: |v| *v == Value::Nil, target: false },
    ]
}

/// (a): each call beside the body it replaces, run natively and as Lua.
pub fn per_call(b: &mut Bench) -> Res<Table> {
    let (rounds, n) = (b.rounds(7), b.size(2000, 100));
    let mut t = Table::new(&[
        "Redisson call",
        "native command",
        "native usec",
        "body run natively usec",
        "Lua usec",
        "natively / native (usec)",
        "Lua / native (usec)",
        "native CPU usec",
        "body run natively CPU usec",
        "Lua CPU usec",
        "natively / native (CPU)",
    ]);
    let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
    call_s(&mut mc, &["CONFIG", "SET", "lockmod.redisson-scripts", "native"])?;
    for row in rows() {
        // Per side: usec and CPU per round.
        let mut u: [Vec<f64>; 3] = Default::default();
        let mut cpu: [Vec<f64>; 3] = Default::default();
        for r in 0..rounds {
            progress!("part 10a: {} round {}/{rounds}", row.method, r + 1);
            let k = format!("bench:rl:{r}");
            let mut native_setup = vec![set_native(&k, row.rate, row.interval)];
            let mut lua_setup = vec![set_lua(&k, row.rate, row.interval)];
            if row.taken != "0" {
                native_setup.push(strs(&["RATELIMITER.ACQUIRE", &k, row.taken]));
                lua_setup.push(lua_acquire(&k, row.taken, now_ms()));
            }
            for _ in 0..row.filled {
                native_setup.push((row.native)(&k));
                lua_setup.push((row.lua)(&k));
            }
            let native: Vec<Vec<String>> = (0..n).map(|_| (row.native)(&k)).collect();
            let lua: Vec<Vec<String>> = (0..n).map(|_| (row.lua)(&k)).collect();
            // Alternating orders, so no side always runs first.
            for side in [[0, 1, 2], [2, 1, 0], [1, 2, 0]][r % 3] {
                let (us, c) = match side {
                    0 => chunk(&mut mc, &native_setup, &native, row.native_ok, row.command)?,
                    1 => chunk(&mut mc, &lua_setup, &lua, row.lua_ok, row.command)?,
                    _ => chunk(&mut pc, &lua_setup, &lua, row.lua_ok, "evalsha")?,
                };
                u[side].push(us);
                cpu[side].push(c);
            }
        }
        let med = |v: &[f64]| num(Summary::of(v).median);
        let ratio = |a: &[f64], b: &[f64]| format!("{}", Ratio(Summary::of(&ratios(a, b))));
        t.row(vec![
            format!("{} (`{}`)", row.method, &row.sha[..8]),
            format!("`{}`", row.command),
            med(&u[0]),
            med(&u[1]),
            med(&u[2]),
            ratio(&u[1], &u[0]),
            ratio(&u[2], &u[0]),
            med(&cpu[0]),
            med(&cpu[1]),
            med(&cpu[2]),
            ratio(&cpu[1], &cpu[0]),
        ]);
        // Issue 36's target is on the acquire; the other calls are reported.
        let accel = Summary::of(&ratios(&u[1], &u[0]));
        let acquire = row.command == "RATELIMITER.ACQUIRE";
        b.report.target(
            &format!("rate limiter {}: Redisson's body run natively / `{}`, usec per call", row.method, row.command),
            if acquire { ">= 1x" } else { "reported" },
            format!("{}", Ratio(accel)),
            acquire.then_some(accel.median >= 1.0),
        );
        if row.target {
            let lua = Summary::of(&ratios(&u[2], &u[0]));
            b.report.target(
                &format!("rate limiter {}: Redisson's Lua / `{}`, usec per call", row.method, row.command),
                ">= 2x",
                format!("{}", Ratio(lua)),
                Some(lua.median >= 2.0),
            );
        }
    }
    call_s(&mut mc, &["CONFIG", "SET", "lockmod.redisson-scripts", "off"])?;
    Ok(t)
}

/// The section's text.
pub fn describe(rounds: usize, n: usize) -> String {
    format!(
        "Issue 30 and 36: the native `RATELIMITER.*` commands against the bodies Redisson's `RRateLimiter` \
         sends (its current release's, read from `shared/redisson-ratelimiter-scripts/`, SHA1 prefix in \
         brackets): tryAcquire `{}` (3.38+), availablePermits `{}`, release `{}` (3.52+), each body run two \
         ways: natively on the module's server (`lockmod.redisson-scripts native`: the module answers the \
         `EVALSHA` as the Lua would; `INFO commandstats` counts it as the native command it was rewritten \
         to), and as Lua on the server without the module. The bodies get Redisson's five KEYS and ARGV (the \
         driver's clock as its `System.currentTimeMillis()`, 16 fresh bytes per grant); the native commands \
         run on the server's clock. One `OVERALL` limiter per chunk, set up by each side's trySetRate, then \
         {n} calls on it (pipelined, every reply checked); {rounds} rounds, the three sides in rotating order. \
         granted: a rate of 10^12 a second (never refused), a new limiter, so no grant of the chunk leaves \
         the window (Redisson's body pays for removing its grants later, outside the chunk); a full window: \
         the same on a 50 ms window filled by 20,000 grants first, so every side removes the grants that \
         leave as it goes (the steady state); refused: a rate of 1 per 11.6 days, its permit taken; \
         availablePermits with 5 taken; release(1) with 10^6 taken. usec: `INFO commandstats`; CPU: the \
         server's `INFO cpu` user+sys over the chunk, per call. Medians; ratios are the median of per-round \
         ratios, min-max in brackets. The instructions of the same calls, counted by callgrind (10e), resolve \
         what time on shared cores cannot.",
        &TRY_ACQUIRE[..8],
        &AVAILABLE[..8],
        &RELEASE[..8]
    )
}
