//! Part 10c: the longest native call on a limiter written by native grants. (1) Driven as hard as
//! one pipelining connection can, on the server's clock, at rates of 10 to 10^6 a second: the
//! longest `RATELIMITER.ACQUIRE` the server saw, from `SLOWLOG` (every call of 100 us or more
//! logged with its duration), beside a control command sent in the same pipelines and the
//! server's involuntary context switches (what the machine alone does to a call), and the p99.9
//! from `INFO latencystats`. (2) The one call after a quiet spell, when half or all of a full
//! window has left, on a 1 s and a 60 s window (times given with `NOW`), beside what `DEL` and
//! `UNLINK` of a zset that size cost (a whole window that left is dropped with one `DEL`).

use std::time::{Duration, Instant};

use redis::Value;

use crate::names::suffix;
use crate::report::Table;
use crate::server::{call_s, command_stat, info, pipeline, Res};
use crate::stats::num;
use crate::strs;
use crate::{progress, Bench};

/// Calls at or above this many usec are logged by `SLOWLOG` with their duration.
const SLOW_US: u64 = 100;
/// The bound on any native call.
const BOUND_US: u64 = 1000;

fn err(e: redis::RedisError) -> String {
    e.to_string()
}

/// The durations (usec) of the `SLOWLOG` entries of `command`, and whether the log was full
/// (then older entries may have been dropped).
fn slowlog(c: &mut redis::Connection, command: &str, max_len: usize) -> Res<(Vec<u64>, bool)> {
    let entries: Vec<Value> = redis::cmd("SLOWLOG").arg("GET").arg(max_len).query(c).map_err(err)?;
    let full = entries.len() >= max_len;
    let mut out = vec![];
    for e in entries {
        let Value::Array(f) = e else { continue };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (f.get(2), f.get(3)) else { continue };
        if matches!(args.first(), Some(Value::BulkString(a)) if a.eq_ignore_ascii_case(command.as_bytes())) {
            out.push(*us as u64);
        }
    }
    Ok((out, full))
}

/// The p99.9 (usec) of `command` in `INFO latencystats` (Redis 7+), if the server has it.
fn p999(c: &mut redis::Connection, command: &str) -> Res<Option<f64>> {
    let i = info(c, "latencystats")?;
    let want = format!("latency_percentiles_usec_{command}");
    let Some(line) = i.iter().find(|(k, _)| k.eq_ignore_ascii_case(&want)).map(|(_, v)| v) else { return Ok(None) };
    Ok(line.split(',').find_map(|kv| kv.strip_prefix("p99.9=")).and_then(|v| v.parse().ok()))
}

