//! Part 9, Redisson's synchronizers (issue 26): the native `SEMAPHORE.*`, `PSEMAPHORE.*` and
//! `COUNTDOWN.*` commands against the Lua bodies Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` and `RCountDownLatch` send (its current release's, read from
//! `../shared/redisson-sync-scripts/`, never copied into the repository).
//!
//! (a) here: every command against the body it replaces, usec per call (`INFO commandstats`) and
//! server CPU per call (`INFO cpu`), on fresh keys, in alternating chunks; the native commands on
//! the module's server, the Lua by `EVALSHA` on the server without it (as part 1).
//! (b) `part9_scaling.rs`: the expirable semaphore's acquire and `availablePermits` against
//! the permits held and expired. (c) `part9_handoff.rs`: K contenders for one permit, `BLOCK`
//! against Redisson's subscribe-and-retry. (d) `part9_release.rs`: releasing K ids at once.
//! The driver runs the four in turn; what they share (Redisson's bodies and names) is in
//! `redisson_sync.rs`.

use redis::Value;

use crate::redisson_sync::*;
use crate::report::Table;
use crate::server::{call_s, command_stat, cpu_seconds, pipeline, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

type Build = fn(&str) -> Vec<String>;
type Setup = fn(&str) -> Vec<Vec<String>>;

/// A row: a Redisson method, the native command, and each side's call on a fresh key `k`.
struct Row {
    method: &'static str,
    command: &'static str,
    /// Documented O(1): the 2x target applies.
    o1: bool,
    setup: Setup,
    native: Build,
    native_ok: Check,
    /// The Redisson body's SHA1, or None when Redisson sends a plain `GET`.
    sha: Option<&'static str>,
    lua: Build,
    lua_ok: Check,
}

fn none(_: &str) -> Vec<Vec<String>> {
    vec![]
}
fn held(k: &str) -> Vec<Vec<String>> {
    let at = (now_ms() + 3_600_000).to_string();
    vec![strs(&["SET", k, "5"]), strs(&["ZADD", &timeouts(k), &at, ID])]
}
fn until() -> String {
    (now_ms() + 60_000).to_string()
}
fn now() -> String {
    now_ms().to_string()
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    vec![
        Row { method: "RSemaphore.trySetPermits", command: "SEMAPHORE.TRYSETPERMITS", o1: true, setup: none,
            native: |k| strs(&["SEMAPHORE.TRYSETPERMITS", k, "10"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(TRY_SET), lua: |k| evalsha(TRY_SET, &[k.into(), sem_channel(k)], &["10", "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RSemaphore.trySetPermits(ttl)", command: "SEMAPHORE.TRYSETPERMITS", o1: true, setup: none,
            native: |k| strs(&["SEMAPHORE.TRYSETPERMITS", k, "10", "LEASE", "60000"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(TRY_SET_TTL), lua: |k| evalsha(TRY_SET_TTL, &[k.into(), sem_channel(k)], &["10", "publish", "60000"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RSemaphore.tryAcquire", command: "SEMAPHORE.ACQUIRE", o1: true, setup: |k| vec![strs(&["SET", k, "10"])],
            native: |k| strs(&["SEMAPHORE.ACQUIRE", k, "1"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(TRY_ACQUIRE), lua: |k| evalsha(TRY_ACQUIRE, &[k.into()], &["1"]), lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RSemaphore.tryAcquire, none left", command: "SEMAPHORE.ACQUIRE", o1: true,
            setup: |k| vec![strs(&["SET", k, "0"])],
            native: |k| strs(&["SEMAPHORE.ACQUIRE", k, "1"]), native_ok: |v| *v == Value::Int(0),
            sha: Some(TRY_ACQUIRE), lua: |k| evalsha(TRY_ACQUIRE, &[k.into()], &["1"]), lua_ok: |v| *v == Value::Int(0) },
        Row { method: "RSemaphore.release", command: "SEMAPHORE.RELEASE", o1: true, setup: |k| vec![strs(&["SET", k, "5"])],
            native: |k| strs(&["SEMAPHORE.RELEASE", k, "1"]), native_ok: |v| *v == Value::Int(6),
            sha: Some(RELEASE), lua: |k| evalsha(RELEASE, &[k.into(), sem_channel(k)], &["1", "publish"]),
            lua_ok: |v| *v == Value::Nil },
        Row { method: "RSemaphore.addPermits", command: "SEMAPHORE.ADDPERMITS", o1: true, setup: |k| vec![strs(&["SET", k, "5"])],
            native: |k| strs(&["SEMAPHORE.ADDPERMITS", k, "2"]), native_ok: |v| *v == Value::Int(7),
            sha: Some(ADD), lua: |k| evalsha(ADD, &[k.into(), sem_channel(k)], &["2", "publish"]), lua_ok: |v| *v == Value::Nil },
        Row { method: "RSemaphore.drainPermits", command: "SEMAPHORE.DRAIN", o1: true, setup: |k| vec![strs(&["SET", k, "5"])],
            native: |k| strs(&["SEMAPHORE.DRAIN", k]), native_ok: |v| *v == Value::Int(5),
            sha: Some(DRAIN), lua: |k| evalsha(DRAIN, &[k.into()], &[]), lua_ok: |v| bulk(v, "5") },
        Row { method: "RSemaphore.availablePermits (a GET)", command: "SEMAPHORE.AVAILABLE", o1: true,
            setup: |k| vec![strs(&["SET", k, "5"])],
            native: |k| strs(&["SEMAPHORE.AVAILABLE", k]), native_ok: |v| *v == Value::Int(5),
            sha: None, lua: |k| strs(&["GET", k]), lua_ok: |v| bulk(v, "5") },
        Row { method: "RPermitExpirableSemaphore.trySetPermits", command: "PSEMAPHORE.TRYSETPERMITS", o1: true, setup: none,
            native: |k| strs(&["PSEMAPHORE.TRYSETPERMITS", k, "10"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(TRY_SET), lua: |k| evalsha(TRY_SET, &[k.into(), sem_channel(k)], &["10", "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RCountDownLatch.trySetCount", command: "COUNTDOWN.TRYSETCOUNT", o1: true, setup: none,
            native: |k| strs(&["COUNTDOWN.TRYSETCOUNT", k, "3"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(LATCH_SET), lua: |k| evalsha(LATCH_SET, &[k.into(), latch_channel(k)], &["1", "3", "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RCountDownLatch.countDown, 2 -> 1", command: "COUNTDOWN.DECR", o1: true,
            setup: |k| vec![strs(&["SET", k, "2"])],
            native: |k| strs(&["COUNTDOWN.DECR", k]), native_ok: |v| *v == Value::Int(1),
            sha: Some(LATCH_DOWN), lua: |k| evalsha(LATCH_DOWN, &[k.into(), latch_channel(k)], &["0", "publish"]),
            lua_ok: |v| *v == Value::Nil },
        Row { method: "RCountDownLatch.countDown, 1 -> 0", command: "COUNTDOWN.DECR", o1: true,
            setup: |k| vec![strs(&["SET", k, "1"])],
            native: |k| strs(&["COUNTDOWN.DECR", k]), native_ok: |v| *v == Value::Int(0),
            sha: Some(LATCH_DOWN), lua: |k| evalsha(LATCH_DOWN, &[k.into(), latch_channel(k)], &["0", "publish"]),
            lua_ok: |v| *v == Value::Nil },
        Row { method: "RCountDownLatch.getCount (a GET)", command: "COUNTDOWN.COUNT", o1: true,
            setup: |k| vec![strs(&["SET", k, "3"])],
            native: |k| strs(&["COUNTDOWN.COUNT", k]), native_ok: |v| *v == Value::Int(3),
            sha: None, lua: |k| strs(&["GET", k]), lua_ok: |v| bulk(v, "3") },
        Row { method: "RCountDownLatch.await, open (a GET)", command: "COUNTDOWN.AWAIT", o1: true, setup: none,
            native: |k| strs(&["COUNTDOWN.AWAIT", k]), native_ok: |v| *v == Value::Int(1),
            sha: None, lua: |k| strs(&["GET", k]), lua_ok: |v| *v == Value::Nil },
        Row { method: "RPermitExpirableSemaphore.tryAcquire(lease), none held", command: "PSEMAPHORE.ACQUIRE", o1: false,
            setup: |k| vec![strs(&["SET", k, "10"])],
            native: |k| strs(&["PSEMAPHORE.ACQUIRE", k, "1", "60000"]),
            native_ok: |v| matches!(v, Value::Array(a) if a.len() == 1),
            sha: Some(P_ACQUIRE),
            lua: |k| evalsha(P_ACQUIRE, &[k.into(), timeouts(k), sem_channel(k)], &["1", &until(), &now(), NL, "publish", ID]),
            lua_ok: |v| bulk(v, "OK") || *v == Value::SimpleString("OK".into()) },
        Row { method: "RPermitExpirableSemaphore.release(id), 1 held", command: "PSEMAPHORE.RELEASE", o1: false, setup: held,
            native: |k| strs(&["PSEMAPHORE.RELEASE", k, &hex(ID)]), native_ok: |v| *v == Value::Int(1),
            sha: Some(P_RELEASE), lua: |k| evalsha(P_RELEASE, &[k.into(), sem_channel(k), timeouts(k)], &[ID, "1", &now(), "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RPermitExpirableSemaphore.updateLeaseTime, 1 held", command: "PSEMAPHORE.UPDATELEASE", o1: false, setup: held,
            native: |k| strs(&["PSEMAPHORE.UPDATELEASE", k, &hex(ID), "60000"]), native_ok: |v| *v == Value::Int(1),
            sha: Some(P_UPDATE), lua: |k| evalsha(P_UPDATE, &[k.into(), timeouts(k), sem_channel(k)], &[ID, &until(), &now(), "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RPermitExpirableSemaphore.availablePermits, 1 held", command: "PSEMAPHORE.AVAILABLE", o1: false, setup: held,
            native: |k| strs(&["PSEMAPHORE.AVAILABLE", k]), native_ok: |v| *v == Value::Int(5),
            sha: Some(P_AVAILABLE), lua: |k| evalsha(P_AVAILABLE, &[k.into(), timeouts(k), sem_channel(k)], &[&now(), "publish"]),
            lua_ok: |v| bulk(v, "5") },
        Row { method: "RPermitExpirableSemaphore.acquiredPermits, 1 held", command: "PSEMAPHORE.ACQUIRED", o1: false, setup: held,
            native: |k| strs(&["PSEMAPHORE.ACQUIRED", k]), native_ok: |v| *v == Value::Int(1),
            sha: Some(P_ACQUIRED), lua: |k| evalsha(P_ACQUIRED, &[k.into(), timeouts(k), sem_channel(k)], &[&now(), "publish"]),
            lua_ok: |v| *v == Value::Int(1) },
        Row { method: "RPermitExpirableSemaphore.setPermits, 1 held", command: "PSEMAPHORE.SETPERMITS", o1: false, setup: held,
            native: |k| strs(&["PSEMAPHORE.SETPERMITS", k, "10"]), native_ok: |v| *v == Value::Okay || bulk(v, "OK"),
            sha: Some(P_SET), lua: |k| evalsha(P_SET, &[k.into(), sem_channel(k), timeouts(k)], &["10", "publish"]),
            lua_ok: |v| *v == Value::Nil },
    ]
}

/// Flushes, runs `setup`, then `calls` (pipelined, every reply checked); returns the `stat`
/// command's usec per call (`INFO commandstats`) and the server's CPU usec per call (`INFO cpu`).
pub fn chunk(
    c: &mut redis::Connection,
    setup: &[Vec<String>],
    calls: &[Vec<String>],
    ok: Check,
    stat: &str,
) -> Res<(f64, f64)> {
    call_s(c, &["FLUSHALL"])?;
    for s in setup.chunks(3000) {
        pipeline(c, s)?;
    }
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    let cpu0 = cpu_seconds(c)?;
    for part in calls.chunks(1000) {
        for (args, v) in part.iter().zip(pipeline(c, part)?) {
            if !ok(&v) {
                return Err(format!("part 9: {}: unexpected reply {v:?}", args.join(" ")));
            }
        }
    }
    let cpu = cpu_seconds(c)? - cpu0;
    let (n, usec) = command_stat(c, stat)?;
    if n != calls.len() as u64 {
        return Err(format!("part 9: commandstats counted {n} {stat} calls, {} were sent", calls.len()));
    }
    Ok((usec as f64 / n as f64, cpu * 1e6 / n as f64))
}

/// (a): every command beside the body it replaces.
fn per_call(b: &mut Bench) -> Res<Table> {
    let rounds = b.rounds(7);
    let n = b.size(2000, 100);
    let mut t = Table::new(&[
        "Redisson call",
        "native command",
        "native usec",
        "Lua usec",
        "Lua / native (usec)",
        "native CPU usec",
        "Lua CPU usec",
        "Lua / native (CPU)",
    ]);
    for row in rows() {
        if !b.has(row.command) {
            b.report.skip(format!("part 9 {}: the module has no {}", row.method, row.command));
            continue;
        }
        if let Some(sha) = row.sha {
            load(b, sha)?;
        }
        let stat = if row.sha.is_some() { "evalsha" } else { "get" };
        let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
        let (mut nu, mut lu, mut nc, mut lc) = (vec![], vec![], vec![], vec![]);
        for r in 0..rounds {
            progress!("part 9: {} round {}/{rounds}", row.method, r + 1);
            let keys: Vec<String> = (0..n).map(|i| format!("bench:sync:{r}:{i}")).collect();
            let setup: Vec<Vec<String>> = keys.iter().flat_map(|k| (row.setup)(k)).collect();
            let native: Vec<Vec<String>> = keys.iter().map(|k| (row.native)(k)).collect();
            let lua: Vec<Vec<String>> = keys.iter().map(|k| (row.lua)(k)).collect();
            for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                if side == 0 {
                    let (u, c) = chunk(&mut mc, &setup, &native, row.native_ok, row.command)?;
                    nu.push(u);
                    nc.push(c);
                } else {
                    let (u, c) = chunk(&mut pc, &setup, &lua, row.lua_ok, stat)?;
                    lu.push(u);
                    lc.push(c);
                }
            }
        }
        let ru = Summary::of(&ratios(&lu, &nu));
        let name = match row.sha {
            Some(sha) => format!("{} (`{}`)", row.method, &sha[..10]),
            None => row.method.to_string(),
        };
        t.row(vec![
            name,
            format!("`{}`{}", row.command, if row.o1 { "" } else { " (O(log N))" }),
            num(Summary::of(&nu).median),
            num(Summary::of(&lu).median),
            format!("{}", Ratio(ru)),
            num(Summary::of(&nc).median),
            num(Summary::of(&lc).median),
            format!("{}", Ratio(Summary::of(&ratios(&lc, &nc)))),
        ]);
        if row.o1 && row.sha.is_some() {
            b.report.target(
                &format!("{} (`{}`): Redisson's Lua / native, usec per call", row.method, row.command),
                ">= 2x",
                format!("{}", Ratio(ru)),
                Some(ru.median >= 2.0),
            );
        }
    }
    Ok(t)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let (rounds, n) = (b.rounds(7), b.size(2000, 100));
    let a = per_call(b)?;
    b.report.section(
        "9a. Redisson's synchronizers: per call",
        &format!(
            "Issue 26: the native `SEMAPHORE.*`, `PSEMAPHORE.*` and `COUNTDOWN.*` commands against the Lua bodies \
             Redisson's `RSemaphore`, `RPermitExpirableSemaphore` and `RCountDownLatch` send (its current \
             release's, read from `shared/redisson-sync-scripts/`, SHA1 prefix in brackets; \
             `docs/redisson-sync-scripts.md` says which method sends which body). The Lua runs by `EVALSHA` with \
             Redisson's KEYS and ARGV on the server without the module, the native commands on the module's \
             server (as part 1). {n} calls per chunk on fresh keys (pipelined, every reply checked), {rounds} \
             rounds of native and Lua chunks in alternating order. usec: `INFO commandstats` of the command (the \
             `evalsha` line, or `get` where Redisson sends a plain `GET`: no Lua to replace, no target); CPU: the \
             server's `INFO cpu` user+sys over the chunk's calls, per call (reading, parsing and answering \
             included). The usec columns are medians; the ratios are the median of per-round ratios, min-max in \
             brackets. Rows marked O(log N) are the expirable semaphore's with one permit held (nothing to \
             reclaim), outside the issue's 2x target, which covers the O(1) commands that replace a Lua body; \
             9b has them against the permits held and expired."
        ),
        vec![a],
        vec![],
    );
    Ok(())
}
