//! Part 9b: the expirable semaphore's acquire and `availablePermits` with H permits held and E
//! expired (not yet returned), native against Redisson's bodies. Redisson's reclaim is a
//! `ZRANGEBYSCORE {name}:timeout 0 now` (LIMIT the permits asked for, in the acquire) and a
//! `ZREM` of what it finds, in every call; the native commands return the same permits.
//!
//! Each call is measured on a state rebuilt just before it, in the same pipeline (`DEL`, `ZADD`
//! of the H held and E expired ids, `SET` of the count): a call that returns expired permits
//! changes the state, and the module's reclaim timer, armed by a native acquire at the earliest
//! lease end, returns the rest right after it. `INFO commandstats` counts only the measured
//! command, so the rebuild is not in the figure.

use redis::Value;

use crate::chart;
use crate::redisson_sync::{bulk, evalsha, load, sem_channel, timeouts, NL, P_ACQUIRE, P_AVAILABLE};
use crate::report::Table;
use crate::server::{call_s, command_stat, info, pipeline, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

const KEY: &str = "bench:psem";
/// The permits available: enough that every acquire is granted.
const BASE: i64 = 1_000_000;

#[derive(Clone, Copy, PartialEq)]
enum Cmd {
    Acquire,
    Available,
}

impl Cmd {
    fn name(self) -> &'static str {
        match self {
            Cmd::Acquire => "tryAcquire(1, lease) / PSEMAPHORE.ACQUIRE",
            Cmd::Available => "availablePermits / PSEMAPHORE.AVAILABLE",
        }
    }

    fn native(self) -> Vec<String> {
        match self {
            Cmd::Acquire => strs(&["PSEMAPHORE.ACQUIRE", KEY, "1", "3600000"]),
            Cmd::Available => strs(&["PSEMAPHORE.AVAILABLE", KEY]),
        }
    }

    fn lua(self) -> Vec<String> {
        let (now, keys) = (now_ms(), [KEY.to_string(), timeouts(KEY), sem_channel(KEY)]);
        match self {
            Cmd::Acquire => {
                let until = (now + 3_600_000).to_string();
                evalsha(P_ACQUIRE, &keys, &["1", &until, &now.to_string(), NL, "publish", "new-permit-00001"])
            }
            Cmd::Available => evalsha(P_AVAILABLE, &keys, &[&now.to_string(), "publish"]),
        }
    }

    /// The reply the call must get with `e` expired permits.
    fn ok(self, native: bool, e: usize, v: &Value) -> bool {
        let count = BASE + e as i64;
        match (self, native) {
            (Cmd::Acquire, true) => matches!(v, Value::Array(a) if a.len() == 1),
            (Cmd::Acquire, false) => bulk(v, "OK"),
            (Cmd::Available, true) => *v == Value::Int(count),
            // Redisson's body replies the new count (integer) when it returned permits, else the
            // stored value (bulk).
            (Cmd::Available, false) if e > 0 => *v == Value::Int(count),
            (Cmd::Available, false) => bulk(v, &count.to_string()),
        }
    }
}

/// The commands that rebuild the state: H held permits (leases an hour away), E expired ones.
fn state(h: usize, e: usize) -> Vec<Vec<String>> {
    let now = now_ms();
    let z = timeouts(KEY);
    let mut members: Vec<(i64, String)> = (0..h).map(|j| (now + 3_600_000 + j as i64, format!("h{j:015}"))).collect();
    members.extend((0..e).map(|j| (now - 60_000 - j as i64, format!("e{j:015}"))));
    let mut cmds = vec![strs(&["DEL", KEY, &z])];
    for part in members.chunks(1000) {
        let mut zadd = strs(&["ZADD", &z]);
        for (score, id) in part {
            zadd.push(score.to_string());
            zadd.push(id.clone());
        }
        cmds.push(zadd);
    }
    cmds.push(strs(&["SET", KEY, &BASE.to_string()]));
    cmds
}

