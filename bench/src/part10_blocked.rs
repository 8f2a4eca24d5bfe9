//! Part 10d: K acquirers of one rate limiter, each taking a permit over and over with no pause:
//! the native `RATELIMITER.ACQUIRE name 1 BLOCK ms` against Redisson's `RRateLimiter.acquire()`
//! as its client runs it: the tryAcquire body; on a delay reply, a timer of that many ms, then
//! the whole body again. Grants per second against the rate, attempts per grant, server CPU per
//! grant, and that CPU less what the server spends anyway over the same time (idle, or with K
//! clients parked and never served: the module's poll of parked states).

use std::time::{Duration, Instant};

use redis::Value;

use crate::redisson_rate::{lua_acquire, TRY_SET};
use crate::redisson_sync::evalsha;
use crate::report::Table;
use crate::server::{call, call_s, cpu_seconds, Res, Server};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::{progress, strs, Bench};

const KEY: &str = "bench:rl:herd";
/// The limiters' interval; the rates are per interval.
const INTERVAL_MS: u64 = 100;

const STRATEGIES: [&str; 2] = ["BLOCK", "Redisson (timer and retry)"];

/// Per round of one strategy: grants/s / rate, attempts per grant, CPU usec per grant, and the
/// same less the baseline.
type Cells = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

#[derive(Default)]
struct Work {
    attempts: u64,
    grants: Vec<Instant>,
}

/// Sets the limiter up on strategy `s`'s server: `rate` per INTERVAL_MS.
fn limiter(c: &mut redis::Connection, s: usize, rate: usize, interval: u64) -> Res<()> {
    call_s(c, &["FLUSHALL"])?;
    let (rate, interval) = (rate.to_string(), interval.to_string());
    if s == 0 {
        call_s(c, &["RATELIMITER.TRYSETRATE", KEY, "OVERALL", &rate, &interval])?;
    } else {
        call(c, &evalsha(TRY_SET, &[KEY.to_string()], &[&rate, &interval, "0", "0"]))?;
    }
    Ok(())
}

/// One acquirer until `until` (its last acquire is finished after it: every attempt ends in a
/// grant, so attempts per grant are exact), by strategy `s` (0: BLOCK, 1: Redisson's way).
fn acquirer(s: usize, server: &Server, until: Instant) -> Res<Work> {
    let mut c = server.conn()?;
    let mut w = Work::default();
    while Instant::now() < until {
        loop {
            w.attempts += 1;
            let args = if s == 0 {
                strs(&["RATELIMITER.ACQUIRE", KEY, "1", "BLOCK", "10000"])
            } else {
                lua_acquire(KEY, "1", now_ms())
            };
            match call(&mut c, &args)? {
                Value::Nil => break,
                // Redisson's delay: its timer, then the body again.
                Value::Int(d) if s == 1 => std::thread::sleep(Duration::from_millis(d.max(0) as u64)),
                // BLOCK's timeout, not reached in 10 s.
                Value::Int(_) => {}
                v => return Err(format!("{}: unexpected {v:?}", STRATEGIES[s])),
            }
        }
        w.grants.push(Instant::now());
    }
    Ok(w)
}

/// Server CPU usec per second spent anyway by strategy `s`'s server: idle for Redisson's;
/// for BLOCK, with K clients parked on a limiter that never serves them.
fn baseline(b: &Bench, s: usize, k: usize, secs: f64) -> Res<f64> {
    let server = if s == 0 { &b.m } else { &b.p };
    let mut c = server.conn()?;
    if s == 1 {
        let cpu0 = cpu_seconds(&mut c)?;
        std::thread::sleep(Duration::from_secs_f64(secs));
        return Ok((cpu_seconds(&mut c)? - cpu0) * 1e6 / secs);
    }
    limiter(&mut c, 0, 1, 3_600_000)?;
    call_s(&mut c, &["RATELIMITER.ACQUIRE", KEY, "1"])?;
    let block = ((secs * 1000.0) as u64 + 200).to_string();
    let mut parked = vec![];
    for _ in 0..k {
        let mut p = server.conn()?;
        p.send_packed_command(
            &redis::cmd("RATELIMITER.ACQUIRE").arg(KEY).arg(1).arg("BLOCK").arg(&block).get_packed_command(),
        )
        .map_err(|e| e.to_string())?;
        parked.push(p);
    }
    std::thread::sleep(Duration::from_millis(100));
    let cpu0 = cpu_seconds(&mut c)?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    let cpu = cpu_seconds(&mut c)? - cpu0;
    for mut p in parked {
        p.recv_response().map_err(|e| format!("a parked baseline client: {e}"))?;
    }
    Ok(cpu * 1e6 / secs)
}

/// One cell: K acquirers for `secs` of `rate` per INTERVAL_MS; (grants/s over the rate, attempts
/// per grant, CPU usec per grant, the same less `base` usec/s).
fn cell(b: &Bench, s: usize, k: usize, rate: usize, secs: f64, base: f64) -> Res<(f64, f64, f64, f64)> {
    let server = if s == 0 { &b.m } else { &b.p };
    let mut c = server.conn()?;
    limiter(&mut c, s, rate, INTERVAL_MS)?;
    let cpu0 = cpu_seconds(&mut c)?;
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let results: Vec<Res<Work>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..k).map(|_| scope.spawn(move || acquirer(s, server, until))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("acquirer thread panicked".into()))).collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = (cpu_seconds(&mut c)? - cpu0) * 1e6;
    let mut total = Work::default();
    for r in results {
        let w = r.map_err(|e| format!("part 10d {} K = {k}: {e}", STRATEGIES[s]))?;
        total.attempts += w.attempts;
        total.grants.extend(w.grants);
    }
    total.grants.sort();
    let g = total.grants.len();
    // Grants come a window at a time: `rate` at once (the first into an empty window, each
    // later one as the grants before it leave). From the first grant of the first window to the
    // first of the last full one lie that many windows' grants; a partial last window (the
    // acquirers finishing) is left out.
    let full = g / rate;
    if full < 2 {
        return Err(format!("part 10d {} K = {k}: only {g} grants", STRATEGIES[s]));
    }
    let span = total.grants[(full - 1) * rate].duration_since(total.grants[0]).as_secs_f64();
    let nominal = rate as f64 * 1000.0 / INTERVAL_MS as f64;
    let per_grant = cpu / g as f64;
    let net = (cpu - base * elapsed).max(0.0) / g as f64;
    Ok((((full - 1) * rate) as f64 / span / nominal, total.attempts as f64 / g as f64, per_grant, net))
}

