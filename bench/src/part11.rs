//! Part 11, GCRA and CL.THROTTLE (issue 30): the module's `CL.THROTTLE` against redis-cell's,
//! built from its crates.io release in the same run (`part11_cell.rs`), each on a server of its
//! own: (a) the same call sequences on both, replies compared; (b) usec per call
//! (`INFO commandstats`) in alternating chunks, `GCRA` beside them; (c) throughput
//! (`redis-benchmark`); (d) a replica and an AOF reload, where redis-cell diverges and the
//! module does not; and redis-cell loaded first, where the module leaves its command alone.

use std::path::{Path, PathBuf};

use redis::Value;

use crate::part1::chunk;
use crate::report::Table;
use crate::server::{call_s, has_command, pipeline, redis_benchmark, Res, Server};
use crate::stats::{num, ratios, Ratio, Summary};
use crate::workloads::Expect;
use crate::{part11_cell, part8, progress, strs, Bench};

/// A timed workload: setup calls, then `n` calls of one form (`{i}` numbers a fresh key), as
/// `CL.THROTTLE` arguments; GCRA takes the same ones (its period in seconds too), but has no peek.
struct Row {
    name: &'static str,
    setup: &'static [&'static str],
    call: &'static [&'static str],
    expect: Expect,
    gcra: bool,
}

#[rustfmt::skip]
const ROWS: &[Row] = &[
    Row { name: "allowed, fresh keys", setup: &[], call: &["bench:{i}", "100", "10", "60"], expect: Expect::Limited(false), gcra: true },
    Row { name: "refused, an exhausted key", setup: &["hot", "0", "1", "3600"], call: &["hot", "0", "1", "3600"], expect: Expect::Limited(true), gcra: true },
    Row { name: "peek (quantity 0), a live key", setup: &["hot", "100", "10", "60"], call: &["hot", "100", "10", "60", "0"], expect: Expect::Limited(false), gcra: false },
];

fn calls(cmd: &str, args: &[&str], n: usize, round: usize) -> Vec<Vec<String>> {
    (0..n)
        .map(|i| {
            let mut v = vec![cmd.to_string()];
            v.extend(args.iter().map(|a| a.replace("{i}", &format!("{round}:{i}"))));
            v
        })
        .collect()
}

/// The five integers of a reply, or why not.
fn five(v: &Value) -> Res<[i64; 5]> {
    match v {
        Value::Array(a) if a.len() == 5 => {
            let mut out = [0; 5];
            for (o, x) in out.iter_mut().zip(a) {
                *o = if let Value::Int(n) = x { *n } else { return Err(format!("not an integer in {v:?}")) };
            }
            Ok(out)
        }
        other => Err(format!("not five integers: {other:?}")),
    }
}

/// Call sequences (run in one `MULTI`) whose replies cannot depend on the microseconds
/// between calls, as both servers read their clocks apart (the module on Redis 7.0 in whole
/// milliseconds): every time a reply truncates lies at least 0.2 s from a whole second.
/// redis-cell's README call; 1.4 s and 10/7 s intervals with a peek and a refusal; a request
/// above the burst, then the whole burst; an interval below 1 us (redis-cell's remaining
/// saturates).
#[rustfmt::skip]
const SEQUENCES: &[&[&[&str]]] = &[
    &[&["user123", "15", "30", "60"]],
    &[&["k", "3", "5", "7"], &["k", "3", "5", "7"], &["k", "3", "5", "7"], &["k", "3", "5", "7"], &["k", "3", "5", "7"], &["k", "3", "5", "7", "0"]],
    &[&["f", "2", "7", "10"], &["f", "2", "7", "10"], &["f", "2", "7", "10"], &["f", "2", "7", "10"], &["f", "2", "7", "10", "0"]],
    &[&["big", "3", "5", "7", "5"], &["big", "3", "5", "7", "4"], &["big", "3", "5", "7", "1"]],
    &[&["fast", "10", "1500000", "1"]],
];

