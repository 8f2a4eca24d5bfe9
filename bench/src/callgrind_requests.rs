//! A server run under `valgrind --tool=callgrind`, counting the instructions it executes for a
//! batch of commands: deterministic where time on a shared machine is not (part 7).
//!
//! What is counted: the server's work for a request in user space, from reading its bytes
//! (`readQueryFromClient`: the read, parsing, `processCommand` with the command filters, the
//! command, its keyspace events and propagation) to writing its reply (`writeToClient`), and
//! within that, `processCommand` alone (the command path, read from the dump's call graph).
//! Left out: the kernel, the event loop, timers and cron, and the lookup of the command's name
//! in the command table (`lookupCommandLogic`, and `lookupCommandOrOriginal` for a command
//! rewritten for propagation; toggled off inside the rest): a lookup walks a hash chain whose
//! length depends on the hash seed Redis draws at random at every start, so two servers
//! without the module differ there by up to ~100 instructions per command (a `strcasecmp` per
//! name sharing the bucket).
//!
//! Batches are delimited by `ECHO`: `--dump-before=echoCommand` writes the counters to a file
//! and zeroes them each time an `ECHO` runs. `ECHO`, `ECHO`, the batch (one pipeline, every
//! reply read), `ECHO`: the last dump holds the batch and one `ECHO` round trip, the one before
//! a single `ECHO` round trip, and the difference is the batch.

use std::path::Path;
use std::process::Command;

use crate::server::{pipeline, Res, Server};

/// Functions the collector toggles on (reading a request, writing replies) and off again
/// inside them (the command table lookup), the command path reported on its own, and the
/// function whose entry dumps the counters. Redis 7.0 and Valkey 8-9 name them alike.
const COLLECT: [&str; 2] = ["readQueryFromClient", "writeToClient"];
/// Toggled off: the command table lookups, when a request is parsed and when a command
/// rewrites its name for propagation (`PEXPIRE` as `PEXPIREAT`), where Redis inlines the
/// first into the second.
const EXCLUDE: [&str; 2] = ["lookupCommandLogic", "lookupCommandOrOriginal"];
const COMMAND_PATH: &str = "processCommand";
const MARK: &str = "echoCommand";

/// Why instructions cannot be counted with `binary`, or None when they can.
pub fn unavailable(binary: &str) -> Option<String> {
    let ok = Command::new("valgrind").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    if !ok {
        return Some("valgrind is not installed (apt-get install valgrind)".into());
    }
    let path = which(binary)?;
    // Exported symbols (Redis links with -rdynamic), or the full table of an unstripped binary.
    let mut names = String::new();
    for flag in [&["-D"][..], &[]] {
        if let Ok(o) = Command::new("nm").args(flag).arg(&path).output() {
            names.push_str(&String::from_utf8_lossy(&o.stdout));
        }
    }
    let has = |f: &str| names.lines().any(|l| l.split_whitespace().last() == Some(f));
    let missing: Vec<&str> =
        COLLECT.into_iter().chain(EXCLUDE).chain([COMMAND_PATH, MARK]).filter(|f| !has(f)).collect();
    (!missing.is_empty()).then(|| format!("{path} has no symbol {} (nm)", missing.join(", ")))
}

fn which(binary: &str) -> Option<String> {
    if binary.contains('/') {
        return Some(binary.to_string());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(binary)).find(|p| p.is_file()).map(|p| p.display().to_string())
}

/// Starts `binary` (with `module`, if any) under callgrind, writing its dumps into a
/// directory of its own (removed by [`clean`]).
pub fn start(binary: &str, module: Option<&Path>, tag: &str) -> Res<Server> {
    let out = out_dir(tag);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut wrapper: Vec<String> = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--compress-strings=no"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    wrapper.extend(COLLECT.iter().chain(&EXCLUDE).map(|f| format!("--toggle-collect={f}")));
    wrapper.extend([
        format!("--dump-before={MARK}"),
        format!("--callgrind-out-file={}/cg.%p", out.display()),
        "--log-file=/dev/null".into(),
    ]);
    Server::start_under(&wrapper, binary, module, tag)
}

/// The directory callgrind writes into for the server tagged `tag`.
fn out_dir(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("lockmod-callgrind-{}-{tag}", std::process::id()))
}

