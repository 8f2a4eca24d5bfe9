//! Part 7b, the tax on other traffic in server instructions per command, counted by callgrind
//! (`crate::callgrind_requests`), where the time-based table cannot resolve 2% on shared cores. Three
//! servers run under callgrind: without the module, with it, and a second one without it (the
//! noise floor). In each state of the module's server, each of the eight commands runs once
//! over a set of keys to create them (uncounted), then once more, counted, on every server.

use redis::Value;

use crate::callgrind_requests as callgrind;
use crate::part7_states::{enter, refresh, State, STATES};
use crate::report::Table;
use crate::server::{call_s, info_f64, pipeline, Res, Server};
use crate::Bench;

/// Each command's (name, key prefix, warm-up command, counted command), on key `<prefix><i>`.
const WORK: &[(&str, &str, &[&str], &[&str])] = &[
    ("SET", "ti:set:", &["SET", "xxxxxxxxxxxxxxxx"], &["SET", "xxxxxxxxxxxxxxxx"]),
    ("GET", "ti:get:", &["SET", "xxxxxxxxxxxxxxxx"], &["GET"]),
    ("INCR", "ti:incr:", &["INCR"], &["INCR"]),
    ("HSET", "ti:hash:", &["HSET", "field", "xxxxxxxx"], &["HSET", "field", "xxxxxxxx"]),
    ("LPUSH", "ti:list:", &["LPUSH", "xxxxxxxx"], &["LPUSH", "xxxxxxxx"]),
    ("ZADD", "ti:zset:", &["ZADD", "1", "member"], &["ZADD", "1", "member"]),
    ("PEXPIRE", "ti:exp:", &["SET", "xxxxxxxx", "PX", "600000"], &["PEXPIRE", "600000"]),
    ("DEL", "ti:del:", &["SET", "xxxxxxxx"], &["DEL"]),
];

/// `cmd` on keys `prefix0..prefix{n-1}`: the key goes right after the command name.
fn batch(cmd: &[&str], prefix: &str, n: usize) -> Vec<Vec<String>> {
    (0..n)
        .map(|i| {
            let mut v = vec![cmd[0].to_string(), format!("{prefix}{i}")];
            v.extend(cmd[1..].iter().map(|s| s.to_string()));
            v
        })
        .collect()
}

fn ok(v: &Value) -> bool {
    !matches!(v, Value::ServerError(_)) && !matches!(v, Value::SimpleString(s) if s.starts_with("ERR"))
}

/// Copies every key of `from` (value and TTL) to `to`, so both keyspaces have the same size
/// and the same expiring keys: the lock keys a state made are ordinary keys to the others.
fn mirror(from: &Server, to: &Server) -> Res<()> {
    let mut src = from.conn()?;
    let mut dst = to.conn()?;
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut src).map_err(|e| e.to_string())?;
    for k in keys {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&k).query(&mut src).map_err(|e| e.to_string())?;
        let ttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut src).map_err(|e| e.to_string())?;
        let Some(dump) = dump else { continue };
        redis::cmd("RESTORE")
            .arg(&k)
            .arg(ttl.max(0))
            .arg(dump)
            .arg("REPLACE")
            .query::<()>(&mut dst)
            .map_err(|e| format!("RESTORE: {e}"))?;
    }
    Ok(())
}