pub fn run(b: &mut Bench) -> Res<()> {
    let ks: &[usize] = &[8, 32];
    let rates: &[usize] = if b.quick { &[10] } else { &[10, 100] };
    let rounds = b.rounds(3);
    let secs: f64 = if b.quick { 0.4 } else { 2.0 };
    let mut t = Table::new(&[
        "rate",
        "K",
        "strategy",
        "grants/s / rate",
        "attempts per grant",
        "server CPU usec per grant",
        "this / BLOCK (CPU)",
        "CPU usec per grant, less the baseline",
        "this / BLOCK (less the baseline)",
    ]);
    let mut bases = [vec![], vec![]];
    for &rate in rates {
        for &k in ks {
            let mut v: Vec<Cells> = (0..2).map(|_| Default::default()).collect();
            for r in 0..rounds {
                for s in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                    progress!(
                        "part 10d: {rate} per {INTERVAL_MS} ms, K = {k}, {} round {}/{rounds}",
                        STRATEGIES[s],
                        r + 1
                    );
                    let base = baseline(b, s, k, secs.min(1.0))?;
                    bases[s].push(base);
                    let (per_rate, att, cpu, net) = cell(b, s, k, rate, secs, base)?;
                    v[s].0.push(per_rate);
                    v[s].1.push(att);
                    v[s].2.push(cpu);
                    v[s].3.push(net);
                }
            }
            for s in 0..2 {
                let (per_rate, att) = (Summary::of(&v[s].0), Summary::of(&v[s].1));
                let (cpu_ratio, net_ratio) =
                    (Summary::of(&ratios(&v[s].2, &v[0].2)), Summary::of(&ratios(&v[s].3, &v[0].3)));
                t.row(vec![
                    format!("{} /s", rate as u64 * 1000 / INTERVAL_MS),
                    k.to_string(),
                    STRATEGIES[s].into(),
                    format!("{}", Ratio(per_rate)),
                    format!("{}", Ratio(att)),
                    num(Summary::of(&v[s].2).median),
                    if s == 0 { "1".into() } else { format!("{}", Ratio(cpu_ratio)) },
                    num(Summary::of(&v[s].3).median),
                    if s == 0 { "1".into() } else { format!("{}", Ratio(net_ratio)) },
                ]);
                let what = format!("rate limiter {} /s, K = {k}", rate as u64 * 1000 / INTERVAL_MS);
                if s == 0 {
                    b.report.target(
                        &format!("{what}: BLOCK grants/s / the rate"),
                        "1.00 (within 5%)",
                        format!("{}", Ratio(per_rate)),
                        Some((per_rate.median - 1.0).abs() <= 0.05),
                    );
                    b.report.target(
                        &format!("{what}: BLOCK attempts per grant"),
                        "1.00",
                        format!("{:.2} (max {:.2})", att.median, att.max),
                        Some(att.max <= 1.0),
                    );
                } else {
                    b.report.target(
                        &format!("{what}: server CPU per grant, Redisson's way / BLOCK"),
                        "reported",
                        format!("{} ({} less the baseline)", Ratio(cpu_ratio), Ratio(net_ratio)),
                        None,
                    );
                }
            }
        }
    }
    b.report.section(
        "10d. Redisson's rate limiter: K blocked acquirers",
        &format!(
            "K acquirers, each on its own connection, take one permit of a limiter of `rate` per {INTERVAL_MS} ms \
             over and over, no pause, for {secs} s per cell (each then finishes the acquire it is in, so every \
             attempt counted ends in a grant); {rounds} rounds with the strategies in alternating order. BLOCK: \
             `RATELIMITER.ACQUIRE name 1 BLOCK 10000` (module's server): parked in arrival order, woken by the \
             server's timer when the oldest grant leaves the window. Redisson: `RRateLimiter.acquire()` as its \
             client runs it, on the server without the module: the tryAcquire body with the client's clock; on a \
             delay reply, a sleep of exactly that many ms (Redisson's `HashedWheelTimer` ticks every 100 ms with \
             the default timeouts, so the real client wakes later still), then the whole body again; no queue, \
             every waiter retries at the same moment. grants/s / rate: grants come a window's worth at a time (the \
             first into the empty window, then each as the grants before it leave), so the rate is the grants \
             from the first grant to the first of the last full window, over that time, against the nominal \
             rate (a partial last window, the acquirers finishing, left out); an attempt is one acquire call. CPU: the server's `INFO cpu` user+sys over the cell, per grant; then less the \
             baseline, the CPU the same server spends over the same time anyway (measured before each cell for \
             up to 1 s: the idle server for Redisson's side; for BLOCK, K clients parked on a limiter that never \
             serves them, which is the module's poll of parked states every 5 ms, {} usec/s here against {} \
             usec/s idle). At 100 grants a second that poll is most of BLOCK's CPU per grant.",
            num(Summary::of(&bases[0]).median),
            num(Summary::of(&bases[1]).median)
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
