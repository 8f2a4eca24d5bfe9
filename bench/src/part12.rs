//! Part 12, the Rust client against rslock: one task alone (part12_latency), then K tokio tasks
//! take one lock over and over with zero hold time and with 1 ms critical sections, by this
//! repository's Rust client (clients/rust: one `Lock` per task, its wait the module's `BLOCK`)
//! and by rslock (crates.io's Redlock crate: `SET NX PX`, retried after a random delay of up to
//! 200 ms, its defaults), on the same server in the same run.
//! Each critical section does a non-atomic GET/SET increment of a counter, which must end exact.
//! (Parts 10 and 11 are the rate limiter's and GCRA's.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis1::AsyncCommands;

use crate::part12_latency::{self, app_conn, CLIENT_KEY, RSLOCK_KEY, SIDES};
use crate::report::Table;
use crate::server::{call_s, command_stat, cpu_seconds, Res};
use crate::stats::{num, percentile, ratios, Ratio, Summary};
use crate::{progress, Bench};

const COUNTER: &str = "bench:rust:counter";

/// Per side: cs/s, attempts/cs, waits (usec), server CPU usec per cs, over the rounds.
type Cells = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);

/// What one task did.
#[derive(Default)]
struct Work {
    cs: u64,
    waits_us: Vec<f64>,
}

/// The non-atomic increment that exposes two holders at once, then `hold` inside the lock.
async fn critical(c: &mut redis1::aio::MultiplexedConnection, hold: Duration) -> Res<()> {
    let v: Option<i64> = c.get(COUNTER).await.map_err(|e| e.to_string())?;
    let _: () = c.set(COUNTER, v.unwrap_or(0) + 1).await.map_err(|e| e.to_string())?;
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    Ok(())
}

async fn client_task(
    locks: redis_lockmod_client::LockClient,
    url: String,
    until: Instant,
    hold: Duration,
) -> Res<Work> {
    let mut c = app_conn(&url).await?;
    let lock = locks.lock(CLIENT_KEY);
    let mut w = Work::default();
    while Instant::now() < until {
        let t = Instant::now();
        let g = lock.acquire().await.map_err(|e| e.to_string())?;
        w.waits_us.push(t.elapsed().as_secs_f64() * 1e6);
        critical(&mut c, hold).await?;
        w.cs += 1;
        g.unlock().await.map_err(|e| e.to_string())?;
    }
    Ok(w)
}

async fn rslock_task(rl: Arc<rslock::LockManager>, url: String, until: Instant, hold: Duration) -> Res<Work> {
    let mut c = app_conn(&url).await?;
    let mut w = Work::default();
    while Instant::now() < until {
        let t = Instant::now();
        let guard = rl.acquire(RSLOCK_KEY, Duration::from_secs(10)).await.map_err(|e| format!("rslock: {e:?}"))?;
        w.waits_us.push(t.elapsed().as_secs_f64() * 1e6);
        critical(&mut c, hold).await?;
        w.cs += 1;
        guard.release().await;
    }
    Ok(w)
}

