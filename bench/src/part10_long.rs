//! Part 10c (2): long windows (issue 36). A limiter written by native grants, one grant a
//! millisecond over a whole window of 1 s, 60 s or 10 min (times given with `NOW`, so a window
//! fills at once), then: (a) the calls after a quiet spell, when half of the window, or all of
//! it, has left; (b) full load, the calls that follow it one millisecond apart (each removes
//! the grant that left), and 20 a millisecond (the busy milliseconds fold). The longest call
//! is `SLOWLOG`'s measure of each (`slowlog-log-slower-than 0`: every call logged with its
//! duration): wall time, preemption included. Beside them, what `DEL` and `UNLINK` of a zset
//! that size cost on the server without the module.

use redis::Value;

use crate::report::Table;
use crate::server::{call_s, command_stat, pipeline, Res};
use crate::stats::{num, Summary};
use crate::{progress, strs, Bench};

const T0: i64 = 1_700_000_000_000;
/// The bound on any native call.
const BOUND_US: u64 = 1000;
/// Calls looked at after a quiet spell (the first removes a step of the expired grants, the
/// next ones the rest, a step each).
const AFTER_QUIET: i64 = 20;

fn err(e: redis::RedisError) -> String {
    e.to_string()
}

/// The usec of one command on `c` (`INFO commandstats` around it).
fn one_call(c: &mut redis::Connection, args: &[&str], stat: &str) -> Res<u64> {
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    call_s(c, args)?;
    let (n, us) = command_stat(c, stat)?;
    if n != 1 {
        return Err(format!("part 10c: {stat} counted {n} calls, 1 was sent"));
    }
    Ok(us)
}

/// A limiter `k` of `interval` ms whose window is full: one grant of 16 a ms, the newest at
/// `T0 + interval - 1`.
fn filled(c: &mut redis::Connection, k: &str, interval: i64) -> Res<()> {
    call_s(c, &["FLUSHALL"])?;
    call_s(c, &["RATELIMITER.TRYSETRATE", k, "OVERALL", "1000000000000", &interval.to_string()])?;
    for part in (0..interval).collect::<Vec<_>>().chunks(1000) {
        let cmds: Vec<Vec<String>> =
            part.iter().map(|i| strs(&["RATELIMITER.ACQUIRE", k, "16", "NOW", &(T0 + i).to_string()])).collect();
        pipeline(c, &cmds)?;
    }
    Ok(())
}

/// What `SLOWLOG` gave a batch of calls (every one logged): the longest acquire and the mean
/// (usec), and the longest control (a one-line Lua script sent beside each acquire: what the
/// shared machine alone does to a call).
#[derive(Clone, Copy, Default)]
struct Logged {
    longest: u64,
    mean: f64,
    control: u64,
}