fn reclaimed(c: &mut redis::Connection) -> Res<u64> {
    Ok(info(c, "lockmod")?.get("lockmod_permits_reclaimed").and_then(|v| v.parse().ok()).unwrap_or(0))
}

fn is_error(v: &Value) -> bool {
    matches!(v, Value::ServerError(_)) || matches!(v, Value::SimpleString(s) if s.starts_with("ERR"))
}

/// Redisson's reclaim `ZREM`s `unpack(expiredIds)`: past Lua's C stack (about 8,000 values) the
/// body fails, having written nothing.
const UNPACK: &str = "too many results to unpack";

/// One chunk of `calls` calls on one side; the measured command's usec per call, or None when
/// Redisson's body fails with `UNPACK` (the chunk stops at its first call).
fn chunk(c: &mut redis::Connection, cmd: Cmd, native: bool, h: usize, e: usize, calls: usize) -> Res<Option<f64>> {
    call_s(c, &["FLUSHALL"])?;
    let rebuild = state(h, e);
    // After RESETSTAT: it also resets the module's INFO counters.
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    let timer0 = if native { reclaimed(c)? } else { 0 };
    for _ in 0..calls {
        let mut p = rebuild.clone();
        p.push(if native { cmd.native() } else { cmd.lua() });
        let replies = pipeline(c, &p)?;
        for (args, v) in p.iter().zip(&replies).take(p.len() - 1) {
            if is_error(v) {
                return Err(format!("part 9b: {}: {v:?}", args[0]));
            }
        }
        let v = replies.last().ok_or("part 9b: no reply")?;
        if !native && is_error(v) && format!("{v:?}").contains(UNPACK) {
            return Ok(None);
        }
        if !cmd.ok(native, e, v) {
            return Err(format!("part 9b: {} H = {h} E = {e}: unexpected reply {v:?}", p[p.len() - 1].join(" ")));
        }
    }
    let stat = if native { cmd.native()[0].clone() } else { "evalsha".to_string() };
    let (n, usec) = command_stat(c, &stat)?;
    if n != calls as u64 {
        return Err(format!("part 9b: commandstats counted {n} {stat} calls, {calls} were sent"));
    }
    if native {
        // The reclaim timer must not have run between a rebuild and its call: after a native
        // acquire it returns the E - 1 expired permits the call left; after AVAILABLE, none.
        let timer = reclaimed(c)? - timer0;
        let want = if cmd == Cmd::Acquire { calls * e.saturating_sub(1) } else { 0 } as u64;
        if timer != want {
            return Err(format!(
                "part 9b: {} H = {h} E = {e}: the reclaim timer returned {timer} permits, expected {want}",
                cmd.name()
            ));
        }
    }
    Ok(Some(usec as f64 / n as f64))
}

