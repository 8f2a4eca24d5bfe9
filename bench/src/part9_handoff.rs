//! Part 9c: K contenders for one semaphore permit, taking it over and over with zero hold time:
//! the native `SEMAPHORE.ACQUIRE name 1 BLOCK ms` against Redisson's `RSemaphore.acquire()`,
//! written here as Redisson's client does it: the tryAcquire body; on refusal, subscribe to
//! `redisson_sc:{name}`, then retry the body on each message until it grants; unsubscribe; the
//! release body (`INCRBY` and a message). Inside each hold a holders counter (`INCR`, must not
//! pass the permits) and a non-atomic GET/SET increment that must end exact: mutual exclusion is
//! checked in every cell.

use std::time::{Duration, Instant};

use redis::Value;

use crate::redisson_sync::{evalsha, load, sem_channel, RELEASE, TRY_ACQUIRE};
use crate::report::Table;
use crate::server::{call, call_s, cpu_seconds, Res, Server};
use crate::stats::{num, percentile, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

const KEY: &str = "bench:sem";
const HOLDERS: &str = "bench:sem:holders";
const COUNTER: &str = "bench:sem:counter";
/// The permits that exist.
const PERMITS: i64 = 1;

const STRATEGIES: [&str; 2] = ["BLOCK", "Redisson (subscribe and retry)"];

/// Per round of one strategy: acquires/s, attempts per acquire, waits (pooled), CPU usec per acquire.
type Cells = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

#[derive(Default)]
struct Work {
    acquires: u64,
    attempts: u64,
    waits_us: Vec<f64>,
}

fn err(e: redis::RedisError) -> String {
    e.to_string()
}

/// The hold: the holders count may never pass the permits; the GET/SET increment exposes two
/// holders at once.
fn critical(c: &mut redis::Connection) -> Res<()> {
    let holders: i64 = redis::cmd("INCR").arg(HOLDERS).query(c).map_err(err)?;
    if holders > PERMITS {
        return Err(format!("MUTUAL EXCLUSION BROKEN: {holders} holders of {PERMITS} permit(s)"));
    }
    let v: Option<i64> = redis::cmd("GET").arg(COUNTER).query(c).map_err(err)?;
    call_s(c, &["SET", COUNTER, &(v.unwrap_or(0) + 1).to_string()])?;
    let _: i64 = redis::cmd("DECR").arg(HOLDERS).query(c).map_err(err)?;
    Ok(())
}

/// Sends a (UN)SUBSCRIBE and reads until its confirmation; messages before it are dropped (an
/// unsubscribed client's latch is gone, as Redisson's entry is).
fn subscription(sub: &mut redis::Connection, verb: &str, channel: &str) -> Res<()> {
    sub.set_read_timeout(Some(Duration::from_secs(10))).map_err(err)?;
    sub.send_packed_command(&redis::cmd(verb).arg(channel).get_packed_command()).map_err(err)?;
    loop {
        if let Value::Array(a) = sub.recv_response().map_err(err)? {
            if matches!(a.first(), Some(Value::BulkString(k)) if k.eq_ignore_ascii_case(verb.as_bytes())) {
                return Ok(());
            }
        }
    }
}

/// Waits for the next message on the subscribed channel, at most `d`.
fn wait_message(sub: &mut redis::Connection, d: Duration) -> Res<()> {
    sub.set_read_timeout(Some(d)).map_err(err)?;
    loop {
        match sub.recv_response() {
            Ok(Value::Array(a)) if matches!(a.first(), Some(Value::BulkString(k)) if k == b"message") => return Ok(()),
            Ok(_) => continue,
            Err(e) if e.is_timeout() => return Ok(()),
            Err(e) => return Err(format!("subscriber: {e}")),
        }
    }
}

fn try_acquire(c: &mut redis::Connection) -> Res<bool> {
    match call(c, &evalsha(TRY_ACQUIRE, &[KEY.into()], &["1"]))? {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        v => Err(format!("Redisson tryAcquire: unexpected {v:?}")),
    }
}

/// One contender until `until`, by strategy `s` (0: BLOCK, 1: Redisson's way).
fn client(s: usize, server: &Server, until: Instant) -> Res<Work> {
    let mut c = server.conn()?;
    let mut sub = server.conn()?;
    let channel = sem_channel(KEY);
    let mut w = Work::default();
    while Instant::now() < until {
        let t = Instant::now();
        if s == 0 {
            loop {
                w.attempts += 1;
                match call_s(&mut c, &["SEMAPHORE.ACQUIRE", KEY, "1", "BLOCK", "10000"])? {
                    Value::Int(1) => break,
                    Value::Int(0) => continue,
                    v => return Err(format!("SEMAPHORE.ACQUIRE: unexpected {v:?}")),
                }
            }
        } else {
            w.attempts += 1;
            if !try_acquire(&mut c)? {
                // RedissonSemaphore.acquire(): subscribe, then retry on every message.
                subscription(&mut sub, "SUBSCRIBE", &channel)?;
                loop {
                    w.attempts += 1;
                    if try_acquire(&mut c)? {
                        break;
                    }
                    wait_message(&mut sub, Duration::from_secs(1))?;
                }
                subscription(&mut sub, "UNSUBSCRIBE", &channel)?;
            }
        }
        w.waits_us.push(t.elapsed().as_secs_f64() * 1e6);
        critical(&mut c)?;
        w.acquires += 1;
        let release = if s == 0 {
            strs(&["SEMAPHORE.RELEASE", KEY, "1"])
        } else {
            evalsha(RELEASE, &[KEY.into(), channel.clone()], &["1", "publish"])
        };
        match (s, call(&mut c, &release)?) {
            (0, Value::Int(_)) | (1, Value::Nil) => {}
            (_, v) => return Err(format!("{} release: unexpected {v:?}", STRATEGIES[s])),
        }
    }
    Ok(w)
}

/// One cell: K contenders for `secs`; (acquires/s, attempts per acquire, waits, CPU usec per acquire).
fn cell(b: &Bench, s: usize, k: usize, secs: f64) -> Res<(f64, f64, Vec<f64>, f64)> {
    let server = if s == 0 { &b.m } else { &b.p };
    let mut c = server.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    if s == 0 {
        call_s(&mut c, &["SEMAPHORE.TRYSETPERMITS", KEY, &PERMITS.to_string()])?;
    } else {
        call_s(&mut c, &["SET", KEY, &PERMITS.to_string()])?;
    }
    let cpu0 = cpu_seconds(&mut c)?;
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let results: Vec<Res<Work>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..k).map(|_| scope.spawn(move || client(s, server, until))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("contender thread panicked".into()))).collect()
    });
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(&mut c)? - cpu0;
    let mut total = Work::default();
    for r in results {
        let w = r.map_err(|e| format!("part 9c {} K = {k}: {e}", STRATEGIES[s]))?;
        total.acquires += w.acquires;
        total.attempts += w.attempts;
        total.waits_us.extend(w.waits_us);
    }
    let counter: Option<i64> = redis::cmd("GET").arg(COUNTER).query(&mut c).map_err(err)?;
    if counter.unwrap_or(0) != total.acquires as i64 {
        return Err(format!(
            "MUTUAL EXCLUSION BROKEN: part 9c {} K = {k}: counter {counter:?} after {} holds",
            STRATEGIES[s], total.acquires
        ));
    }
    let left: Option<i64> = redis::cmd("GET").arg(KEY).query(&mut c).map_err(err)?;
    if left != Some(PERMITS) {
        return Err(format!("part 9c {} K = {k}: {left:?} permits left, expected {PERMITS}", STRATEGIES[s]));
    }
    if total.acquires == 0 {
        return Err(format!("part 9c {} K = {k}: no acquire", STRATEGIES[s]));
    }
    let n = total.acquires as f64;
    Ok((n / elapsed, total.attempts as f64 / n, total.waits_us, cpu * 1e6 / n))
}

