//! Part 1, server cost per call: `INFO commandstats` usec per call of every command form, beside
//! `SET k v NX PX` on fresh keys (on the module-free server, which gates, and on the module's) and
//! beside the Lua reference run by EVALSHA with the same arguments.

use crate::report::Table;
use crate::server::{call_s, command_stat, pipeline, Res};
use crate::stats::{now_ms, ratios, Ratio, Summary};
use crate::workloads::{set_nx_px, table, Ctx, Expect, Workload};
use crate::{progress, Bench};

/// Commands per pipeline write.
const BATCH: usize = 1000;

/// Flushes, runs `setup`, resets the stats, runs `calls` checking every reply, and returns the
/// server's usec per call of `stat`.
pub fn chunk(
    c: &mut redis::Connection,
    setup: &[Vec<String>],
    calls: &[Vec<String>],
    expect: Expect,
    stat: &str,
) -> Res<f64> {
    call_s(c, &["FLUSHALL"])?;
    for b in setup.chunks(BATCH * 3) {
        pipeline(c, b)?;
    }
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    for b in calls.chunks(BATCH) {
        let replies = pipeline(c, b)?;
        for (args, v) in b.iter().zip(&replies) {
            if !expect.check(v) {
                return Err(format!("{}: expected {expect:?}, got {v:?}", args.join(" ")));
            }
        }
    }
    let (n, usec) = command_stat(c, stat)?;
    if n != calls.len() as u64 {
        return Err(format!("commandstats counted {n} {stat} calls, {} were sent", calls.len()));
    }
    Ok(usec as f64 / n as f64)
}

/// The calls of one chunk: (setup, module calls, Lua calls, SET calls).
type Plan = (Vec<Vec<String>>, Vec<Vec<String>>, Vec<Vec<String>>, Vec<Vec<String>>);

fn plan(w: &Workload, sha: &str, round: usize, n: usize) -> Plan {
    let now = now_ms();
    let (mut setup, mut module, mut lua, mut set) = (vec![], vec![], vec![], vec![]);
    for i in 0..n {
        let ctx =
            Ctx { key: format!("bench:{round}:{i}"), owner: "6b1f0c3a-0000-4000-8000-000000000001:1".into(), now };
        setup.extend((w.setup)(&ctx));
        module.push((w.module)(&ctx));
        let (keys, argv) = (w.lua)(&ctx);
        let mut e = vec!["EVALSHA".to_string(), sha.to_string(), keys.len().to_string()];
        e.extend(keys);
        e.extend(argv);
        lua.push(e);
        set.push(set_nx_px(&ctx));
    }
    (setup, module, lua, set)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let rounds = b.rounds(9);
    let n = b.size(2000, 100);
    let mut t = Table::new(&[
        "workload",
        "module usec",
        "Lua usec",
        "SET NX PX usec (no module)",
        "module / SET",
        "module / SET (same server)",
        "Lua / SET",
        "Lua / module",
    ]);
    let mut worst: Option<(f64, String)> = None;
    let mut ran = 0;
    for w in table() {
        let what = format!("part 1 {}", w.name);
        if !b.available(&what, w.command, &[w.script]) {
            t.row(vec![
                w.name.into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
            ]);
            continue;
        }
        let sha = b.sha(w.script).unwrap_or_default();
        let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
        let (mut vm, mut vl, mut vs, mut vsm) = (vec![], vec![], vec![], vec![]);
        for r in 0..rounds {
            progress!("part 1: {} round {}/{rounds}", w.name, r + 1);
            let (setup, module, lua, set) = plan(&w, &sha, r, n);
            // Alternate which side goes first, so warm-up and drift favour neither.
            let mut sides = [0, 1, 2, 3];
            if r % 2 == 1 {
                sides.reverse();
            }
            for s in sides {
                match s {
                    0 => vm.push(chunk(&mut mc, &setup, &module, w.expect, w.command)?),
                    1 => vl.push(chunk(&mut pc, &setup, &lua, w.expect, "evalsha")?),
                    2 => vs.push(chunk(&mut pc, &[], &set, Expect::Ok, "set")?),
                    _ => vsm.push(chunk(&mut mc, &[], &set, Expect::Ok, "set")?),
                }
            }
        }
        ran += 1;
        let r_ms = Summary::of(&ratios(&vm, &vs));
        if w.command != "LOCK.FORCEUNLOCK" && worst.as_ref().is_none_or(|(x, _)| r_ms.median > *x) {
            worst = Some((r_ms.median, w.name.to_string()));
        }
        t.row(vec![
            w.name.into(),
            crate::stats::num(Summary::of(&vm).median),
            crate::stats::num(Summary::of(&vl).median),
            crate::stats::num(Summary::of(&vs).median),
            format!("{}", Ratio(r_ms)),
            format!("{}", Ratio(Summary::of(&ratios(&vm, &vsm)))),
            format!("{}", Ratio(Summary::of(&ratios(&vl, &vs)))),
            format!("{}", Ratio(Summary::of(&ratios(&vl, &vm)))),
        ]);
        let anchor = match w.name {
            "acquire free" => Some("Redisson 4.1x"),
            "unlock to zero" => Some("Redisson 7.3x"),
            "read acquire" => Some("Redisson 8.8x"),
            "fair unlock (1 waiter)" => Some("Redisson 12.8x"),
            _ => None,
        };
        if let Some(a) = anchor {
            b.report.target(
                &format!("{}: Lua / SET NX PX (anchor)", w.name),
                a,
                format!("{}", Ratio(Summary::of(&ratios(&vl, &vs)))),
                None,
            );
        }
    }
    if ran == 0 {
        return Err("part 1 ran no workload".into());
    }
    if let Some((x, name)) = worst {
        b.report.target(
            "every O(1) command: module / SET NX PX (no module), worst row",
            "<= 1.5x",
            format!("{} ({name})", crate::stats::num(x)),
            Some(x <= 1.5),
        );
    }
    b.report.section(
        "1. Server cost per call",
        &format!(
            "`INFO commandstats` usec per call after `CONFIG RESETSTAT`, {n} calls per chunk on fresh keys \
             (pipelined, every reply checked), {rounds} rounds of module / Lua / SET chunks in alternating order. \
             The Lua reference (`bench/lua/`, EVALSHA, the `evalsha` line) and the `SET k v NX PX 30000` baseline \
             run on the server without the module; \"same server\" divides by SET on the module's server, where \
             the module's command filter and keyspace hooks also run inside SET. The usec columns are medians; \
             compare only the ratios."
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
