//! Part 3, throughput: `redis-benchmark -c 50 -P 16` on `LOCK.ACQUIRE` with random keys against
//! `SET NX PX` on the module-free server, and a pipelined stream of acquire+unlock pairs from the
//! driver, module against the Lua reference (and against a stream of plain `SET NX PX`).

use std::time::Instant;

use crate::names::*;
use crate::report::Table;
use crate::server::{call_s, pipeline, redis_benchmark, Res, Server};
use crate::stats::{ratios, Ratio, Summary};
use crate::strs;
use crate::workloads::{Expect, LEASE};
use crate::{progress, Bench};

/// Sends `cmds` in pipelined batches, checks every reply, and returns the wall seconds.
fn stream(c: &mut redis::Connection, cmds: &[(Vec<String>, Expect)]) -> Res<f64> {
    let t = Instant::now();
    for b in cmds.chunks(1000) {
        let args: Vec<Vec<String>> = b.iter().map(|(a, _)| a.clone()).collect();
        let replies = pipeline(c, &args)?;
        for ((a, e), v) in b.iter().zip(&replies) {
            if !e.check(v) {
                return Err(format!("{}: expected {e:?}, got {v:?}", a.join(" ")));
            }
        }
    }
    Ok(t.elapsed().as_secs_f64())
}

fn evalsha(sha: &str, keys: &[String], argv: &[&str]) -> Vec<String> {
    let mut e = vec!["EVALSHA".to_string(), sha.to_string(), keys.len().to_string()];
    e.extend(keys.iter().cloned());
    e.extend(argv.iter().map(|s| s.to_string()));
    e
}