pub fn run(b: &mut Bench) -> Res<()> {
    if !b.has("SEMAPHORE.ACQUIRE") {
        b.report.skip("part 9c: the module has no SEMAPHORE.ACQUIRE".into());
        return Ok(());
    }
    load(b, TRY_ACQUIRE)?;
    load(b, RELEASE)?;
    let ks: &[usize] = &[8, 32];
    let rounds = b.rounds(3);
    let secs = if b.quick { 0.3 } else { 2.0 };
    let mut t = Table::new(&[
        "K",
        "strategy",
        "acquires/s",
        "BLOCK / this (acquires/s)",
        "attempts per acquire",
        "p50 wait usec",
        "p99 wait usec",
        "server CPU usec per acquire",
        "this / BLOCK (CPU)",
    ]);
    for &k in ks {
        let mut v: Vec<Cells> = (0..2).map(|_| Default::default()).collect();
        for r in 0..rounds {
            for s in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                progress!("part 9c: K = {k} {} round {}/{rounds}", STRATEGIES[s], r + 1);
                let (rate, att, waits, cpu) = cell(b, s, k, secs)?;
                v[s].0.push(rate);
                v[s].1.push(att);
                v[s].2.extend(waits);
                v[s].3.push(cpu);
            }
        }
        for s in 0..2 {
            let att = Summary::of(&v[s].1);
            let cpu_ratio = Summary::of(&ratios(&v[s].3, &v[0].3));
            let mut waits = v[s].2.clone();
            t.row(vec![
                k.to_string(),
                STRATEGIES[s].into(),
                format!("{}", Ratio(Summary::of(&v[s].0))),
                if s == 0 { "1".into() } else { format!("{}", Ratio(Summary::of(&ratios(&v[0].0, &v[s].0)))) },
                num(att.median),
                num(percentile(&mut waits, 50.0)),
                num(percentile(&mut waits, 99.0)),
                num(Summary::of(&v[s].3).median),
                if s == 0 { "1".into() } else { format!("{}", Ratio(cpu_ratio)) },
            ]);
            if s == 0 {
                b.report.target(
                    &format!("semaphore K = {k}: BLOCK attempts per acquire"),
                    "1.00",
                    format!("{:.2} (max {:.2})", att.median, att.max),
                    Some(att.max <= 1.0),
                );
            } else {
                b.report.target(
                    &format!("semaphore K = {k}: server CPU per acquire, Redisson's way / BLOCK"),
                    "> 1x",
                    format!("{}", Ratio(cpu_ratio)),
                    Some(cpu_ratio.median > 1.0),
                );
            }
        }
    }
    b.report.section(
        "9c. Redisson's synchronizers: semaphore hand-off",
        &format!(
            "K contenders, each with its own connection (and a second one for its subscription), take the one \
             permit of a semaphore over and over for {secs} s per cell, zero hold time; {rounds} rounds per K with \
             the strategies in alternating order. BLOCK: `SEMAPHORE.ACQUIRE name 1 BLOCK 10000` and \
             `SEMAPHORE.RELEASE name 1` (module's server). Redisson: `RSemaphore.acquire()` as its client runs it, \
             on the server without the module: the tryAcquire body (`{}`); on refusal `SUBSCRIBE \
             redisson_sc:{{name}}`, then the body again after each message (or 1 s) until it grants, then \
             `UNSUBSCRIBE`; the release body (`{}`: `INCRBY`, and a message every subscriber receives). An \
             attempt is one acquire call (the body, or `SEMAPHORE.ACQUIRE`). Each hold runs `INCR` of a holders \
             counter (never above the one permit), a non-atomic GET/SET increment that matched the number of \
             acquires in every cell, and `DECR`: mutual exclusion held. Waits pool every round's samples; server \
             CPU is the `INFO cpu` user+sys delta of the cell's server, per acquire (the hold's three commands \
             included on both sides).",
            &TRY_ACQUIRE[..10],
            &RELEASE[..10]
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