/// Waits (a little) until no hash table of db 0 is being rehashed: a rehash in progress would
/// move buckets during the counted commands on one server and not on another.
fn settle(s: &Server) -> Res<()> {
    let mut c = s.conn()?;
    // Redis rehashes 1 ms per cron run, 10 runs a second: under valgrind a big table takes
    // seconds.
    for _ in 0..300 {
        let stats: String = redis::cmd("DEBUG").arg("HTSTATS").arg("0").query(&mut c).unwrap_or_default();
        // Redis prints a second table as the "rehashing target"; Valkey a "rehashing index"
        // that is -1 when idle.
        let rehashing = stats.contains("rehashing target")
            || stats.lines().filter_map(|l| l.trim().strip_prefix("rehashing index:")).any(|v| v.trim() != "-1");
        if !rehashing {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err("part 7b: db 0 was still being rehashed after 6 s".into())
}

/// The path the module's server loaded the module from (`MODULE LIST`).
pub fn module_path(s: &Server) -> Res<std::path::PathBuf> {
    let list: Vec<Vec<Value>> = redis::cmd("MODULE").arg("LIST").query(&mut s.conn()?).map_err(|e| e.to_string())?;
    for m in list {
        let mut it = m.iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            if let (Value::BulkString(k), Value::BulkString(v)) = (k, v) {
                if k == b"path" {
                    return Ok(String::from_utf8_lossy(v).to_string().into());
                }
            }
        }
    }
    Err("part 7b: MODULE LIST gives no path for the module".into())
}

pub fn run(b: &mut Bench) -> Res<()> {
    if let Some(why) = callgrind::unavailable(&b.binary) {
        b.report.skip(format!("part 7, instructions per command: {why}"));
        return Ok(());
    }
    let n = b.size(1000, 250);
    let module = module_path(&b.m)?;
    let tags = ["cg-plain", "cg-module", "cg-plain2"];
    let servers = match callgrind::start_all(&b.binary, [(None, tags[0]), (Some(&module), tags[1]), (None, tags[2])]) {
        Ok(s) => s,
        Err(why) => {
            b.report
                .skip(format!("part 7b, instructions per command: the server does not start under valgrind: {why}"));
            return Ok(());
        }
    };
    let r = measure(&servers, &tags, n);
    drop(servers);
    for t in tags {
        callgrind::clean(t);
    }
    let (table, worst) = r?;
    let floor = worst.iter().map(|w| w.2).fold(1.0f64, |a, x| if (x - 1.0).abs() > (a - 1.0).abs() { x } else { a });
    for (state, (ratio, cmd, noise)) in STATES.iter().zip(&worst) {
        b.report.target(
            &format!(
                "tax, {}: instructions per call (whole request), module / no module, worst of the 8 commands",
                state.name()
            ),
            "<= 1.02x",
            format!("{} ({cmd}; noise {})", r3(*ratio), r3(*noise)),
            Some(*ratio <= 1.02),
        );
    }
    b.report.target(
        "tax noise floor: instructions per call (whole request), no module / no module, furthest from 1 of all \
         commands and states",
        "stated",
        r3(floor),
        None,
    );
    b.report.section(
        "7b. The tax on other traffic, in instructions",
        &format!(
            "The same eight commands, counted in instructions instead of time (deterministic where time on \
             shared cores is not): three servers run under `valgrind --tool=callgrind` (without the module, with \
             it, and a second one without it), collecting the server's whole work for a request in user space, \
             from reading it (`readQueryFromClient`: parsing, `processCommand` with the command filters, the \
             command, its keyspace events and propagation) to writing its reply (`writeToClient`); in brackets, \
             `processCommand` alone. Left out: the kernel, timers and cron (7a), and the lookups of the command's \
             name in the command table (`lookupCommandLogic`, `lookupCommandOrOriginal`), whose hash chains depend \
             on the seed each server draws at start. Per state and command: {n} keys created by an uncounted \
             pass, then the command once on each key in pipelines of 16 (as `redis-benchmark -P 16`), counted \
             between two `ECHO`s (`--dump-before=echoCommand`). The module's lock keys are copied to the other two \
             servers (DUMP/RESTORE), so the three keyspaces match. Each cell: module / no module, whole request \
             (command path), and the module's extra instructions per call. Noise floor: the second server \
             without the module against the first, the furthest from 1 of the eight commands (the hash seeds \
             still move key lookups by a few instructions). Reproduce one figure: `cargo run --release -p \
             lockmod-bench -- --only 7` (7b runs after the time-based table)."
        ),
        vec![table],
        vec![],
    );
    Ok(())
}

/// A ratio with three decimals: the instruction counts resolve far below 1%.
fn r3(x: f64) -> String {
    format!("{x:.3}")
}

/// One state's verdict over the whole request: the worst ratio, its command, the noise ratio
/// furthest from 1.
type Worst = (f64, String, f64);

/// Per state: the table row, and its [`Worst`].
fn measure(servers: &[Server; 3], tags: &[&str; 3], n: usize) -> Res<(Table, Vec<Worst>)> {
    let mut headers = vec!["module's server".to_string()];
    headers.extend(WORK.iter().map(|w| w.0.to_string()));
    headers.extend(["worst".to_string(), "noise (no module / no module), furthest from 1".to_string()]);
    let mut t = Table { headers, rows: vec![] };
    let mut base = vec!["instructions per call, no module".to_string()];
    let mut worst = vec![];
    for (k, &state) in STATES.iter().enumerate() {
        let parked = enter(&servers[1], state)?;
        for s in [&servers[0], &servers[2]] {
            call_s(&mut s.conn()?, &["FLUSHALL"])?;
            mirror(&servers[1], s)?;
        }
        for &(_, prefix, warm, _) in WORK {
            for s in servers {
                let replies = pipeline(&mut s.conn()?, &batch(warm, prefix, n))?;
                if let Some(r) = replies.iter().find(|r| !ok(r)) {
                    return Err(format!("part 7b: warm-up reply {r:?}"));
                }
            }
        }
        let mut row = vec![state.name().to_string()];
        let (mut w, mut wn) = ((f64::NEG_INFINITY, String::new()), (1.0f64, 1.0f64));
        for &(name, prefix, _, counted) in WORK {
            crate::progress!("part 7b: {} / {name}", state.name());
            let mut per = [callgrind::Dump::default(); 3];
            for (i, s) in servers.iter().enumerate() {
                settle(s)?;
                if i == 1 {
                    refresh(s, state)?;
                }
                per[i] = callgrind::count(s, tags[i], &batch(counted, prefix, n), ok)?;
                if i == 1
                    && state == State::Indexed
                    && info_f64(&mut s.conn()?, "lockmod", "lockmod_command_filter")? < 1.0
                {
                    return Err("part 7b: the read-hold index went away while counting".into());
                }
            }
            if k == 0 {
                base.push(format!("{:.0} ({:.0})", per[0].total, per[0].command));
            }
            let r = (per[1].total / per[0].total, per[1].command / per[0].command);
            let nz = (per[2].total / per[0].total, per[2].command / per[0].command);
            row.push(format!("{} ({}), {:+.0}", r3(r.0), r3(r.1), per[1].total - per[0].total));
            if r.0 > w.0 {
                w = (r.0, name.to_string());
            }
            if (nz.0 - 1.0).abs() > (wn.0 - 1.0).abs() {
                wn.0 = nz.0;
            }
            if (nz.1 - 1.0).abs() > (wn.1 - 1.0).abs() {
                wn.1 = nz.1;
            }
        }
        row.push(format!("{} {}", r3(w.0), w.1));
        row.push(format!("{} ({})", r3(wn.0), r3(wn.1)));
        t.row(row);
        worst.push((w.0, w.1, wn.0));
        parked.end(&servers[1])?;
    }
    base.extend(["".to_string(), "".to_string()]);
    t.rows.insert(0, base);
    Ok((t, worst))
}