/// (a) Every sequence on both servers: how many replies agree exactly.
fn compare(m: &Server, cell: &Server) -> Res<(usize, usize, Vec<String>)> {
    let (mut same, mut total, mut diffs) = (0, 0, vec![]);
    for seq in SEQUENCES {
        let mut cmds = vec![strs(&["MULTI"])];
        cmds.extend(seq.iter().map(|a| calls("CL.THROTTLE", a, 1, 0).remove(0)));
        cmds.push(strs(&["EXEC"]));
        let mut replies = vec![];
        for s in [m, cell] {
            let mut c = s.conn()?;
            call_s(&mut c, &["FLUSHALL"])?;
            let out = pipeline(&mut c, &cmds)?;
            let Some(Value::Array(exec)) = out.last() else { return Err(format!("EXEC replied {out:?}")) };
            replies.push(exec.iter().map(five).collect::<Res<Vec<_>>>()?);
        }
        for ((a, b), args) in replies[0].iter().zip(&replies[1]).zip(seq.iter()) {
            total += 1;
            if a == b {
                same += 1;
            } else {
                diffs.push(format!("{}: module {a:?}, redis-cell {b:?}", args.join(" ")));
            }
        }
    }
    Ok((same, total, diffs))
}

/// (b) usec per call of each row, the module against redis-cell, and GCRA on the module.
fn per_call(b: &mut Bench, cell: Option<&Server>) -> Res<(Table, Vec<Summary>)> {
    let (rounds, n) = (b.rounds(9), b.size(2000, 100));
    let mut t =
        Table::new(&["workload", "module usec", "redis-cell usec", "module / redis-cell", "GCRA usec (module)"]);
    let mut judged = vec![];
    for row in ROWS {
        let (mut vm, mut vc, mut vg) = (vec![], vec![], vec![]);
        let mut mc = b.m.conn()?;
        let mut cc = cell.map(Server::conn).transpose()?;
        for r in 0..rounds {
            progress!("part 11: {} round {}/{rounds}", row.name, r + 1);
            let setup = if row.setup.is_empty() { vec![] } else { calls("CL.THROTTLE", row.setup, 1, r) };
            let work = calls("CL.THROTTLE", row.call, n, r);
            let gsetup = if row.setup.is_empty() { vec![] } else { calls("GCRA", row.setup, 1, r) };
            let gwork = calls("GCRA", row.call, n, r);
            let mut sides = [0, 1, 2];
            if r % 2 == 1 {
                sides.reverse();
            }
            for side in sides {
                match (side, cc.as_mut()) {
                    (0, _) => vm.push(chunk(&mut mc, &setup, &work, row.expect, "cl.throttle")?),
                    (1, Some(c)) => vc.push(chunk(c, &setup, &work, row.expect, "cl.throttle")?),
                    (2, _) if row.gcra => vg.push(chunk(&mut mc, &gsetup, &gwork, row.expect, "gcra")?),
                    _ => {}
                }
            }
        }
        let ratio = Summary::of(&ratios(&vm, &vc));
        judged.push(ratio);
        t.row(vec![
            row.name.into(),
            num(Summary::of(&vm).median),
            if vc.is_empty() { "n/a".into() } else { num(Summary::of(&vc).median) },
            format!("{}", Ratio(ratio)),
            if row.gcra { num(Summary::of(&vg).median) } else { "n/a (no peek)".into() },
        ]);
    }
    Ok((t, judged))
}

