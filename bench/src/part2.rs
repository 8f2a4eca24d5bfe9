//! Part 2, scaling with the work: one read unlock (then a re-acquire to restore) while N other
//! owners hold reads on the same lock, and one fair grant (holder unlocks, queue head acquires)
//! with N waiters queued; module against the Lua reference, usec per call and per key or waiter.

use crate::chart;
use crate::names::*;
use crate::report::Table;
use crate::server::{call_s, command_stat, pipeline, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::workloads::{Expect, WAIT};
use crate::{progress, Bench};

/// Leases long enough that nothing expires during a chunk.
const LONG: &str = "3600000";
const KEY: &str = "bench:scale";
const ME: &str = "6b1f0c3a-0000-4000-8000-000000000001:1";

/// Runs `cmds` and checks each reply against its expectation.
fn run_checked(c: &mut redis::Connection, cmds: &[(Vec<String>, Expect)]) -> Res<()> {
    for b in cmds.chunks(3000) {
        let args: Vec<Vec<String>> = b.iter().map(|(a, _)| a.clone()).collect();
        let replies = pipeline(c, &args)?;
        for ((a, e), v) in b.iter().zip(&replies) {
            if !e.check(v) {
                return Err(format!("{}: expected {e:?}, got {v:?}", a.join(" ")));
            }
        }
    }
    Ok(())
}

fn evalsha(sha: &str, keys: &[String], argv: &[&str]) -> Vec<String> {
    let mut e = vec!["EVALSHA".to_string(), sha.to_string(), keys.len().to_string()];
    e.extend(keys.iter().cloned());
    e.extend(argv.iter().map(|s| s.to_string()));
    e
}

/// Server usec of the measured commands in a chunk: sum over `stats` of usec, divided by `samples`.
fn measured(c: &mut redis::Connection, stats: &[&str], samples: usize) -> Res<f64> {
    let mut usec = 0;
    for s in stats {
        usec += command_stat(c, s)?.1;
    }
    Ok(usec as f64 / samples as f64)
}

/// One read-unlock chunk on one side; returns usec per unlock.
fn read_unlock_chunk(c: &mut redis::Connection, lua: Option<&[String; 2]>, n: usize, s: usize) -> Res<(f64, f64)> {
    call_s(c, &["FLUSHALL"])?;
    let mut setup = vec![];
    for i in 0..=n {
        let owner = if i == 0 { ME.to_string() } else { format!("holder-{i}") };
        let cmd = match lua {
            None => strs(&["RWLOCK.RLOCK", KEY, &owner, LONG]),
            Some([rlock, _]) => evalsha(rlock, &[KEY.into(), read_timeout_prefix(KEY, &owner)], &[&owner, LONG]),
        };
        setup.push((cmd, Expect::Nil));
    }
    run_checked(c, &setup)?;
    let t1 = format!("{}:1", read_timeout_prefix(KEY, ME));
    let mut cmds = vec![];
    for _ in 0..=s {
        match lua {
            None => {
                cmds.push((strs(&["RWLOCK.UNLOCK", KEY, ME, "READ", LONG]), Expect::Int(0)));
                cmds.push((strs(&["RWLOCK.RLOCK", KEY, ME, LONG]), Expect::Nil));
            }
            Some([_, unlock]) => {
                let keys = [KEY.into(), rwlock_channel(KEY), read_timeout_prefix(KEY, ME), key_prefix(KEY)];
                cmds.push((evalsha(unlock, &keys, &[ME, LONG]), Expect::Int(0)));
                cmds.push((strs(&["HINCRBY", KEY, ME, "1"]), Expect::Int(1)));
                cmds.push((strs(&["SET", &t1, "1", "PX", LONG]), Expect::Ok));
            }
        }
    }
    first_then_steady(c, &cmds, &[if lua.is_some() { "evalsha" } else { "rwlock.unlock" }], s)
}

/// Runs `s + 1` equal cycles: the first alone (the module builds a lock's read-hold index on its
/// first unlock), then the other `s`; returns (usec per steady cycle, usec of the first).
fn first_then_steady(
    c: &mut redis::Connection,
    cmds: &[(Vec<String>, Expect)],
    stats: &[&str],
    s: usize,
) -> Res<(f64, f64)> {
    let per = cmds.len() / (s + 1);
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    run_checked(c, &cmds[..per])?;
    let first = measured(c, stats, 1)?;
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    run_checked(c, &cmds[per..])?;
    Ok((measured(c, stats, s)?, first))
}

/// One fair-grant chunk on one side; returns usec per grant (the unlock plus the head's acquire).
fn fair_grant_chunk(c: &mut redis::Connection, lua: Option<&[String; 2]>, n: usize, s: usize) -> Res<(f64, f64)> {
    call_s(c, &["FLUSHALL"])?;
    let now = now_ms();
    let (q, z) = (fair_queue(KEY), fair_timeouts(KEY));
    let wait: i64 = WAIT.parse().unwrap_or(5000);
    let base = now + 3_600_000;
    let mut setup = vec![(strs(&["HSET", KEY, "holder-0", "1"]), Expect::Int(1))];
    setup.push((strs(&["PEXPIRE", KEY, LONG]), Expect::Int(1)));
    let mut queue: std::collections::VecDeque<String> = (1..=n).map(|i| format!("waiter-{i}")).collect();
    for (j, part) in queue.iter().collect::<Vec<_>>().chunks(1000).enumerate() {
        let mut rpush = strs(&["RPUSH", &q]);
        let mut zadd = strs(&["ZADD", &z]);
        for (i, w) in part.iter().enumerate() {
            rpush.push(w.to_string());
            zadd.push((base + wait * (j * 1000 + i + 1) as i64).to_string());
            zadd.push(w.to_string());
        }
        setup.push((rpush, Expect::PositiveInt));
        setup.push((zadd, Expect::PositiveInt));
    }
    run_checked(c, &setup)?;
    let tail = base + wait * n as i64;
    let mut holder = "holder-0".to_string();
    let chan = lock_channel(KEY);
    let nows = now.to_string();
    let mut cmds = vec![];
    for j in 0..=s {
        let head = queue.pop_front().ok_or("fair queue ran dry")?;
        match lua {
            None => {
                cmds.push((strs(&["FAIRLOCK.UNLOCK", KEY, &holder, LONG]), Expect::Int(1)));
                cmds.push((strs(&["FAIRLOCK.ACQUIRE", KEY, &head, LONG, WAIT]), Expect::Nil));
            }
            Some([acquire, unlock]) => {
                let keys = [KEY.into(), q.clone(), z.clone(), chan.clone()];
                cmds.push((evalsha(unlock, &keys, &[&holder, LONG, &nows]), Expect::Int(1)));
                cmds.push((evalsha(acquire, &keys[..3], &[&head, LONG, WAIT, &nows]), Expect::Nil));
            }
        }
        // Keep the queue at N: a new waiter joins the tail. The grant moved the old tail's deadline
        // down by `wait`, so the newcomer's (old tail + wait) is the old tail's former deadline.
        let fresh = format!("late-{j}");
        cmds.push((strs(&["RPUSH", &q, &fresh]), Expect::PositiveInt));
        cmds.push((strs(&["ZADD", &z, &tail.to_string(), &fresh]), Expect::Int(1)));
        queue.push_back(fresh);
        holder = head;
    }
    let stats: &[&str] = if lua.is_some() { &["evalsha"] } else { &["fairlock.unlock", "fairlock.acquire"] };
    first_then_steady(c, &cmds, stats, s)
}

type ChunkFn = fn(&mut redis::Connection, Option<&[String; 2]>, usize, usize) -> Res<(f64, f64)>;

/// Runs one scenario over every N; returns the (N, module usec, Lua usec) medians for the chart.
fn scenario(b: &mut Bench, name: &str, scripts: [&str; 2], f: ChunkFn, t: &mut Table) -> Res<Vec<(f64, f64, f64)>> {
    let ns: &[usize] = if b.quick { &[1, 100] } else { &[1, 100, 1000, 10000] };
    let rounds = b.rounds(5);
    let shas = [b.sha(scripts[0]).unwrap_or_default(), b.sha(scripts[1]).unwrap_or_default()];
    let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
    let mut points = vec![];
    for &n in ns {
        let s = if b.quick { 5 } else { (20_000 / n).clamp(20, 400) };
        let (mut vm, mut vl, mut first) = (vec![], vec![], vec![]);
        for r in 0..rounds {
            progress!("part 2: {name}, N = {n}, round {}/{rounds}", r + 1);
            let mut module = |mc: &mut redis::Connection| -> Res<()> {
                let (steady, once) = f(mc, None, n, s)?;
                vm.push(steady);
                first.push(once);
                Ok(())
            };
            if r % 2 == 0 {
                module(&mut mc)?;
                vl.push(f(&mut pc, Some(&shas), n, s)?.0);
            } else {
                vl.push(f(&mut pc, Some(&shas), n, s)?.0);
                module(&mut mc)?;
            }
        }
        let (m, l) = (Summary::of(&vm).median, Summary::of(&vl).median);
        let ratio = Summary::of(&ratios(&vl, &vm));
        t.row(vec![
            name.into(),
            n.to_string(),
            num(m),
            num(l),
            format!("{}", Ratio(ratio)),
            num(m / n as f64),
            num(l / n as f64),
            num(Summary::of(&first).median),
        ]);
        points.push((n as f64, m, l));
        let goal = match (name, n) {
            ("read unlock", 1000) => Some(10.0),
            ("read unlock", 10000) => Some(100.0),
            ("fair grant", 1000 | 10000) => Some(5.0),
            _ => None,
        };
        if let Some(g) = goal {
            let what = format!("{name} at N = {n}: Lua / module (Lua {} usec)", num(l));
            b.report.target(&what, &format!(">= {g}x"), format!("{}", Ratio(ratio)), Some(ratio.median >= g));
        }
    }
    Ok(points)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let mut t = Table::new(&[
        "scenario",
        "N",
        "module usec",
        "Lua usec",
        "Lua / module",
        "module usec per key",
        "Lua usec per key",
        "module usec, first call after setup",
    ]);
    let mut series = vec![];
    if b.available("part 2 read unlock", "RWLOCK.UNLOCK", &["rwlock_rlock", "rwlock_unlock_read"]) {
        let p = scenario(b, "read unlock", ["rwlock_rlock", "rwlock_unlock_read"], read_unlock_chunk, &mut t)?;
        series.push(("read unlock, module".to_string(), p.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>()));
        series.push(("read unlock, Lua".to_string(), p.iter().map(|x| (x.0, x.2)).collect()));
    } else {
        t.row(vec![
            "read unlock".into(),
            "all".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
        ]);
    }
    if b.available("part 2 fair grant", "FAIRLOCK.ACQUIRE", &["fair_acquire", "fair_unlock"]) {
        let p = scenario(b, "fair grant", ["fair_acquire", "fair_unlock"], fair_grant_chunk, &mut t)?;
        series.push(("fair grant, module".to_string(), p.iter().map(|x| (x.0, x.1)).collect()));
        series.push(("fair grant, Lua".to_string(), p.iter().map(|x| (x.0, x.2)).collect()));
    } else {
        t.row(vec![
            "fair grant".into(),
            "all".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
            "n/a".into(),
        ]);
    }
    if series.is_empty() {
        return Err("part 2 ran no scenario".into());
    }
    let file = "scaling.svg";
    chart::lines(
        &b.out.join("img").join(file),
        "Server usec per call against N",
        "N (holders or waiters)",
        "usec per call",
        &series,
        true,
    )?;
    let charts = vec![(file.to_string(), "usec per call against N, module and Lua, log axes".to_string())];
    b.report.section(
        "2. Scaling with the work",
        "Read unlock: one owner unlocks its single read hold (then re-acquires it, not measured) while N other \
         owners hold reads on the same lock. Fair grant: the holder unlocks and the queue head acquires, with N \
         waiters queued (a new waiter joins the tail each cycle, not measured). Server usec from `INFO commandstats` \
         (module: the command lines; Lua: the `evalsha` line), module and Lua chunks alternating; per key = usec / N. \
         The first cycle after the setup is measured apart and left out of the steady figures: the module builds a \
         lock's read-hold expiry index on its first read unlock (one scan of the N holds), then keeps it up to date.",
        vec![t],
        charts,
    );
    Ok(())
}