/// One cell: K tasks for `secs` on side `s`, each critical section held `hold`; returns (cs/s,
/// acquire commands per cs, waits, cpu/cs usec).
fn cell(
    b: &Bench,
    rt: &tokio::runtime::Runtime,
    s: usize,
    k: usize,
    secs: f64,
    hold: Duration,
) -> Res<(f64, f64, Vec<f64>, f64)> {
    let mut c = b.m.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    // Attempts are counted by the server: LOCK.ACQUIRE calls for the client, SET NX PX for
    // rslock (less the critical sections' own SETs).
    let (stat, own) = if s == 0 { ("lock.acquire", 0) } else { ("set", 1) };
    let calls0 = command_stat(&mut c, stat)?.0;
    let cpu0 = cpu_seconds(&mut c)?;
    let url = b.m.url();
    let start = Instant::now();
    let until = start + Duration::from_secs_f64(secs);
    let results: Vec<Res<Work>> = rt.block_on(async {
        let locks =
            redis_lockmod_client::LockClient::new(redis1::Client::open(url.clone()).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        let rl = Arc::new(rslock::LockManager::new(vec![url.clone()]));
        let tasks: Vec<_> = (0..k)
            .map(|_| {
                if s == 0 {
                    tokio::spawn(client_task(locks.clone(), url.clone(), until, hold))
                } else {
                    tokio::spawn(rslock_task(rl.clone(), url.clone(), until, hold))
                }
            })
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
        }
        locks.close().await;
        Ok::<_, String>(out)
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds(&mut c)? - cpu0;
    let mut total = Work::default();
    for r in results {
        let w = r?;
        total.cs += w.cs;
        total.waits_us.extend(w.waits_us);
    }
    let counter: Option<i64> = redis::cmd("GET").arg(COUNTER).query(&mut c).map_err(|e| e.to_string())?;
    if counter.unwrap_or(0) != total.cs as i64 {
        return Err(format!(
            "MUTUAL EXCLUSION BROKEN: {} K={k}: counter {counter:?} after {} critical sections",
            SIDES[s], total.cs
        ));
    }
    if total.cs == 0 {
        return Err(format!("{} K={k}: no critical section ran", SIDES[s]));
    }
    let calls = command_stat(&mut c, stat)?.0 - calls0;
    let cs = total.cs as f64;
    let attempts = (calls as f64 - own as f64 * cs) / cs;
    Ok((cs / elapsed, attempts, total.waits_us, cpu * 1e6 / cs))
}

pub fn run(b: &mut Bench) -> Res<()> {
    if !b.available("part 12", "LOCK.ACQUIRE", &[]) {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let uncontended = part12_latency::run(b, &rt)?;
    // (K tasks, hold inside the critical section)
    let cells: &[(usize, Duration)] =
        &[(8, Duration::ZERO), (32, Duration::ZERO), (8, Duration::from_millis(1)), (32, Duration::from_millis(1))];
    let rounds = b.rounds(3);
    let secs = if b.quick { 0.3 } else { 2.0 };
    let mut t = Table::new(&[
        "K tasks",
        "hold",
        "library",
        "critical sections/s",
        "client / this",
        "attempts per cs",
        "p50 wait usec",
        "p99 wait usec",
        "max wait usec",
        "server CPU usec per cs",
    ]);
    for &(k, hold) in cells {
        // Per side: cs/s, attempts/cs, cpu/cs per round; waits pooled.
        let mut v: Vec<Cells> = (0..2).map(|_| Default::default()).collect();
        for r in 0..rounds {
            let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
            for s in order {
                progress!("part 12: K = {k}, hold {hold:?}, {} round {}/{rounds}", SIDES[s], r + 1);
                let (rate, att, waits, cpu) = cell(b, &rt, s, k, secs, hold)?;
                v[s].0.push(rate);
                v[s].1.push(att);
                v[s].2.extend(waits);
                v[s].3.push(cpu);
            }
        }
        let held = if hold.is_zero() { "0".to_string() } else { format!("{} ms", hold.as_millis()) };
        let mut worst = [0.0; 2];
        for s in 0..2 {
            let rate = Summary::of(&v[s].0);
            let vs = ratios(&v[0].0, &v[s].0);
            let mut waits = v[s].2.clone();
            let att = Summary::of(&v[s].1);
            worst[s] = percentile(&mut waits, 100.0);
            t.row(vec![
                k.to_string(),
                held.clone(),
                SIDES[s].into(),
                format!("{}", Ratio(rate)),
                if s == 0 { "1".into() } else { format!("{}", Ratio(Summary::of(&vs))) },
                num(att.median),
                num(percentile(&mut waits, 50.0)),
                num(percentile(&mut waits, 99.0)),
                num(worst[s]),
                num(Summary::of(&v[s].3).median),
            ]);
            if s == 0 {
                b.report.target(
                    &format!("Rust client K = {k}, hold {held}: attempts per critical section"),
                    "<= 1.1",
                    num(att.median),
                    Some(att.median <= 1.1),
                );
            } else {
                // Measured, no goal: rslock's retry lets the releasing task take the lock again
                // (unfair, cheap), the client hands it over in arrival order.
                b.report.target(
                    &format!("Rust client K = {k}, hold {held}: critical sections/s, client / rslock"),
                    "measured",
                    format!("{}", Ratio(Summary::of(&vs))),
                    None,
                );
            }
        }
        if !hold.is_zero() {
            b.report.target(
                &format!("Rust client K = {k}, hold {held}: worst wait, rslock / client"),
                "measured",
                num(worst[1] / worst[0]),
                None,
            );
        }
    }
    b.report.section(
        "12. The Rust client against rslock",
        &format!(
            "First one task alone (uncontended; a task spawned on the driver's 2-worker runtime, as an application's \
             code runs): acquire and unlock one lock over and over, each call timed. Then K \
             tokio tasks (a 2-worker runtime in the driver) take one lock over and over for {secs} s per cell, with \
             zero hold time and with 1 ms critical sections (a `tokio::time::sleep`, which rounds up to the timer's \
             1 ms tick); {rounds} rounds per cell with the two libraries in alternating order, on the server with \
             the module. redis-lockmod-client (clients/rust): one `Lock` per task on one `LockClient`, `acquire()` \
             (the module's `LOCK.ACQUIRE ... BLOCK 0`, the watchdog lease) and `unlock()`. rslock 0.10 \
             (crates.io): `acquire()` with its defaults (a 10 s TTL here; `SET NX PX`, and on refusal its unlock \
             script and a random delay of up to 200 ms before the next try). Inside each critical section a \
             non-atomic GET/SET increment on the task's own connection; the counter matched the number of critical \
             sections in every cell. Attempts are the server's count of acquire commands (`LOCK.ACQUIRE`; `SET` \
             less the critical sections' own) per critical section; waits are measured around the acquire in the \
             task (every round's samples pooled); server CPU is the `INFO cpu` user+sys delta per critical section."
        ),
        vec![uncontended, t],
        vec![],
    );
    Ok(())
}