/// (c) Requests per second from `redis-benchmark`, module and redis-cell in alternating rounds.
fn throughput(b: &Bench, cell: &Server) -> Res<Summary> {
    let (rounds, n) = (b.rounds(5), b.size(200_000, 5_000));
    let args = ["CL.THROTTLE", "bench:__rand_int__", "100", "10", "60"];
    let (mut vm, mut vc) = (vec![], vec![]);
    for r in 0..rounds {
        progress!("part 11: throughput round {}/{rounds}", r + 1);
        for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
            let s = if side == 0 { &b.m } else { cell };
            call_s(&mut s.conn()?, &["FLUSHALL"])?;
            let rps = redis_benchmark(s, n, 100_000, &args)?;
            if side == 0 {
                vm.push(rps)
            } else {
                vc.push(rps)
            }
        }
    }
    Ok(Summary::of(&ratios(&vm, &vc)))
}

/// The value and absolute expiry of `key`.
fn state(c: &mut redis::Connection, key: &str) -> Res<(Option<String>, i64)> {
    let v: Option<String> = redis::cmd("GET").arg(key).query(c).map_err(|e| e.to_string())?;
    let at: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).map_err(|e| e.to_string())?;
    Ok((v, at))
}

fn shown((v, at): &(Option<String>, i64)) -> String {
    match v {
        Some(v) => format!("`{v}` PXAT {at}"),
        None => "no key".into(),
    }
}

