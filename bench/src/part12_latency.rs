//! Part 12's first table: one task alone (spawned on the driver's 2-worker runtime, as an
//! application's code runs) takes and releases one lock over and over, by the Rust client and
//! by rslock, each acquire and each unlock timed. What a caller pays when nobody else wants the
//! lock: the library's own cost over the round trips.

use std::time::{Duration, Instant};

use crate::report::Table;
use crate::server::{call_s, Res};
use crate::stats::{num, percentile, ratios, Ratio, Summary};
use crate::{progress, Bench};

pub(crate) const CLIENT_KEY: &str = "bench:rust-client";
pub(crate) const RSLOCK_KEY: &str = "bench:rslock";
pub(crate) const SIDES: [&str; 2] = ["redis-lockmod-client (BLOCK)", "rslock 0.10 (SET NX PX, retry)"];

/// A connection of the application's, for the critical sections.
pub(crate) async fn app_conn(url: &str) -> Res<redis1::aio::MultiplexedConnection> {
    let client = redis1::Client::open(url).map_err(|e| e.to_string())?;
    let config = redis1::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(30)));
    client.get_multiplexed_async_connection_with_config(&config).await.map_err(|e| e.to_string())
}

/// Per round: (acquire usec, unlock usec, cycle usec) of every cycle.
type Samples = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Cycles before the timed ones (connections made, caches warm).
const WARMUP: usize = 200;

async fn client_cycles(url: String, n: usize) -> Res<Samples> {
    let client = redis1::Client::open(url).map_err(|e| e.to_string())?;
    let locks = redis_lockmod_client::LockClient::new(client).map_err(|e| e.to_string())?;
    let lock = locks.lock(CLIENT_KEY);
    let mut out = Samples::default();
    for i in 0..WARMUP + n {
        let t0 = Instant::now();
        let g = lock.acquire().await.map_err(|e| e.to_string())?;
        let t1 = Instant::now();
        g.unlock().await.map_err(|e| e.to_string())?;
        let t2 = Instant::now();
        if i >= WARMUP {
            out.0.push((t1 - t0).as_secs_f64() * 1e6);
            out.1.push((t2 - t1).as_secs_f64() * 1e6);
            out.2.push((t2 - t0).as_secs_f64() * 1e6);
        }
    }
    locks.close().await;
    Ok(out)
}

async fn rslock_cycles(url: String, n: usize) -> Res<Samples> {
    let rl = rslock::LockManager::new(vec![url]);
    let mut out = Samples::default();
    for i in 0..WARMUP + n {
        let t0 = Instant::now();
        let g = rl.acquire(RSLOCK_KEY, Duration::from_secs(10)).await.map_err(|e| format!("rslock: {e:?}"))?;
        let t1 = Instant::now();
        g.release().await;
        let t2 = Instant::now();
        if i >= WARMUP {
            out.0.push((t1 - t0).as_secs_f64() * 1e6);
            out.1.push((t2 - t1).as_secs_f64() * 1e6);
            out.2.push((t2 - t0).as_secs_f64() * 1e6);
        }
    }
    Ok(out)
}

/// The uncontended table; also records the target: acquire+unlock p50 within 1.2x of rslock.
pub fn run(b: &mut Bench, rt: &tokio::runtime::Runtime) -> Res<Table> {
    let rounds = b.rounds(5);
    let n = b.size(2000, 200);
    let url = b.m.url();
    // Per side: pooled samples, and each round's cycle p50 (for the paired ratio).
    let mut pooled: Vec<Samples> = vec![Samples::default(), Samples::default()];
    let mut p50s: Vec<Vec<f64>> = vec![vec![], vec![]];
    for r in 0..rounds {
        let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
        for s in order {
            progress!("part 12: uncontended, {} round {}/{rounds}", SIDES[s], r + 1);
            call_s(&mut b.m.conn()?, &["FLUSHALL"])?;
            let url = url.clone();
            let mut got = rt.block_on(async move {
                let task =
                    if s == 0 { tokio::spawn(client_cycles(url, n)) } else { tokio::spawn(rslock_cycles(url, n)) };
                task.await.map_err(|e| format!("task: {e}"))?
            })?;
            p50s[s].push(percentile(&mut got.2, 50.0));
            pooled[s].0.extend(got.0);
            pooled[s].1.extend(got.1);
            pooled[s].2.extend(got.2);
        }
    }
    let mut t = Table::new(&[
        "one task alone",
        "acquire p50 usec",
        "unlock p50 usec",
        "acquire+unlock p50 usec",
        "acquire+unlock p99 usec",
        "acquire+unlock p50, this / rslock",
    ]);
    let vs = Summary::of(&ratios(&p50s[0], &p50s[1]));
    for s in 0..2 {
        let (a, u, c) = &mut pooled[s];
        t.row(vec![
            SIDES[s].into(),
            num(percentile(a, 50.0)),
            num(percentile(u, 50.0)),
            num(percentile(c, 50.0)),
            num(percentile(c, 99.0)),
            if s == 0 { format!("{}", Ratio(vs)) } else { "1".into() },
        ]);
    }
    b.report.target(
        "Rust client alone: acquire+unlock p50, client / rslock",
        "<= 1.2",
        format!("{}", Ratio(vs)),
        Some(vs.median <= 1.2),
    );
    Ok(t)
}