pub fn run(b: &mut Bench) -> Res<()> {
    for cmd in ["PSEMAPHORE.ACQUIRE", "PSEMAPHORE.AVAILABLE"] {
        if !b.has(cmd) {
            b.report.skip(format!("part 9b: the module has no {cmd}"));
            return Ok(());
        }
    }
    load(b, P_ACQUIRE)?;
    load(b, P_AVAILABLE)?;
    let sizes: &[usize] = if b.quick { &[1, 100] } else { &[1, 100, 1000, 10000] };
    let expired: &[usize] = if b.quick { &[0, 100] } else { &[0, 100, 1000, 10000] };
    let rounds = b.rounds(3);
    let mut t = Table::new(&["Redisson call / native", "held", "expired", "native usec", "Lua usec", "Lua / native"]);
    let (mut charts, mut fails) = (vec![], vec![]);
    let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
    for cmd in [Cmd::Acquire, Cmd::Available] {
        let mut series: Vec<(String, Vec<(f64, f64)>)> = vec![];
        let ends = [sizes[0], sizes[sizes.len() - 1]];
        for side in ["native", "Lua"] {
            for h in ends {
                series.push((format!("{side}, {h} held"), vec![]));
            }
        }
        for &h in sizes {
            for &e in expired {
                let calls = if b.quick { 3 } else { (50_000 / (h + e)).clamp(10, 100) };
                let (mut vn, mut vl, mut failed) = (vec![], vec![], false);
                for r in 0..rounds {
                    progress!("part 9b: {} H = {h} E = {e} round {}/{rounds}", cmd.name(), r + 1);
                    for native in if r % 2 == 0 { [true, false] } else { [false, true] } {
                        if native {
                            vn.push(chunk(&mut mc, cmd, true, h, e, calls)?.ok_or("part 9b: native failed")?);
                        } else if !failed {
                            match chunk(&mut pc, cmd, false, h, e, calls)? {
                                Some(u) => vl.push(u),
                                None => failed = true,
                            }
                        }
                    }
                }
                let (n, l) = (Summary::of(&vn).median, Summary::of(&vl).median);
                t.row(vec![
                    cmd.name().into(),
                    h.to_string(),
                    e.to_string(),
                    num(n),
                    if failed { format!("error: `{UNPACK}`") } else { num(l) },
                    if failed { "n/a".into() } else { format!("{}", Ratio(Summary::of(&ratios(&vl, &vn)))) },
                ]);
                let what = format!("`{}` with {e} expired", cmd.name());
                if failed && !fails.contains(&what) {
                    fails.push(what);
                }
                if let Some(i) = ends.iter().position(|&x| x == h) {
                    series[i].1.push(((e + 1) as f64, n));
                    if !failed {
                        series[2 + i].1.push(((e + 1) as f64, l));
                    }
                }
            }
        }
        let file = match cmd {
            Cmd::Acquire => "psemaphore-acquire.svg",
            Cmd::Available => "psemaphore-available.svg",
        };
        chart::lines(
            &b.out.join("img").join(file),
            &format!("{}: usec per call", cmd.name()),
            "permits expired + 1",
            "usec per call",
            &series,
            true,
        )?;
        charts.push((file.to_string(), format!("{}: usec per call against permits expired, log axes", cmd.name())));
    }
    b.report.section(
        "9b. Redisson's synchronizers: the expirable semaphore against permits held and expired",
        &format!(
            "`RPermitExpirableSemaphore.tryAcquire(1, lease)` (Redisson's `{}`) and `availablePermits` (`{}`) \
             beside `PSEMAPHORE.ACQUIRE name 1 lease` and `PSEMAPHORE.AVAILABLE`, with H permits held (leases an \
             hour away) and E expired but not yet returned in `{{name}}:timeout`. Each call runs on a state rebuilt \
             just before it in the same pipeline (not measured: `INFO commandstats` counts only the measured \
             command); {rounds} rounds of native and Lua chunks in alternating order, medians. Both sides return \
             expired permits as Redisson does: the acquire at most the permits it asks for (here 1), \
             `availablePermits` all of them (`ZRANGEBYSCORE` + `ZREM` of the E, an `INCRBY`, a message). On the \
             module's server the reclaim timer, armed by the native acquire at the earliest lease end, returns \
             the other E - 1 right after the call (checked with `INFO lockmod`, outside the figure): in ordinary \
             use the native side never holds expired permits past their deadline, where Redisson's wait for the \
             next call that scans for them.{}",
            &P_ACQUIRE[..10],
            &P_AVAILABLE[..10],
            if fails.is_empty() {
                String::new()
            } else {
                format!(
                    " Redisson's body failed, writing nothing, for {}: its reclaim passes every expired id to one \
                     `ZREM` through Lua's `unpack`, which stops near 8,000 values (`ERR ... {UNPACK}`), so such a \
                     semaphore's `availablePermits` fails until something else returns the permits; the native \
                     commands return them.",
                    fails.join(", ")
                )
            }
        ),
        vec![t],
        charts,
    );
    Ok(())
}