/// (d) Three grants on a primary with the module `so` (AOF on) and a replica: the replica's
/// and the AOF's copy of the key against the primary's. One table row.
fn replica_row(b: &Bench, so: &Path, who: &str) -> Res<(Vec<String>, bool)> {
    let p = Server::start_with(&b.binary, Some(so), "p11-primary", &["--appendonly", "yes"])?;
    let port = p.port.to_string();
    let r = Server::start_with(&b.binary, Some(so), "p11-replica", &["--replicaof", "127.0.0.1", &port])?;
    let mut rc = r.conn()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while crate::server::info(&mut rc, "replication")?.get("master_link_status").is_none_or(|s| s != "up") {
        if std::time::Instant::now() > deadline {
            return Err(format!("part 11: the {who} replica did not sync"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut pc = p.conn()?;
    for _ in 0..3 {
        call_s(&mut pc, &["CL.THROTTLE", "rk", "5", "1", "60"])?;
    }
    call_s(&mut pc, &["WAIT", "1", "2000"])?;
    let primary = state(&mut pc, "rk")?;
    let replica = state(&mut rc, "rk")?;
    call_s(&mut pc, &["DEBUG", "LOADAOF"])?;
    let aof = state(&mut pc, "rk")?;
    let same = |x: &(Option<String>, i64)| {
        if *x == primary {
            "identical".to_string()
        } else {
            format!("**differs**: {}", shown(x))
        }
    };
    let ok = replica == primary && aof == primary;
    Ok((vec![who.into(), shown(&primary), same(&replica), same(&aof)], ok))
}

/// redis-cell loaded first, then the module, on one server: does the module load, and whose
/// `CL.THROTTLE` answers.
fn both_loaded(b: &Bench, cell: &Path, module: &Path) -> Res<String> {
    let module = module.to_str().ok_or("module path")?;
    let s = Server::start_with(&b.binary, Some(cell), "p11-both", &["--loadmodule", module])?;
    let mut c = s.conn()?;
    let mine: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("lockmod")
        .query(&mut c)
        .map_err(|e| e.to_string())?;
    let throttle_mine = mine.iter().any(|n| n == "cl.throttle");
    let answers = five(&call_s(&mut c, &["CL.THROTTLE", "k", "15", "30", "60"])?)?;
    Ok(format!(
        "the module loads ({} lockmod commands); `CL.THROTTLE` is {} (replied {answers:?}); `GCRA` is {}",
        mine.len(),
        if throttle_mine { "**lockmod's**" } else { "redis-cell's" },
        if has_command(&mut c, "gcra") { "lockmod's" } else { "missing" }
    ))
}

pub fn run(b: &mut Bench) -> Res<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let module: PathBuf = part8::module_path(b)?;
    let cell_so = match part11_cell::build(root) {
        Ok(p) => Some(p),
        Err(e) => {
            b.report.skip(format!(
                "part 11: redis-cell {} could not be built ({e}): module rows only",
                part11_cell::VERSION
            ));
            None
        }
    };
    let cell = cell_so.as_ref().map(|p| Server::start(&b.binary, Some(p), "redis-cell")).transpose()?;
    let mut text = format!(
        "Issue 30: the module's `CL.THROTTLE` against redis-cell {v}, built from its crates.io release in this run \
         (`bench/src/part11_cell.rs`, into `target/redis-cell/`; none of its code is in the repository), each on a \
         server of its own; `GCRA` (Redis' command, which the module provides where the server has none) on the \
         module's server beside them. ",
        v = part11_cell::VERSION
    );
    let mut tables = vec![];
    if let Some(cell) = &cell {
        let (same, total, diffs) = compare(&b.m, cell)?;
        text.push_str(&format!(
            "(a) The same {} call sequences on both (`MULTI`, so the microseconds between calls cannot move a \
             truncated second): {same} of {total} replies identical{}. ",
            SEQUENCES.len(),
            if diffs.is_empty() { String::new() } else { format!(" ({})", diffs.join("; ")) }
        ));
        b.report.target(
            "CL.THROTTLE replies = redis-cell's (same sequences)",
            "all",
            format!("{same}/{total}"),
            Some(same == total),
        );
    }
    let (t, judged) = per_call(b, cell.as_ref())?;
    tables.push(t);
    text.push_str(&format!(
        "(b) `INFO commandstats` usec per call, {} calls per chunk (pipelined, every reply checked), {} rounds in \
         alternating order. ",
        b.size(2000, 100),
        b.rounds(9)
    ));
    if cell.is_some() {
        let worst = judged.iter().map(|s| s.median).fold(f64::NAN, f64::max);
        b.report.target(
            "CL.THROTTLE: module / redis-cell usec, worst row",
            "<= 1.0x (not slower)",
            num(worst),
            Some(worst <= 1.0),
        );
    }
    if let Some(cell) = &cell {
        let tp = throughput(b, cell)?;
        text.push_str(&format!(
            "(c) `redis-benchmark -c 50 -P 16` on `CL.THROTTLE bench:__rand_int__ 100 10 60` (100,000 keys), \
             module / redis-cell requests per second: {}. ",
            Ratio(tp)
        ));
        b.report.target(
            "CL.THROTTLE throughput: module / redis-cell",
            ">= 1.0x (not slower)",
            format!("{}", Ratio(tp)),
            Some(tp.median >= 1.0),
        );
    }
    let mut rt = Table::new(&["module", "primary's key after 3 grants", "replica's", "after DEBUG LOADAOF"]);
    let (row, module_ok) = replica_row(b, &module, "lockmod")?;
    rt.row(row);
    b.report.target(
        "CL.THROTTLE: replica and AOF identical to the primary",
        "yes",
        module_ok.to_string(),
        Some(module_ok),
    );
    if let Some(so) = &cell_so {
        let (row, cell_ok) = replica_row(b, so, &format!("redis-cell {}", part11_cell::VERSION))?;
        rt.row(row);
        text.push_str(&format!(
            "(d) Replication and persistence, below: the module replicates each grant as `SET key <tat> PXAT <ms>`; \
             redis-cell {} propagates nothing (no `RM_Replicate*` call), so its replica and its AOF {} the key \
             (its GitHub releases from 0.3 replicate the command verbatim instead, which re-runs it on the replica's \
             clock: a different value). Loaded after redis-cell on one server: {}.",
            part11_cell::VERSION,
            if cell_ok { "still have" } else { "lose" },
            both_loaded(b, so, &module)?
        ));
    }
    tables.push(rt);
    b.report.section("11. GCRA and CL.THROTTLE against redis-cell", &text, tables, vec![]);
    Ok(())
}
