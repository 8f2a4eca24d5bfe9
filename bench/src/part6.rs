//! Part 6, an existing Redisson application: Redisson's own scripts (its current release's
//! bodies, read from `../shared/redisson-scripts/`), sent by `EVALSHA` with Redisson's KEYS
//! and ARGV to the module's server with `lockmod.redisson-scripts native` and with `off`.
//!
//! The measure is the server's CPU time per call (`INFO cpu`, user + system) over a pipelined
//! chunk: unlike `INFO commandstats` it includes the command filter (recognising the script,
//! mapping its arguments, the ACL checks) as well as the command, or the Lua.

use crate::names::*;
use crate::report::Table;
use crate::server::{call_s, cpu_seconds, info, pipeline, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

use redis::Value;

const LEASE: &str = "30000";
const WAIT: &str = "5000";
const LONG: &str = "3600000";
const ME: &str = "6b1f0c3a-0000-4000-8000-000000000001:1";
const OTHER: &str = "3f1c2d4e-0000-4000-8000-000000000002:7";

/// What a reply must be.
type Check = fn(&Value) -> bool;

fn nil(v: &Value) -> bool {
    matches!(v, Value::Nil)
}
fn one(v: &Value) -> bool {
    matches!(v, Value::Int(1))
}
fn one_in_array(v: &Value) -> bool {
    matches!(v, Value::Array(a) if matches!(a.as_slice(), [Value::Int(1)]))
}
fn wait(v: &Value) -> bool {
    matches!(v, Value::Int(ms) if *ms > 0)
}
fn bulk_95(v: &Value) -> bool {
    matches!(v, Value::BulkString(b) if b == b"95")
}
fn granted(v: &Value) -> bool {
    matches!(v, Value::Array(a) if matches!(a.as_slice(), [Value::Int(-1), Value::Int(t)] if *t > 0))
}

/// One call: its setup, the EVALSHA (KEYS, ARGV), the reply it must get.
struct Call {
    setup: Vec<Vec<String>>,
    keys: Vec<String>,
    argv: Vec<String>,
}

type Build = fn(&str, usize) -> Call;

/// A row: a Redisson method, the body it sends (SHA1 prefix), how to call it.
struct Row {
    name: &'static str,
    sha: &'static str,
    build: Build,
    check: Check,
}

fn held(key: &str, owner: &str) -> Vec<Vec<String>> {
    vec![strs(&["HSET", key, owner, "1"]), strs(&["PEXPIRE", key, LEASE])]
}

fn call(setup: Vec<Vec<String>>, keys: &[String], argv: &[&str]) -> Call {
    Call { setup, keys: keys.to_vec(), argv: strs(argv) }
}

fn s(x: &str) -> String {
    x.to_string()
}

/// A rate limiter as Redisson 3.38+ leaves it: `rate` per second (overall, no keep-alive),
/// `value` available, and `live` grants of 1 permit in the window (none expired).
fn limiter(k: &str, rate: &str, value: &str, live: usize) -> Vec<Vec<String>> {
    let now = now_ms();
    let mut v = vec![
        strs(&["HSET", k, "rate", rate, "interval", "1000", "type", "0", "keepAliveTime", "0"]),
        strs(&["SET", &suffix(k, "value"), value]),
    ];
    for j in 0..live {
        v.push(strs(&["ZADD", &suffix(k, "permits"), &(now - 100 - j as i64).to_string(), &member(j)]));
    }
    v
}

/// A grant member (`struct.pack('Bc0I', 16, random, 1)`) of 16 random bytes drawn from `i`.
fn member(i: usize) -> String {
    format!("\u{10}s{i:015x}\u{1}\u{0}\u{0}\u{0}")
}

/// `RRateLimiter`'s five keys (client id as a Redisson instance's).
fn limiter_keys(k: &str) -> Vec<String> {
    let (v, p) = (suffix(k, "value"), suffix(k, "permits"));
    vec![s(k), v.clone(), format!("{v}:{ME}"), p.clone(), format!("{p}:{ME}")]
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    vec![
        Row { name: "RLock.tryLock, free", sha: "149c5a8bf18676fd99e9e6e24923bd64d9b62f94", check: nil,
            build: |k, _| call(vec![], &[s(k)], &[LEASE, ME]) },
        Row { name: "RLock.unlock, last hold", sha: "6866459238a13a701d42f4971f12d9f3a50e2442", check: one,
            build: |k, i| call(held(k, ME), &[s(k), lock_channel(k), latch(k, &format!("req-{i}"))], &["0", LEASE, ME, "PUBLISH", "13500"]) },
        Row { name: "RLock watchdog renewal (LockTask)", sha: "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", check: one_in_array,
            build: |k, _| call(held(k, ME), &[s(k)], &[LEASE, ME]) },
        Row { name: "RLock.forceUnlock", sha: "605e338249a7a1d40df83b04f7658354f883b41b", check: one,
            build: |k, _| call(held(k, ME), &[s(k), lock_channel(k)], &["0", "PUBLISH"]) },
        Row { name: "RFencedLock.tryLockAndGetToken", sha: "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", check: granted,
            build: |k, _| call(vec![], &[s(k), token(k)], &[LEASE, ME]) },
        Row { name: "readLock().tryLock, free", sha: "95553a6ff11176c18e71344e89d116b06fd6f753", check: nil,
            build: |k, _| call(vec![], &[s(k), read_timeout_prefix(k, ME)], &[LEASE, ME, &format!("{ME}:write")]) },
        Row { name: "writeLock().tryLock, free", sha: "6306ba3bf1f563b284bed52d305fce615c6664d9", check: nil,
            build: |k, _| call(vec![], &[s(k)], &[LEASE, &format!("{ME}:write")]) },
        Row { name: "readLock().unlock, last hold", sha: "6e1b10e11ac0a3ed8e902562ecd32ce01b553039", check: one,
            build: |k, i| call(
                vec![strs(&["HSET", k, "mode", "read", ME, "1"]), strs(&["PEXPIRE", k, LEASE]),
                     strs(&["SET", &format!("{}:1", read_timeout_prefix(k, ME)), "1", "PX", LEASE])],
                &[s(k), rwlock_channel(k), read_timeout_prefix(k, ME), key_prefix(k), latch(k, &format!("req-{i}"))],
                &["0", ME, "PUBLISH", "13500"]) },
        Row { name: "writeLock().unlock, last hold", sha: "21f5fb0f8ddfa9be5c3e0c9757c128796add75c6", check: one,
            build: |k, i| call(
                vec![strs(&["HSET", k, "mode", "write", &format!("{ME}:write"), "1"]), strs(&["PEXPIRE", k, LEASE])],
                &[s(k), rwlock_channel(k), latch(k, &format!("req-{i}"))],
                &["1", LEASE, &format!("{ME}:write"), "PUBLISH", "13500"]) },
        Row { name: "writeLock() watchdog renewal (LockTask)", sha: "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", check: one_in_array,
            build: |k, _| call(
                vec![strs(&["HSET", k, "mode", "write", &format!("{ME}:write"), "1"]), strs(&["PEXPIRE", k, LEASE])],
                &[s(k)], &[LEASE, &format!("{ME}:write")]) },
        Row { name: "read lock watchdog renewal (ReadLockTask)", sha: "38d2b478dfbe264ab67c221b7e4be62245f00ba0", check: one_in_array,
            build: |k, _| call(
                vec![strs(&["HSET", k, "mode", "read", ME, "1"]), strs(&["PEXPIRE", k, LEASE]),
                     strs(&["SET", &format!("{}:1", read_timeout_prefix(k, ME)), "1", "PX", LEASE])],
                &[s(k), key_prefix(k)], &[LEASE, "1", ME]) },
        Row { name: "FairLock.tryLock(wait), free", sha: "8f6ed299ffd259f0539c20f89253998c0777ea75", check: nil,
            build: |k, _| call(vec![], &[s(k), fair_queue(k), fair_timeouts(k)], &[LEASE, ME, WAIT, &now_ms().to_string()]) },
        Row { name: "FairLock.unlock, 1 waiter", sha: "367f80bd2e300e411fb0936d9b601e5bcb3fd4b6", check: one,
            build: |k, i| call(
                [held(k, ME), vec![strs(&["RPUSH", &fair_queue(k), OTHER]),
                    strs(&["ZADD", &fair_timeouts(k), &(now_ms() + 60_000).to_string(), OTHER])]].concat(),
                &[s(k), fair_queue(k), fair_timeouts(k), lock_channel(k), latch(k, &format!("req-{i}"))],
                &["0", LEASE, ME, &now_ms().to_string(), "PUBLISH", "13500"]) },
        Row { name: "RRateLimiter.tryAcquire, granted", sha: "861d9229367b5aa9889ee26c5c31be7baeba2153", check: nil,
            build: |k, i| call(limiter(k, "100", "95", 5), &limiter_keys(k), &["1", &now_ms().to_string(), &format!("{i:016x}")]) },
        Row { name: "RRateLimiter.tryAcquire, refused", sha: "861d9229367b5aa9889ee26c5c31be7baeba2153", check: wait,
            build: |k, i| call(limiter(k, "5", "0", 5), &limiter_keys(k), &["1", &now_ms().to_string(), &format!("{i:016x}")]) },
        Row { name: "RRateLimiter.availablePermits", sha: "1378f96e73a4251ef63dadab589a062f8276a044", check: bulk_95,
            build: |k, _| call(limiter(k, "100", "95", 5), &limiter_keys(k), &[&now_ms().to_string()]) },
        Row { name: "RRateLimiter.release", sha: "fbec405e63ce6ca39accbc290ded190da3cad1cf", check: nil,
            build: |k, _| call(limiter(k, "100", "95", 5), &limiter_keys(k), &["1"]) },
        Row { name: "FairLock acquireFailed (cancel)", sha: "d1ddef65ad80886b5d36e023c99930044ddd653a", check: nil,
            build: |k, _| call(
                vec![strs(&["RPUSH", &fair_queue(k), ME]), strs(&["ZADD", &fair_timeouts(k), &(now_ms() + 60_000).to_string(), ME])],
                &[fair_queue(k), fair_timeouts(k)], &[ME, WAIT]) },
    ]
}

/// Redisson's script bodies: the locks' (`$LOCKMOD_REDISSON_SCRIPTS`, or `shared/` beside the
/// repository), else the rate limiter's (`crate::redisson_rate::body`).
fn body(sha: &str) -> Res<String> {
    let dir = std::env::var("LOCKMOD_REDISSON_SCRIPTS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/redisson-scripts"));
    let path = dir.join("scripts").join(format!("{sha}.lua"));
    std::fs::read_to_string(&path).or_else(|_| crate::redisson_rate::body(sha))
}

