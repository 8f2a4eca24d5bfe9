//! Part 10, Redisson's rate limiter (issue 30): the native `RATELIMITER.*` commands against the
//! Lua bodies Redisson's `RRateLimiter` sends (its current release's, read at run time from
//! `../shared/redisson-ratelimiter-scripts/`, never copied into the repository).
//!
//! (a) `part10_calls.rs`: tryAcquire granted and refused, availablePermits and release, usec
//! and server CPU per call, the native commands beside the bodies run natively and as Lua.
//! (b) here: the tryAcquire after a `release()` with N grants in the window, where Redisson's
//! body recomputes the value over the whole zset. (c) `part10_rates.rs`: the longest native
//! call at any rate, after a quiet spell on a long window, and at full load on one.
//! (d) `part10_blocked.rs`: K blocked acquirers, `BLOCK` against Redisson's timer-and-retry
//! `acquire()`. (e) `part10_instr.rs`: (a)'s tryAcquire in instructions (callgrind).

use redis::Value;

use crate::chart;
use crate::names::suffix;
use crate::part10_calls::{per_call, set_lua, set_native};
use crate::redisson_rate::*;
use crate::report::Table;
use crate::server::{call, call_s, command_stat, cpu_seconds, pipeline, Res};
use crate::stats::{num, ratios, Ratio, Summary};
use crate::strs;
use crate::{part10_blocked, part10_instr, part10_rates, progress, Bench};

/// One side of (b): a window of `n` one-permit grants (one per ms, so none fold), then
/// `release(n)` and a tryAcquire one ms after the oldest grants left. Returns the acquire's
/// usec, the release's usec, and the server's CPU usec for the two.
fn refill_once(c: &mut redis::Connection, native: bool, body_release: &str, k: &str, n: usize) -> Res<(f64, f64, f64)> {
    let t0 = 1_700_000_000_000i64;
    let (rate, interval) = (n.to_string(), n.to_string());
    call_s(c, &["FLUSHALL"])?;
    call(c, &if native { set_native(k, &rate, &interval) } else { set_lua(k, &rate, &interval) })?;
    for part in (0..n).collect::<Vec<_>>().chunks(1000) {
        let cmds: Vec<Vec<String>> = part
            .iter()
            .map(|&i| {
                let at = t0 + i as i64;
                if native {
                    strs(&["RATELIMITER.ACQUIRE", k, "1", "NOW", &at.to_string()])
                } else {
                    lua_acquire(k, "1", at)
                }
            })
            .collect();
        if let Some(v) = pipeline(c, &cmds)?.iter().find(|v| **v != Value::Nil) {
            return Err(format!("part 10b: a grant of the window was refused: {v:?}"));
        }
    }
    let t = (t0 + n as i64 + 1).to_string();
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    let cpu0 = cpu_seconds(c)?;
    let (release, acquire, rstat, astat) = if native {
        (
            strs(&["RATELIMITER.RELEASE", k, &rate, "NOW", &t]),
            strs(&["RATELIMITER.ACQUIRE", k, "1", "NOW", &t]),
            "RATELIMITER.RELEASE",
            "RATELIMITER.ACQUIRE",
        )
    } else {
        // The release by EVAL, so that `evalsha` in commandstats is the tryAcquire alone.
        let mut e = vec!["EVAL".to_string(), body_release.to_string(), "5".into()];
        e.extend(keys(k));
        e.push(rate.clone());
        (e, lua_acquire(k, "1", t0 + n as i64 + 1), "eval", "evalsha")
    };
    call(c, &release)?;
    let v = call(c, &acquire)?;
    let cpu = cpu_seconds(c)? - cpu0;
    if v != Value::Nil {
        return Err(format!("part 10b: the acquire after the release was refused: {v:?}"));
    }
    if !native {
        // The body recomputed `rate - used` over the zset: 2 left the window, N - 2 are used.
        let value: Option<String> = redis::cmd("GET").arg(suffix(k, "value")).query(c).map_err(|e| e.to_string())?;
        if value.as_deref() != Some("1") {
            return Err(format!("part 10b: Redisson's body did not recompute (value {value:?})"));
        }
    }
    let (_, au) = command_stat(c, astat)?;
    let (_, ru) = command_stat(c, rstat)?;
    Ok((au as f64, ru as f64, cpu * 1e6))
}