/// Starts one server under callgrind per `(module, tag)`, all or none: if one does not start
/// (Valkey 9 aborts under valgrind: it cannot load its own Lua engine module there), the ones
/// started are stopped, every tag's files removed, and the error is the log's last warning.
pub fn start_all<const N: usize>(binary: &str, servers: [(Option<&Path>, &str); N]) -> Result<[Server; N], String> {
    let mut started = Vec::with_capacity(N);
    for (module, tag) in servers {
        match start(binary, module, tag) {
            Ok(s) => started.push(s),
            Err(e) => {
                drop(started);
                for (_, tag) in servers {
                    clean(tag);
                }
                return Err(e.lines().rfind(|l| l.contains(" # ")).unwrap_or(&e).to_string());
            }
        }
    }
    started.try_into().map_err(|_| "a server is missing".to_string())
}

/// Removes what callgrind wrote for `tag` (call after the server is gone).
pub fn clean(tag: &str) {
    let _ = std::fs::remove_dir_all(out_dir(tag));
}

/// One dump: instructions in all, and within `processCommand` (inclusive).
#[derive(Clone, Copy, Default)]
pub struct Dump {
    pub total: f64,
    pub command: f64,
}

/// Reads a dump written with `--compress-strings=no`: the `summary:` line, and the cost of
/// every `fn=processCommand` block (its own lines, and the inclusive cost of each call made
/// from it).
fn parse(text: &str) -> Option<Dump> {
    let mut d = Dump::default();
    let mut inside = false;
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")) {
            d.total = t.split_whitespace().next()?.parse().ok()?;
        } else if let Some(f) = l.strip_prefix("fn=") {
            inside = f == COMMAND_PATH;
        } else if l.starts_with(|c: char| c.is_ascii_digit() || c == '+' || c == '-' || c == '*') {
            // `<position> <cost>`: the function's own cost, or the call's inclusive cost
            // right after a `calls=` line; either way part of the function's inclusive cost.
            if inside {
                d.command += l.split_whitespace().nth(1).and_then(|c| c.parse::<f64>().ok()).unwrap_or(0.0);
            }
        }
    }
    (d.total > 0.0 || text.contains("summary:")).then_some(d)
}

/// Every dump file in the directory, by dump number, removed once read.
fn dumps(tag: &str) -> Res<Vec<(u64, Dump)>> {
    let dir = out_dir(tag);
    let mut v = vec![];
    for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        // cg.<pid>.<n>: the n-th dump; cg.<pid> alone is the final one, at exit.
        let Some(n) = name.rsplit('.').next().and_then(|n| n.parse::<u64>().ok()) else { continue };
        if name.matches('.').count() != 2 {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).map_err(|e| e.to_string())?;
        let d = parse(&text).ok_or_else(|| format!("callgrind dump {name} has no summary"))?;
        v.push((n, d));
        let _ = std::fs::remove_file(e.path());
    }
    v.sort_by_key(|x| x.0);
    Ok(v)
}

/// Instructions per command of `cmds` (sent as one pipeline, every reply checked by `check`)
/// on a server started by [`start`] with `tag`: (the whole request, the command path).
pub fn count(s: &Server, tag: &str, cmds: &[Vec<String>], check: impl Fn(&redis::Value) -> bool) -> Res<Dump> {
    let mut c = s.conn()?;
    let echo = vec![vec!["ECHO".to_string(), "tax".to_string()]];
    // Each ECHO its own round trip, so the batch's replies are written before the last one.
    pipeline(&mut c, &echo)?;
    dumps(tag)?;
    pipeline(&mut c, &echo)?;
    // Pipelines of 16, each sent once the replies of the one before are in (as
    // `redis-benchmark -P 16` does): every read of the server sees the same bytes on every
    // server, whatever the speed of each.
    for chunk in cmds.chunks(16) {
        let replies = pipeline(&mut c, chunk)?;
        if let Some((i, r)) = replies.iter().enumerate().find(|(_, r)| !check(r)) {
            return Err(format!("{}: unexpected reply {r:?}", chunk[i].join(" ")));
        }
    }
    pipeline(&mut c, &echo)?;
    let d = dumps(tag)?;
    // The second ECHO's dump: one ECHO round trip; the third: the batch and one round trip.
    let [.., (_, one), (_, all)] = d[..] else {
        return Err(format!("callgrind wrote {} dumps for {tag}, 2 expected", d.len()));
    };
    let n = cmds.len().max(1) as f64;
    Ok(Dump { total: (all.total - one.total) / n, command: (all.command - one.command) / n })
}