fn evalsha(sha: &str, keys: &[String], argv: &[String]) -> Vec<String> {
    let mut e = vec![s("EVALSHA"), s(sha), keys.len().to_string()];
    e.extend(keys.iter().cloned());
    e.extend(argv.iter().cloned());
    e
}

fn native_total(c: &mut redis::Connection) -> Res<u64> {
    Ok(info(c, "lockmod")?.get("lockmod_redisson_native_total").and_then(|v| v.parse().ok()).unwrap_or(0))
}

/// `INFO commandstats` usec of the commands that ran: `evalsha`, or the module's.
fn command_usec(c: &mut redis::Connection, mode: &str) -> Res<u64> {
    let stats = info(c, "commandstats")?;
    let usec = |v: &String| v.split(',').find_map(|p| p.strip_prefix("usec=")).and_then(|u| u.parse::<u64>().ok());
    Ok(stats
        .iter()
        .filter(|(k, _)| {
            if mode == "off" {
                k.as_str() == "cmdstat_evalsha"
            } else {
                k.contains("lock.") || k.contains("ratelimiter.")
            }
        })
        .filter_map(|(_, v)| usec(v))
        .sum())
}

/// One chunk with the setting `mode`: setup, then `calls` (each reply checked); the server's
/// CPU usec per call over the calls alone, the commands' own usec per call, and the share of
/// the calls that ran natively. With `native`, every call must have run natively: a call of
/// ordinary use left to Lua fails the benchmark.
fn chunk(
    c: &mut redis::Connection,
    mode: &str,
    setup: &[Vec<String>],
    calls: &[Vec<String>],
    check: Check,
) -> Res<(f64, f64, f64)> {
    call_s(c, &["CONFIG", "SET", "lockmod.redisson-scripts", mode])?;
    call_s(c, &["FLUSHALL"])?;
    for b in setup.chunks(3000) {
        pipeline(c, b)?;
    }
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    let before = native_total(c)?;
    let t0 = cpu_seconds(c)?;
    for b in calls.chunks(1000) {
        for (args, v) in b.iter().zip(pipeline(c, b)?) {
            if !check(&v) {
                return Err(format!("{mode}: {}: unexpected reply {v:?}", args[..4].join(" ")));
            }
        }
    }
    let t1 = cpu_seconds(c)?;
    let ran = native_total(c)? - before;
    let want = if mode == "native" { calls.len() as u64 } else { 0 };
    if ran != want {
        return Err(format!("{mode}: {ran} of {} calls ran natively, expected {want}", calls.len()));
    }
    let n = calls.len() as f64;
    Ok(((t1 - t0) * 1e6 / n, command_usec(c, mode)? as f64 / n, ran as f64 / n))
}