fn logged(c: &mut redis::Connection, calls: &[Vec<String>]) -> Res<Logged> {
    let control: String =
        redis::cmd("SCRIPT").arg("LOAD").arg("return redis.call('incr', KEYS[1])").query(c).map_err(err)?;
    // Each control logs twice: the script, and the `INCR` it runs.
    let len = (3 * calls.len() + 16).to_string();
    call_s(c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"])?;
    call_s(c, &["CONFIG", "SET", "slowlog-max-len", &len])?;
    call_s(c, &["SLOWLOG", "RESET"])?;
    for part in calls.chunks(250) {
        let mut batch = Vec::with_capacity(2 * part.len());
        for call in part {
            batch.push(call.clone());
            batch.push(strs(&["EVALSHA", &control, "1", "bench:control"]));
        }
        for (args, v) in batch.iter().zip(pipeline(c, &batch)?) {
            if args[0] != "EVALSHA" && !matches!(v, Value::Nil | Value::Int(_)) {
                return Err(format!("part 10c: RATELIMITER.ACQUIRE replied {v:?}"));
            }
        }
    }
    let entries: Vec<Value> = redis::cmd("SLOWLOG").arg("GET").arg(&len).query(c).map_err(err)?;
    call_s(c, &["CONFIG", "SET", "slowlog-log-slower-than", "10000"])?;
    call_s(c, &["CONFIG", "SET", "slowlog-max-len", "128"])?;
    let (mut us, mut control) = (vec![], 0u64);
    for e in entries {
        let Value::Array(f) = e else { continue };
        let (Some(Value::Int(d)), Some(Value::Array(args))) = (f.get(2), f.get(3)) else { continue };
        match args.first() {
            Some(Value::BulkString(a)) if a.eq_ignore_ascii_case(b"RATELIMITER.ACQUIRE") => us.push(*d as u64),
            Some(Value::BulkString(a)) if a.eq_ignore_ascii_case(b"EVALSHA") => control = control.max(*d as u64),
            _ => {}
        }
    }
    if us.len() != calls.len() {
        return Err(format!("part 10c: SLOWLOG logged {} of {} calls", us.len(), calls.len()));
    }
    let mean = us.iter().sum::<u64>() as f64 / us.len() as f64;
    Ok(Logged { longest: us.iter().copied().max().unwrap_or(0), mean, control })
}

/// (a): the first call after `left` ms past the full window's end (usec, commandstats), and
/// the longest of it and the calls after it at the same time.
fn quiet(b: &Bench, interval: i64, left: i64) -> Res<(u64, u64)> {
    let k = format!("bench:quiet:{interval}");
    let mut c = b.m.conn()?;
    filled(&mut c, &k, interval)?;
    let at = (T0 + interval - 1 + left).to_string();
    let first = one_call(&mut c, &["RATELIMITER.ACQUIRE", &k, "1", "NOW", &at], "RATELIMITER.ACQUIRE")?;
    let next: Vec<Vec<String>> =
        (1..AFTER_QUIET).map(|_| strs(&["RATELIMITER.ACQUIRE", &k, "1", "NOW", &at])).collect();
    Ok((first, logged(&mut c, &next)?.longest.max(first)))
}

/// (b): `calls` calls `per_ms` a millisecond from the full window's end.
fn full_load(b: &Bench, interval: i64, per_ms: i64, calls: i64) -> Res<Logged> {
    let k = format!("bench:load:{interval}");
    let mut c = b.m.conn()?;
    filled(&mut c, &k, interval)?;
    let cmds: Vec<Vec<String>> = (0..calls)
        .map(|i| strs(&["RATELIMITER.ACQUIRE", &k, "1", "NOW", &(T0 + interval + i / per_ms).to_string()]))
        .collect();
    logged(&mut c, &cmds)
}

/// What freeing a zset of `n` members costs on the server without the module: (DEL, UNLINK) usec.
fn free_cost(b: &Bench, n: i64) -> Res<(u64, u64)> {
    let mut c = b.p.conn()?;
    let mut out = [0u64; 2];
    for (i, verb) in ["DEL", "UNLINK"].iter().enumerate() {
        call_s(&mut c, &["FLUSHALL"])?;
        for part in (0..n).collect::<Vec<_>>().chunks(1000) {
            let mut z = vec!["ZADD".to_string(), "z".into()];
            for m in part {
                z.push(m.to_string());
                z.push(format!("member-{m:016}-{m:04}"));
            }
            pipeline(&mut c, &[z])?;
        }
        out[i] = one_call(&mut c, &[verb, "z"], &verb.to_lowercase())?;
    }
    Ok((out[0], out[1]))
}

/// The table, its targets reported.
pub fn run(b: &mut Bench) -> Res<Table> {
    let intervals: &[i64] = if b.quick { &[1000, 60_000] } else { &[1000, 60_000, 600_000] };
    let reps = b.size(3, 1);
    let calls = b.size(20_000, 2_000) as i64;
    let mut q = Table::new(&[
        "window",
        "members",
        "half left: the call, usec",
        "half left: longest of 20 calls, usec",
        "all left: the call, usec",
        "all left: longest of 20, usec",
        "full load, 1 a ms: longest, usec",
        "full load, 1 a ms: mean, usec",
        "full load, 20 a ms: longest, usec",
        "full load, 20 a ms: mean, usec",
        "full load: longest control, usec",
        "DEL of such a zset, usec (no module)",
        "UNLINK of it, usec (no module)",
    ]);
    for &interval in intervals {
        let mut v: [Vec<f64>; 11] = Default::default();
        for r in 0..reps {
            progress!("part 10c: a {interval} ms window, {}/{reps}", r + 1);
            let (h1, h20) = quiet(b, interval, interval / 2)?;
            let (a1, a20) = quiet(b, interval, interval + 1)?;
            let one = full_load(b, interval, 1, calls)?;
            let twenty = full_load(b, interval, 20, calls)?;
            let control = one.control.max(twenty.control) as f64;
            let (d, u) = free_cost(b, interval)?;
            let row = [
                h1 as f64,
                h20 as f64,
                a1 as f64,
                a20 as f64,
                one.longest as f64,
                one.mean,
                twenty.longest as f64,
                twenty.mean,
                control,
                d as f64,
                u as f64,
            ];
            for (col, x) in v.iter_mut().zip(row) {
                col.push(x);
            }
        }
        let med = |x: &[f64]| Summary::of(x).median;
        let window = format!("{} s", interval as f64 / 1000.0);
        for (what, col) in [
            ("after half of it left", 1),
            ("after all of it left", 3),
            ("at full load, 1 a ms", 4),
            ("at full load, 20 a ms", 6),
        ] {
            let worst = med(&v[col]);
            b.report.target(
                &format!("rate limiter, {window} window, {what}: the longest native call (wall time)"),
                "< 1 ms",
                format!("{} usec", num(worst)),
                Some(worst < BOUND_US as f64),
            );
        }
        let mut row = vec![window, interval.to_string()];
        row.extend(v.iter().map(|x| num(med(x))));
        q.row(row);
    }
    Ok(q)
}

/// The second table's text.
pub fn describe(b: &Bench) -> String {
    let reps = b.size(3, 1);
    format!(
        "(2) Long windows (issue 36): a limiter written by native grants, one grant a millisecond over a whole \
         window (times given with `NOW`, so a 10-minute window of 600,000 members fills at once). After a quiet \
         spell: the one call when half of the window, or all of it, has left (`INFO commandstats`), and the \
         longest of the 20 calls from then on (the first removes at most 512 expired grants, `ZREMRANGEBYRANK`, \
         and sums the rest from the window's index; the next ones remove the rest, 512 a call; a window that \
         left whole is unlinked, freed in the background). At full load: {} calls after the window's end, one \
         a millisecond (each removes the grant that left) and 20 a millisecond (each millisecond's 20 grants \
         fold into one member once 16 ms old). Longest calls from `SLOWLOG` at \
         `slowlog-log-slower-than 0` (every call logged with its duration): wall time on a shared machine, \
         preemption included; beside each acquire of the full-load drives, a control (a one-line Lua \
         script, `INCR`), whose longest call shows what the machine alone does to a call. The last two \
         columns: `DEL` and `UNLINK` of a zset that size on the server without the module. Medians of \
         {reps} repetitions. Target: every call under 1 ms (as measured, preemption included).",
        b.size(20_000, 2_000)
    )
}