/// How many times the server's main thread was preempted so far (`nonvoluntary_ctxt_switches`
/// in `/proc/<pid>/status`; 0 where that cannot be read).
fn preemptions(c: &mut redis::Connection) -> Res<u64> {
    let pid = info(c, "server")?.get("process_id").cloned().unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

/// (1): one rate, driven for `secs`; one table row, and the longest acquire (usec).
fn driven(b: &mut Bench, rate: u64, secs: f64) -> Res<(Vec<String>, u64)> {
    let k = format!("bench:rate:{rate}");
    let permits = (rate / 50_000).max(1).to_string();
    let max_len = 10_000;
    let mut c = b.m.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    call_s(&mut c, &["RATELIMITER.TRYSETRATE", &k, "OVERALL", &rate.to_string(), "1000"])?;
    call_s(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", &SLOW_US.to_string()])?;
    call_s(&mut c, &["CONFIG", "SET", "slowlog-max-len", &max_len.to_string()])?;
    call_s(&mut c, &["SLOWLOG", "RESET"])?;
    // The control: as many calls of a one-line Lua script (about as long as an acquire)
    // alternate with the acquires, exposed to the same machine.
    let control: String =
        redis::cmd("SCRIPT").arg("LOAD").arg("return redis.call('incr', KEYS[1])").query(&mut c).map_err(err)?;
    let batch: Vec<Vec<String>> = (0..1000)
        .map(|i| {
            if i % 2 == 1 {
                strs(&["EVALSHA", &control, "1", "bench:control"])
            } else {
                strs(&["RATELIMITER.ACQUIRE", &k, &permits])
            }
        })
        .collect();
    call_s(&mut c, &["CONFIG", "RESETSTAT"])?;
    let (mut granted, mut refused) = (0u64, 0u64);
    let switches = preemptions(&mut c)?;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) {
        for (args, v) in batch.iter().zip(pipeline(&mut c, &batch)?) {
            match v {
                _ if args[0] == "EVALSHA" => {}
                Value::Nil => granted += 1,
                Value::Int(_) => refused += 1,
                other => return Err(format!("part 10c: RATELIMITER.ACQUIRE replied {other:?}")),
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let switches = preemptions(&mut c)? - switches;
    let (calls, usec) = command_stat(&mut c, "RATELIMITER.ACQUIRE")?;
    let tail = p999(&mut c, "ratelimiter.acquire")?;
    let (slow, full) = slowlog(&mut c, "RATELIMITER.ACQUIRE", max_len)?;
    let (control, _) = slowlog(&mut c, "EVALSHA", max_len)?;
    call_s(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "10000"])?;
    call_s(&mut c, &["CONFIG", "SET", "slowlog-max-len", "128"])?;
    let members: i64 = redis::cmd("ZCARD").arg(suffix(&k, "permits")).query(&mut c).map_err(err)?;
    if calls != granted + refused {
        return Err(format!("part 10c: commandstats counted {calls} calls, {} were sent", granted + refused));
    }
    let longest = |v: &[u64]| match v.iter().max() {
        Some(us) => format!("{us}{}", if full { " (log full: at least)" } else { "" }),
        None => format!("< {SLOW_US}"),
    };
    let max = slow.iter().copied().max();
    let over = slow.iter().filter(|&&us| us >= BOUND_US).count();
    let p: u64 = permits.parse().unwrap_or(1);
    Ok((
        vec![
            rate.to_string(),
            permits,
            calls.to_string(),
            num(calls as f64 / elapsed),
            num((granted * p) as f64 / elapsed),
            num(usec as f64 / calls.max(1) as f64),
            tail.map(num).unwrap_or_else(|| "n/a".into()),
            longest(&slow),
            slow.len().to_string(),
            over.to_string(),
            longest(&control),
            control.iter().filter(|&&us| us >= BOUND_US).count().to_string(),
            switches.to_string(),
            members.to_string(),
        ],
        max.unwrap_or(0),
    ))
}

pub fn run(b: &mut Bench) -> Res<()> {
    let rates: &[u64] = if b.quick { &[10, 100_000] } else { &[10, 1_000, 100_000, 1_000_000] };
    let secs = if b.quick { 0.3 } else { 3.0 };
    let mut t = Table::new(&[
        "rate (per 1 s)",
        "permits per call",
        "calls",
        "calls/s",
        "permits granted/s",
        "usec per call (mean)",
        "p99.9 usec",
        "longest call usec",
        "calls >= 100 usec",
        "calls >= 1 ms",
        "longest control usec",
        "control calls >= 1 ms",
        "server preempted",
        "members at the end",
    ]);
    for &rate in rates {
        progress!("part 10c: driven at {rate} per second for {secs} s");
        let (row, max) = driven(b, rate, secs)?;
        t.row(row);
        b.report.target(
            &format!("rate limiter driven at {rate}/s: the longest native call (wall time, preemption included)"),
            "< 1 ms",
            format!("{max} usec"),
            Some(max < BOUND_US),
        );
    }
    b.report.section(
        "10c. Redisson's rate limiter: the longest native call",
        &format!(
            "Is any native call long, whatever the rate? (1) An `OVERALL` limiter of the given rate per 1 s, \
             driven for {secs} s by one connection sending pipelines of 500 `RATELIMITER.ACQUIRE name p` (p \
             permits, rate / 50,000 or 1: at every rate more is asked than granted) on the server's clock. Grants \
             of a millisecond fold into one member once there are 16 of them, so a 1 s window holds at most \
             16,000 members at any rate, and each call removes only the grants that left since the last one. \
             The longest call is the \
             server's own measure of each command (what `INFO commandstats` adds up): `SLOWLOG` with \
             `slowlog-log-slower-than {SLOW_US}` logs every call of {SLOW_US} usec or more with its duration \
             (`< {SLOW_US}`: none did); p99.9 from `INFO latencystats`. That measure is wall time, and the \
             machine is shared: a call during which the OS preempts the server lasts a time slice longer (about \
             4 ms here). So every other call of each pipeline is a control, a one-line Lua script (`INCR` by \
             `EVALSHA`, about as long as an acquire, with constant work), exposed to the same machine, and \
             \"server preempted\" counts the involuntary context switches of the server's main thread over the \
             drive (`/proc/<pid>/status`). Target: the driven rows' longest call as measured (preemption \
             included)."
        ),
        vec![t],
        vec![],
    );
    let q = crate::part10_long::run(b)?;
    let text = crate::part10_long::describe(b);
    b.report.section("10c (2). Redisson's rate limiter: long windows", &text, vec![q], vec![]);
    Ok(())
}