/// Alternating `off`/`native` chunks; the row's cells.
fn measure(
    b: &Bench,
    name: &str,
    rounds: usize,
    plan: &dyn Fn(usize) -> (Vec<Vec<String>>, Vec<Vec<String>>),
    check: Check,
) -> Res<Vec<String>> {
    let mut c = b.m.conn()?;
    let (mut off, mut nat, mut off_cmd, mut nat_cmd) = (vec![], vec![], vec![], vec![]);
    let (mut ran, mut sent) = (0.0, 0.0);
    for r in 0..rounds {
        progress!("part 6: {name} round {}/{rounds}", r + 1);
        let (setup, calls) = plan(r);
        let order: [&str; 2] = if r % 2 == 0 { ["off", "native"] } else { ["native", "off"] };
        for mode in order {
            let (cpu, cmd, share) = chunk(&mut c, mode, &setup, &calls, check)?;
            if mode == "off" {
                off.push(cpu);
                off_cmd.push(cmd);
            } else {
                nat.push(cpu);
                nat_cmd.push(cmd);
                ran += share * calls.len() as f64;
                sent += calls.len() as f64;
            }
        }
    }
    call_s(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "off"])?;
    Ok(vec![
        name.into(),
        num(Summary::of(&off).median),
        num(Summary::of(&nat).median),
        format!("{}", Ratio(Summary::of(&ratios(&off, &nat)))),
        num(Summary::of(&off_cmd).median),
        num(Summary::of(&nat_cmd).median),
        format!("{}", Ratio(Summary::of(&ratios(&off_cmd, &nat_cmd)))),
        format!("{:.1}%", 100.0 * ran / sent.max(1.0)),
    ])
}