/// Pairs per second of one side: `side` 0 = module, 1 = Lua, 2 = SET NX PX (one command a "pair").
fn pairs(b: &Bench, side: usize, n: usize, round: usize) -> Res<f64> {
    const ME: &str = "6b1f0c3a-0000-4000-8000-000000000001:1";
    let server = if side == 0 { &b.m } else { &b.p };
    let mut c = server.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    let (acq, unl) = (b.sha("lock_acquire").unwrap_or_default(), b.sha("lock_unlock").unwrap_or_default());
    let mut cmds = Vec::with_capacity(2 * n);
    for i in 0..n {
        let key = format!("pair:{round}:{i}");
        match side {
            0 => {
                cmds.push((strs(&["LOCK.ACQUIRE", &key, ME, LEASE]), Expect::Nil));
                cmds.push((strs(&["LOCK.UNLOCK", &key, ME, LEASE]), Expect::Int(1)));
            }
            1 => {
                cmds.push((evalsha(&acq, std::slice::from_ref(&key), &[ME, LEASE]), Expect::Nil));
                cmds.push((evalsha(&unl, &[key.clone(), lock_channel(&key)], &[ME, LEASE]), Expect::Int(1)));
            }
            _ => cmds.push((strs(&["SET", &key, ME, "NX", "PX", LEASE]), Expect::Ok)),
        }
    }
    Ok(n as f64 / stream(&mut c, &cmds)?)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let rounds = b.rounds(5);
    let n = b.size(400_000, 20_000);
    let mut t = Table::new(&["measure", "module", "baseline", "module / baseline", "Lua / baseline (anchor)"]);
    let ran_rb = b.available("part 3 LOCK.ACQUIRE throughput", "LOCK.ACQUIRE", &["lock_acquire", "lock_unlock"]);
    if !ran_rb {
        return Err("part 3 needs LOCK.ACQUIRE and its Lua reference".into());
    }
    // redis-benchmark: LOCK.ACQUIRE vs SET NX PX (module-free server) vs EVALSHA (module-free).
    let sha = b.sha("lock_acquire").unwrap_or_default();
    let (mut vm, mut vs, mut vl) = (vec![], vec![], vec![]);
    let rb = |s: &Server, args: &[&str]| redis_benchmark(s, n, 1_000_000, args);
    for r in 0..rounds {
        progress!("part 3: redis-benchmark round {}/{rounds}", r + 1);
        for s in if r % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] } {
            call_s(&mut if s == 0 { b.m.conn()? } else { b.p.conn()? }, &["FLUSHALL"])?;
            match s {
                0 => vm.push(rb(&b.m, &["LOCK.ACQUIRE", "lock:__rand_int__", "owner:1", LEASE])?),
                1 => vs.push(rb(&b.p, &["SET", "lock:__rand_int__", "owner:1", "NX", "PX", LEASE])?),
                _ => vl.push(rb(&b.p, &["EVALSHA", &sha, "1", "lock:__rand_int__", "owner:1", LEASE])?),
            }
        }
    }
    let rm = Summary::of(&ratios(&vm, &vs));
    let rl = Summary::of(&ratios(&vl, &vs));
    t.row(vec![
        "`redis-benchmark -c 50 -P 16`, acquire random keys, requests/s".into(),
        crate::stats::num(Summary::of(&vm).median),
        format!("{} (SET NX PX)", crate::stats::num(Summary::of(&vs).median)),
        format!("{}", Ratio(rm)),
        format!("{}", Ratio(rl)),
    ]);
    b.report.target(
        "LOCK.ACQUIRE throughput / SET NX PX (redis-benchmark)",
        ">= 0.8x",
        format!("{}", Ratio(rm)),
        Some(rm.median >= 0.8),
    );
    b.report.target(
        "EVALSHA acquire throughput / SET NX PX (anchor)",
        "Redisson 0.36x",
        format!("{}", Ratio(rl)),
        None,
    );

    // Pipelined acquire+unlock pairs from the driver.
    let np = b.size(100_000, 5_000);
    let (mut pm, mut pl, mut ps) = (vec![], vec![], vec![]);
    for r in 0..rounds {
        progress!("part 3: acquire+unlock pairs round {}/{rounds}", r + 1);
        for s in if r % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] } {
            let v = pairs(b, s, np, r)?;
            [&mut pm, &mut pl, &mut ps][s].push(v);
        }
    }
    let pm_s = Summary::of(&ratios(&pm, &ps));
    let pl_s = Summary::of(&ratios(&pl, &ps));
    t.row(vec![
        "pipelined acquire+unlock pairs from one client, pairs/s".into(),
        crate::stats::num(Summary::of(&pm).median),
        format!("{} (SET NX PX/s)", crate::stats::num(Summary::of(&ps).median)),
        format!("{}", Ratio(pm_s)),
        format!("{}", Ratio(pl_s)),
    ]);
    t.row(vec![
        "pairs: module / Lua".into(),
        crate::stats::num(Summary::of(&pm).median),
        format!("{} (Lua pairs/s)", crate::stats::num(Summary::of(&pl).median)),
        format!("{}", Ratio(Summary::of(&ratios(&pm, &pl)))),
        String::new(),
    ]);
    b.report.target(
        "acquire+unlock pairs / SET NX PX",
        ">= 0.5x",
        format!("{}", Ratio(pm_s)),
        Some(pm_s.median >= 0.5),
    );
    b.report.target(
        "Lua acquire+unlock pairs / SET NX PX (anchor)",
        "Redisson 0.15x",
        format!("{}", Ratio(pl_s)),
        None,
    );
    b.report.section(
        "3. Throughput",
        &format!(
            "`redis-benchmark -c 50 -P 16 -r 1000000 -n {n}` on `LOCK.ACQUIRE lock:__rand_int__ owner:1 30000` \
             (module server) against `SET lock:__rand_int__ owner:1 NX PX 30000` and the Lua reference by EVALSHA \
             (server without the module), {rounds} rounds in alternating order. Then {np} acquire+unlock pairs on \
             fresh keys as one pipelined stream (batches of 1,000, every reply checked) from the driver, against the \
             same number of `SET NX PX` and of EVALSHA pairs. The driver is one client thread on the same 2 shared \
             cores, so the pairs ratio is bounded by the client as much as by the server."
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
