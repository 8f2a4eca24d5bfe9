//! Part 4, contended hand-off: K client threads (own connections) take one lock over and over with
//! zero hold time, by three strategies: the module's `BLOCK`; the Redisson way (Lua acquire, on
//! refusal wait for the unlock message on the lock's channel or the TTL, then retry); 1 ms polling
//! with the Lua acquire. Each critical section does a non-atomic GET/SET increment of a counter,
//! which must end exact: mutual exclusion is checked in every cell.

use std::time::{Duration, Instant};

use crate::chart;
use crate::names::*;
use crate::report::Table;
use crate::server::{call, call_s, cpu_seconds, Res, Server};
use crate::stats::{now_ms, num, percentile, ratios, Ratio, Summary};
use crate::strs;
use crate::workloads::{LEASE, WAIT};
use crate::{progress, Bench};

const KEY: &str = "bench:handoff";
const COUNTER: &str = "bench:handoff:counter";

type Args = fn(&str) -> Vec<String>;
type LuaArgs = fn(&str, i64) -> (Vec<String>, Vec<String>);

/// A lock kind as this part drives it.
struct Kind {
    name: &'static str,
    command: &'static str,
    block: Args,
    unlock: Args,
    scripts: [&'static str; 2],
    lua_acquire: LuaArgs,
    lua_unlock: LuaArgs,
    /// The channel a refused Redisson client waits on.
    channel: fn(&str) -> String,
}

#[rustfmt::skip]
fn kinds() -> Vec<Kind> {
    vec![
        Kind { name: "LOCK", command: "LOCK.ACQUIRE",
            block: |o| strs(&["LOCK.ACQUIRE", KEY, o, LEASE, "BLOCK", "10000"]),
            unlock: |o| strs(&["LOCK.UNLOCK", KEY, o, LEASE]),
            scripts: ["lock_acquire", "lock_unlock"],
            lua_acquire: |o, _| (strs(&[KEY]), strs(&[o, LEASE])),
            lua_unlock: |o, _| (vec![KEY.into(), lock_channel(KEY)], strs(&[o, LEASE])),
            channel: |_| lock_channel(KEY) },
        Kind { name: "RWLOCK write", command: "RWLOCK.WLOCK",
            block: |o| strs(&["RWLOCK.WLOCK", KEY, o, LEASE, "BLOCK", "10000"]),
            unlock: |o| strs(&["RWLOCK.UNLOCK", KEY, o, "WRITE", LEASE]),
            scripts: ["rwlock_wlock", "rwlock_unlock_write"],
            lua_acquire: |o, _| (strs(&[KEY]), strs(&[o, LEASE])),
            lua_unlock: |o, _| (vec![KEY.into(), rwlock_channel(KEY)], strs(&[o, LEASE])),
            channel: |_| rwlock_channel(KEY) },
        Kind { name: "FAIRLOCK", command: "FAIRLOCK.ACQUIRE",
            block: |o| strs(&["FAIRLOCK.ACQUIRE", KEY, o, LEASE, WAIT, "BLOCK", "10000"]),
            unlock: |o| strs(&["FAIRLOCK.UNLOCK", KEY, o, LEASE]),
            scripts: ["fair_acquire", "fair_unlock"],
            lua_acquire: |o, now| (vec![KEY.into(), fair_queue(KEY), fair_timeouts(KEY)], strs(&[o, LEASE, WAIT, &now.to_string()])),
            lua_unlock: |o, now| (vec![KEY.into(), fair_queue(KEY), fair_timeouts(KEY), lock_channel(KEY)], strs(&[o, LEASE, &now.to_string()])),
            channel: |o| format!("{}:{o}", lock_channel(KEY)) },
    ]
}

/// Per strategy: cs/s, attempts per cs, waits (usec), server CPU usec per cs, over the rounds.
type Cells = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

const STRATEGIES: [&str; 3] = ["BLOCK", "Redisson (pub/sub)", "1 ms polling"];

/// What one client thread did.
#[derive(Default)]
struct Work {
    cs: u64,
    attempts: u64,
    waits_us: Vec<f64>,
}

fn evalsha(sha: &str, (keys, argv): (Vec<String>, Vec<String>)) -> Vec<String> {
    let mut e = vec!["EVALSHA".to_string(), sha.to_string(), keys.len().to_string()];
    e.extend(keys);
    e.extend(argv);
    e
}

/// The non-atomic increment that exposes two holders at once.
fn critical(c: &mut redis::Connection) -> Res<()> {
    let v: Option<i64> = redis::cmd("GET").arg(COUNTER).query(c).map_err(|e| e.to_string())?;
    call_s(c, &["SET", COUNTER, &(v.unwrap_or(0) + 1).to_string()])?;
    Ok(())
}

/// One client: takes the lock until `until`, by strategy `s`.
fn client(s: usize, k: &Kind, shas: &[String; 2], server: &Server, id: usize, until: Instant) -> Res<Work> {
    let owner = format!("6b1f0c3a-0000-4000-8000-{id:012}:1");
    let mut c = server.conn()?;
    let mut sub_conn = server.conn()?;
    let mut sub = sub_conn.as_pubsub();
    if s == 1 {
        sub.subscribe((k.channel)(&owner)).map_err(|e| e.to_string())?;
    }
    let mut w = Work::default();
    while Instant::now() < until {
        let t = Instant::now();
        loop {
            w.attempts += 1;
            let reply = if s == 0 {
                call(&mut c, &(k.block)(&owner))?
            } else {
                call(&mut c, &evalsha(&shas[0], (k.lua_acquire)(&owner, now_ms())))?
            };
            let ttl = match reply {
                redis::Value::Nil => break,
                redis::Value::Int(t) => t,
                v => return Err(format!("{} acquire by {owner}: unexpected {v:?}", k.name)),
            };
            match s {
                0 => {}
                1 => {
                    // Redisson: wait for the unlock message, at most the lock's remaining TTL.
                    let d = Duration::from_millis(ttl.clamp(1, 30_000) as u64);
                    sub.set_read_timeout(Some(d)).map_err(|e| e.to_string())?;
                    if let Err(e) = sub.get_message() {
                        if !e.is_timeout() {
                            return Err(format!("subscriber: {e}"));
                        }
                    }
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        w.waits_us.push(t.elapsed().as_secs_f64() * 1e6);
        critical(&mut c)?;
        w.cs += 1;
        let reply = if s == 0 {
            call(&mut c, &(k.unlock)(&owner))?
        } else {
            call(&mut c, &evalsha(&shas[1], (k.lua_unlock)(&owner, now_ms())))?
        };
        if reply != redis::Value::Int(1) {
            return Err(format!("{} unlock by {owner}: unexpected {reply:?}", k.name));
        }
    }
    Ok(w)
}

/// One cell: K clients for `secs` by strategy `s`; returns (cs/s, attempts/cs, waits, cpu/cs usec).
fn cell(b: &Bench, k: &Kind, s: usize, n_clients: usize, secs: f64) -> Res<(f64, f64, Vec<f64>, f64)> {
    // BLOCK runs on the module's server; the Lua strategies on the one without it.
    let server = if s == 0 { &b.m } else { &b.p };
    let shas = [b.sha(k.scripts[0]).unwrap_or_default(), b.sha(k.scripts[1]).unwrap_or_default()];
    let mut c = server.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    let cpu0 = cpu_seconds(&mut c)?;
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let shas = &shas;
    let results: Vec<Res<Work>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..n_clients).map(|i| scope.spawn(move || client(s, k, shas, server, i, until))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into()))).collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(&mut c)? - cpu0;
    let mut total = Work::default();
    for r in results {
        let w = r?;
        total.cs += w.cs;
        total.attempts += w.attempts;
        total.waits_us.extend(w.waits_us);
    }
    let counter: Option<i64> = redis::cmd("GET").arg(COUNTER).query(&mut c).map_err(|e| e.to_string())?;
    if counter.unwrap_or(0) != total.cs as i64 {
        return Err(format!(
            "MUTUAL EXCLUSION BROKEN: {} {} K={n_clients}: counter {counter:?} after {} critical sections",
            k.name, STRATEGIES[s], total.cs
        ));
    }
    if total.cs == 0 {
        return Err(format!("{} {} K={n_clients}: no critical section ran", k.name, STRATEGIES[s]));
    }
    let cs = total.cs as f64;
    Ok((cs / elapsed, total.attempts as f64 / cs, total.waits_us, cpu * 1e6 / cs))
}

pub fn run(b: &mut Bench) -> Res<()> {
    let ks: &[usize] = &[2, 8, 32];
    let rounds = b.rounds(3);
    let secs = if b.quick { 0.3 } else { 2.0 };
    let mut t = Table::new(&[
        "kind",
        "K",
        "strategy",
        "critical sections/s",
        "BLOCK / this",
        "attempts per cs",
        "p50 wait usec",
        "p99 wait usec",
        "server CPU usec per cs",
    ]);
    let mut charts = vec![];
    let mut ran = 0;
    for k in kinds() {
        if !b.available(&format!("part 4 {}", k.name), k.command, &k.scripts) {
            t.row(vec![
                k.name.into(),
                "all".into(),
                "all".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
            ]);
            continue;
        }
        let mut series: Vec<(String, Vec<(f64, f64)>)> = STRATEGIES.iter().map(|s| (s.to_string(), vec![])).collect();
        let mut cpu_block = vec![];
        for &n in ks {
            // Per strategy: cs/s, attempts/cs, cpu/cs per round; waits pooled.
            let mut v: Vec<Cells> = (0..3).map(|_| Default::default()).collect();
            for r in 0..rounds {
                let order = if r % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
                for s in order {
                    progress!("part 4: {} K = {n} {} round {}/{rounds}", k.name, STRATEGIES[s], r + 1);
                    let (rate, att, waits, cpu) = cell(b, &k, s, n, secs)?;
                    v[s].0.push(rate);
                    v[s].1.push(att);
                    v[s].2.extend(waits);
                    v[s].3.push(cpu);
                }
                ran += 1;
            }
            for s in 0..3 {
                let rate = Summary::of(&v[s].0);
                let vs = ratios(&v[0].0, &v[s].0);
                series[s].1.push((n as f64, rate.median));
                let att = Summary::of(&v[s].1);
                let cpu = Summary::of(&v[s].3);
                let mut waits = v[s].2.clone();
                t.row(vec![
                    k.name.into(),
                    n.to_string(),
                    STRATEGIES[s].into(),
                    format!("{}", Ratio(rate)),
                    if s == 0 { "1".into() } else { format!("{}", Ratio(Summary::of(&vs))) },
                    num(att.median),
                    num(percentile(&mut waits, 50.0)),
                    num(percentile(&mut waits, 99.0)),
                    num(cpu.median),
                ]);
                if s == 0 {
                    cpu_block.push((n, cpu.median));
                    b.report.target(
                        &format!("{} K = {n}: BLOCK attempts per critical section", k.name),
                        "<= 1.1",
                        num(att.median),
                        Some(att.median <= 1.1),
                    );
                }
                if s == 1 && (n == 8 || n == 32) {
                    let r = Summary::of(&vs);
                    b.report.target(
                        &format!("{} K = {n}: BLOCK / Redisson way, cs/s", k.name),
                        ">= 3x",
                        format!("{}", Ratio(r)),
                        Some(r.median >= 3.0),
                    );
                }
                if s == 2 && (n == 8 || n == 32) {
                    let r = Summary::of(&vs);
                    b.report.target(
                        &format!("{} K = {n}: BLOCK / 1 ms polling, cs/s", k.name),
                        "> 1x",
                        format!("{}", Ratio(r)),
                        Some(r.median > 1.0),
                    );
                }
            }
        }
        if let (Some((_, c2)), Some((_, c32))) = (cpu_block.first(), cpu_block.last()) {
            let r = c32 / c2;
            b.report.target(
                &format!("{}: BLOCK server CPU per cs, K = 32 / K = 2", k.name),
                "<= 1.5x",
                num(r),
                Some(r <= 1.5),
            );
        }
        let file = format!("handoff-{}.svg", k.name.to_lowercase().replace(' ', "-"));
        let title = format!("{}: critical sections per second against K", k.name);
        chart::lines(
            &b.out.join("img").join(&file),
            &title,
            "K (clients on one lock)",
            "critical sections/s",
            &series,
            false,
        )?;
        charts
            .push((file, format!("{} hand-off: critical sections/s against K, BLOCK, Redisson way, polling", k.name)));
    }
    if ran == 0 {
        return Err("part 4 ran no cell".into());
    }
    b.report.section(
        "4. Contended hand-off",
        &format!(
            "K client threads, each with its own connection, take one lock over and over for {secs} s per cell, \
             zero hold time; {rounds} rounds per K with the strategies in alternating order. BLOCK: the module's \
             blocking acquire (server with the module). Redisson: the Lua acquire, and on refusal a wait on the \
             lock's channel (a subscription held by a second connection) for the unlock message or the TTL, then \
             retry. Polling: the Lua acquire every 1 ms. The Lua strategies run on the server without the module. \
             Inside each critical section a non-atomic GET/SET increment; the counter matched the number of \
             critical sections in every cell (mutual exclusion held). Waits pool every round's samples; server CPU \
             is the `INFO cpu` user+sys delta of the server the cell ran on, per critical section."
        ),
        vec![t],
        charts,
    );
    Ok(())
}
