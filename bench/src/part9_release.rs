//! Part 9d: releasing K permits at once (issue 29). `PSEMAPHORE.RELEASE name id...` and
//! Redisson's `tryRelease(ids)` body (3.41+, all or nothing) run natively, on the module's
//! server, against the same body as Lua on the server without it, for K = 1k, 32k and 64k ids:
//! usec per id (`INFO commandstats`). Each looks every id up once, so the time per id stays
//! flat; before issue 29 each lookup scanned every argument of the command (64k ids: seconds).
//! Redis' Lua cannot `unpack` more than about 8,000 values, so the Lua body fails past that,
//! as it does for a Redisson client releasing that many ids: the table says so.

use redis::Value;

use crate::redisson_sync::{body, evalsha, hex, sem_channel, timeouts};
use crate::report::Table;
use crate::server::{call, call_s, command_stat, pipeline, Res};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::strs;
use crate::{progress, Bench};

/// `tryRelease(ids)` from Redisson 3.41 (all or nothing).
const RELEASE_IDS: &str = "cf3ab77b1c0ae1226ae0e06e5cb18ee75f56c96b";
const KEY: &str = "bench:psem:release";

/// K ids of 16 ASCII bytes (as Redisson's raw ids, printable so they travel as strings).
fn ids(k: usize) -> Vec<String> {
    (0..k).map(|i| format!("permit-{i:09}")).collect()
}

/// The state before a release: no permit available, the K ids leased for an hour.
fn setup(c: &mut redis::Connection, ids: &[String]) -> Res<()> {
    call_s(c, &["DEL", KEY, &timeouts(KEY)])?;
    call_s(c, &["SET", KEY, "0"])?;
    let until = (now_ms() + 3_600_000).to_string();
    for part in ids.chunks(4096) {
        let mut zadd = strs(&["ZADD", &timeouts(KEY)]);
        for id in part {
            zadd.push(until.clone());
            zadd.push(id.clone());
        }
        pipeline(c, &[zadd])?;
    }
    Ok(())
}

/// One release of `ids` by `cmd` (counted under `stat`): usec per id, or the error it got.
fn once(c: &mut redis::Connection, ids: &[String], cmd: &[String], stat: &str) -> Res<Result<f64, String>> {
    setup(c, ids)?;
    call_s(c, &["CONFIG", "RESETSTAT"])?;
    match call(c, cmd) {
        Ok(Value::Int(n)) if n == ids.len() as i64 => {}
        Ok(v) => return Err(format!("part 9d: {stat} of {} ids replied {v:?}", ids.len())),
        Err(e) => return Ok(Err(e)),
    }
    let (n, usec) = command_stat(c, stat)?;
    if n != 1 {
        return Err(format!("part 9d: commandstats counted {n} {stat} calls, 1 was sent"));
    }
    Ok(Ok(usec as f64 / ids.len() as f64))
}

/// The server's words in a client error (which quotes the whole command before them).
fn lua_error(e: &str) -> String {
    let tail = e.rsplit(" - ").next().unwrap_or(e);
    let words = tail.split_once(": ").map_or(tail, |(_, w)| w);
    words.split(" script:").next().unwrap_or(words).trim().to_string()
}

pub fn run(b: &mut Bench) -> Res<()> {
    if !b.has("PSEMAPHORE.RELEASE") {
        b.report.skip("part 9d: the module has no PSEMAPHORE.RELEASE".to_string());
        return Ok(());
    }
    let rounds = b.rounds(5);
    let sizes: &[usize] = if b.quick { &[1_000, 8_000] } else { &[1_000, 32_000, 65_536] };
    let (text, sha) = (body(RELEASE_IDS)?, RELEASE_IDS);
    let (mut mc, mut pc) = (b.m.conn()?, b.p.conn()?);
    for c in [&mut mc, &mut pc] {
        let got: String = redis::cmd("SCRIPT").arg("LOAD").arg(&text).query(c).map_err(|e| e.to_string())?;
        if got != sha {
            return Err(format!("part 9d: the body loaded as {got}, not {sha}"));
        }
    }
    let mode = |c: &mut redis::Connection, m: &str| call_s(c, &["CONFIG", "SET", "lockmod.redisson-scripts", m]);
    let mut t = Table::new(&[
        "ids",
        "`PSEMAPHORE.RELEASE` usec per id",
        "`tryRelease(ids)` native usec per id",
        "`tryRelease(ids)` Lua usec per id",
        "Lua / native (body)",
    ]);
    let mut per_id = Vec::new();
    for &k in sizes {
        let ids = ids(k);
        let mut command = strs(&["PSEMAPHORE.RELEASE", KEY]);
        command.extend(ids.iter().map(|i| hex(i)));
        let keys = [KEY.to_string(), sem_channel(KEY), timeouts(KEY)];
        let (k_s, now) = (k.to_string(), now_ms().to_string());
        let mut script_args = vec![k_s.as_str(), now.as_str(), "publish"];
        script_args.extend(ids.iter().map(String::as_str));
        let script = evalsha(sha, &keys, &script_args);
        let (mut cmd_us, mut native_us, mut lua_us, mut lua_err) = (vec![], vec![], vec![], None);
        for r in 0..rounds {
            progress!("part 9d: {k} ids, round {}/{rounds}", r + 1);
            cmd_us.push(once(&mut mc, &ids, &command, "psemaphore.release")?.map_err(|e| format!("part 9d: {e}"))?);
            mode(&mut mc, "native")?;
            // Run natively, the call is counted under the command it was rewritten to.
            let native = once(&mut mc, &ids, &script, "psemaphore.release");
            mode(&mut mc, "off")?;
            native_us.push(native?.map_err(|e| format!("part 9d: native tryRelease(ids): {e}"))?);
            match once(&mut pc, &ids, &script, "evalsha")? {
                Ok(us) => lua_us.push(us),
                Err(e) => lua_err = Some(e),
            }
        }
        let (cmd, native) = (Summary::of(&cmd_us).median, Summary::of(&native_us).median);
        per_id.push((k, cmd));
        let (lua, ratio) = match &lua_err {
            Some(e) => (format!("fails: `{}`", lua_error(e)), "-".to_string()),
            None => (num(Summary::of(&lua_us).median), format!("{}", Ratio(Summary::of(&ratios(&lua_us, &native_us))))),
        };
        t.row(vec![k.to_string(), num(cmd), num(native), lua, ratio]);
    }
    if let (Some(&(k0, first)), Some(&(k1, last))) = (per_id.first(), per_id.last()) {
        b.report.target(
            &format!("`PSEMAPHORE.RELEASE`: usec per id at {k1} ids / at {k0}"),
            "flat (<= 2x)",
            format!("{:.2}x", last / first),
            Some(last <= 2.0 * first),
        );
    }
    b.report.section(
        "9d. Releasing many permits at once",
        &format!(
            "Issue 29: `PSEMAPHORE.RELEASE name id...` and Redisson's `tryRelease(ids)` body (3.41+, `{}`) of K \
             leased permits, on the module's server (the body with `lockmod.redisson-scripts native`) and the body \
             as Lua on the server without the module; usec per id: `INFO commandstats` of the one call over K, the \
             median of {rounds} rounds (the state rebuilt before each). Each id is looked up once: the time per id \
             stays flat as K grows (before issue 29, a scan of every argument per id made 64k ids take seconds). \
             Redis' Lua cannot `unpack` more than about 8,000 values: past that the Lua body fails, as it does for \
             a Redisson client releasing that many ids at once.",
            &sha[..10]
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