pub fn run(b: &mut Bench) -> Res<()> {
    let rounds = b.rounds(7);
    let n = b.size(2000, 100);
    let mut t = Table::new(&[
        "Redisson call (its EVALSHA)",
        "off: CPU usec/call",
        "native: CPU usec/call",
        "off / native (CPU)",
        "off: EVALSHA usec",
        "native: command usec",
        "off / native (command)",
        "native: ran natively",
    ]);
    {
        let mut c = b.m.conn()?;
        for r in rows().iter().map(|r| r.sha).chain(["95553a6ff11176c18e71344e89d116b06fd6f753"]) {
            let sha: String =
                redis::cmd("SCRIPT").arg("LOAD").arg(body(r)?).query(&mut c).map_err(|e| e.to_string())?;
            if sha != r {
                return Err(format!("Redisson body {r} loaded as {sha}"));
            }
        }
    }
    for row in rows() {
        let plan = |round: usize| {
            let (mut setup, mut calls) = (vec![], vec![]);
            for i in 0..n {
                let key = format!("bench:r{round}:{i}");
                let c = (row.build)(&key, i);
                setup.extend(c.setup);
                calls.push(evalsha(row.sha, &c.keys, &c.argv));
            }
            (setup, calls)
        };
        t.row(measure(b, row.name, rounds, &plan, row.check)?);
    }
    // Work that grows with the lock: read unlock + re-lock among 1,000 readers, and a fair
    // grant that moves 1,000 waiters' deadlines.
    let cycles = b.size(200, 10);
    let readers = |_: usize| {
        let key = "bench:readers";
        let mut setup = vec![strs(&["HSET", key, "mode", "read"])];
        for i in 0..1000 {
            let owner = if i == 0 { ME.to_string() } else { format!("{OTHER}{i}") };
            setup.push(strs(&["HSET", key, &owner, "1"]));
            setup.push(strs(&["SET", &format!("{}:1", read_timeout_prefix(key, &owner)), "1", "PX", LONG]));
        }
        setup.push(strs(&["PEXPIRE", key, LONG]));
        let unlock = "6e1b10e11ac0a3ed8e902562ecd32ce01b553039";
        let lock = "95553a6ff11176c18e71344e89d116b06fd6f753";
        let mut calls = vec![];
        for i in 0..cycles {
            let ukeys = [
                s(key),
                rwlock_channel(key),
                read_timeout_prefix(key, ME),
                key_prefix(key),
                latch(key, &format!("r{i}")),
            ];
            calls.push(evalsha(unlock, &ukeys, &strs(&["0", ME, "PUBLISH", "13500"])));
            calls.push(evalsha(
                lock,
                &[s(key), read_timeout_prefix(key, ME)],
                &strs(&[LONG, ME, &format!("{ME}:write")]),
            ));
        }
        (setup, calls)
    };
    let unlock_or_relock: Check = |v| matches!(v, Value::Int(0) | Value::Nil);
    t.row(measure(b, "readLock().unlock + tryLock, 1,000 readers (per call)", rounds, &readers, unlock_or_relock)?);
    let locks = b.size(20, 2);
    let grants = |round: usize| {
        let now = now_ms();
        let (mut setup, mut calls) = (vec![], vec![]);
        for l in 0..locks {
            let key = format!("bench:fair{round}:{l}");
            for i in 0..1000 {
                let w = if i == 0 { ME.to_string() } else { format!("{OTHER}{i}") };
                setup.push(strs(&["RPUSH", &fair_queue(&key), &w]));
                setup.push(strs(&["ZADD", &fair_timeouts(&key), &(now + 60_000 + 5 * i).to_string(), &w]));
            }
            calls.push(evalsha(
                "8f6ed299ffd259f0539c20f89253998c0777ea75",
                &[key.clone(), fair_queue(&key), fair_timeouts(&key)],
                &strs(&[LEASE, ME, WAIT, &now.to_string()]),
            ));
        }
        (setup, calls)
    };
    t.row(measure(b, "FairLock.tryLock: grant to the head of 1,000 waiters", rounds, &grants, nil)?);
    b.report.section(
        "6. An existing Redisson application (`lockmod.redisson-scripts`)",
        &format!(
            "Redisson's own current scripts (the bodies of its latest release, from `shared/redisson-scripts/`), \
             sent by `EVALSHA` with Redisson's KEYS and ARGV to the module's server, in alternating chunks with \
             `lockmod.redisson-scripts off` (Redis runs the Lua) and `native` (the command filter runs the module's \
             command). {n} calls per chunk on fresh keys, pipelined, every reply checked, and every `native` call \
             checked to have run natively (`INFO lockmod`); {rounds} rounds. The figure is the server's CPU time per \
             call (`INFO cpu`), which includes reading and answering the call and the filter's work \
             (recognising the script by SHA1, checking and mapping its arguments, and on Redis 7.2+ the ACL \
             checks) as well as the command; the last three columns are `INFO commandstats` usec of the command \
             alone (`evalsha`, or the module's command), without the filter. The last column is the share of the \
             `native` chunks' calls that ran natively (`INFO lockmod`); a call left to Lua fails the run. The \
             write lock's watchdog renewal is the reentrant lock's `LockTask` body, sent for `owner:write`. \
             The `RRateLimiter` rows (3.38+'s bodies, from `shared/redisson-ratelimiter-scripts/`) run on a \
             limiter of 100 per second (5 per second for the refusal) holding 5 live grants, with ARGV's time \
             the client's clock and 16 fresh random bytes per grant, as Redisson sends them. \
             The 1,000-reader row \
             alternates unlock and re-lock of one reader ({cycles} of each per chunk); the fair row grants {locks} \
             locks per chunk, each to the head of a 1,000-waiter queue."
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