/// (b): the acquire after a release, at N grants in the window.
fn refill(b: &mut Bench) -> Res<(Table, Vec<(String, String)>)> {
    let sizes: Vec<(usize, usize)> = if b.quick { vec![(1000, 2)] } else { vec![(1000, 9), (10_000, 5), (100_000, 3)] };
    let release_body = body(RELEASE)?;
    let mut t = Table::new(&[
        "grants in the window",
        "native ACQUIRE usec",
        "Lua tryAcquire usec",
        "Lua / native (the acquire)",
        "native RELEASE + ACQUIRE usec",
        "Lua release + tryAcquire usec",
        "Lua / native (both)",
        "native CPU usec (both)",
        "Lua CPU usec (both)",
    ]);
    let mut series: Vec<(String, Vec<(f64, f64)>)> =
        vec![("native ACQUIRE".into(), vec![]), ("Redisson's tryAcquire (Lua)".into(), vec![])];
    let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
    for (n, rounds) in sizes {
        let (mut na, mut la, mut np, mut lp, mut ncpu, mut lcpu) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        for r in 0..rounds {
            progress!("part 10b: N = {n} round {}/{rounds}", r + 1);
            for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                let k = format!("bench:refill:{n}");
                if side == 0 {
                    let (a, rel, cpu) = refill_once(&mut mc, true, &release_body, &k, n)?;
                    na.push(a);
                    np.push(a + rel);
                    ncpu.push(cpu);
                } else {
                    let (a, rel, cpu) = refill_once(&mut pc, false, &release_body, &k, n)?;
                    la.push(a);
                    lp.push(a + rel);
                    lcpu.push(cpu);
                }
            }
        }
        let ra = Summary::of(&ratios(&la, &na));
        t.row(vec![
            n.to_string(),
            num(Summary::of(&na).median),
            num(Summary::of(&la).median),
            format!("{}", Ratio(ra)),
            num(Summary::of(&np).median),
            num(Summary::of(&lp).median),
            format!("{}", Ratio(Summary::of(&ratios(&lp, &np)))),
            num(Summary::of(&ncpu).median),
            num(Summary::of(&lcpu).median),
        ]);
        b.report.target(
            &format!("rate limiter: the tryAcquire after a release at {n} grants, Redisson's Lua / native, usec"),
            ">= 10x",
            format!("{}", Ratio(ra)),
            Some(ra.median >= 10.0),
        );
        series[0].1.push((n as f64, Summary::of(&na).median));
        series[1].1.push((n as f64, Summary::of(&la).median));
    }
    let file = "ratelimiter-refill.svg";
    chart::lines(
        &b.out.join("img").join(file),
        "tryAcquire after release(): usec per call",
        "grants in the window",
        "usec per call",
        &series,
        true,
    )?;
    Ok((t, vec![(file.into(), "the acquire after a release against the grants in the window, log axes".into())]))
}

pub fn run(b: &mut Bench) -> Res<()> {
    if !b.has("RATELIMITER.ACQUIRE") {
        b.report.skip("part 10: the module has no RATELIMITER.ACQUIRE".into());
        return Ok(());
    }
    load(&b.p)?;
    load(&b.m)?;
    let (rounds, n) = (b.rounds(7), b.size(2000, 100));
    let a = per_call(b)?;
    b.report.section(
        "10a. Redisson's rate limiter: per call",
        &crate::part10_calls::describe(rounds, n),
        vec![a],
        vec![],
    );
    let (t, charts) = refill(b)?;
    b.report.section(
        "10b. Redisson's rate limiter: the tryAcquire after a release()",
        &format!(
            "A limiter of rate N per N ms with N grants of one permit, one per ms (the window full, N zset members \
             on both sides: the native grants do not fold, being in distinct ms), then `release(N)` and a \
             tryAcquire at the moment the two oldest grants have left the window. Redisson's release body (`{}`) \
             only raises the value, so its tryAcquire (`{}`) finds value + expired > rate and recomputes \
             `rate - used` over every member of the zset (checked: the value ends at 1); the native \
             `RATELIMITER.RELEASE` takes the permits off the newest grants, so the `RATELIMITER.ACQUIRE` after it \
             removes the two expired grants and reads a remembered total. The window is rebuilt for every \
             measured pair (not measured); one pair per side per round, sides alternating. usec from \
             `INFO commandstats` (the Lua release sent by `EVAL`, so `evalsha` is the tryAcquire alone); \
             CPU: `INFO cpu` over the pair. The target is on the acquire (the refill); the columns for both \
             calls show where the native side does its work instead (the release removes the members it gives \
             back, O(members)). Every time is `NOW` on the native side and ARGV on the Lua side, fixed, so both \
             see the same window.",
            &RELEASE[..8],
            &TRY_ACQUIRE[..8]
        ),
        vec![t],
        charts,
    );
    part10_rates::run(b)?;
    part10_blocked::run(b)?;
    part10_instr::run(b)
}
