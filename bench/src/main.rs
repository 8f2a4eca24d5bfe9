//! The benchmark driver behind `make bench` and `make bench-quick` (issue 10).
//!
//! It starts a `redis-server` with the module and a second one without it, runs the parts
//! (server cost per call, scaling with N, throughput, contended hand-off, memory, Redisson's own
//! scripts run natively, the tax on other traffic, the floor, Redisson's synchronizers, 10:
//! Redisson's rate limiter, and 11: GCRA and CL.THROTTLE against redis-cell built in the run),
//! prints the tables on stdout and progress on stderr, and writes `benchmarks.md` plus SVG charts into `--out`. `--only 7,8`
//! (or `--part 7`) runs some parts alone; the report then has only those.
//! Every figure it reports is a ratio of two sides measured in alternating chunks of one run.

mod bench;
mod callgrind;
mod callgrind_requests;
mod chart;
// Redisson's key and channel names: the tests' own copy (independent of the module's
// src/names.rs), shared so the driver and the tests cannot drift apart.
#[path = "../../tests/common/names.rs"]
#[allow(dead_code)]
mod names;
mod part1;
mod part10;
mod part10_blocked;
mod part10_calls;
mod part10_instr;
mod part10_long;
mod part10_rates;
mod part11;
mod part11_cell;
mod part12;
mod part12_latency;
mod part13;
mod part2;
mod part3;
mod part4;
mod part5;
mod part6;
mod part7;
mod part7_instr;
mod part7_states;
mod part8;
mod part9;
mod part9_handoff;
mod part9_release;
mod part9_scaling;
mod redisson_rate;
mod redisson_sync;
mod report;
mod server;
mod stats;
mod workloads;

use std::collections::HashMap;

use std::path::{Path, PathBuf};

pub use bench::{strs, Bench};
use report::Report;
use server::{Res, Server};

fn load_scripts(dir: &Path, servers: &[&Server]) -> Res<HashMap<String, String>> {
    let mut shas = HashMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("lua") {
            continue;
        }
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else { continue };
        let body = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for s in servers {
            let mut c = s.conn()?;
            let sha: String =
                redis::cmd("SCRIPT").arg("LOAD").arg(&body).query(&mut c).map_err(|e| format!("{stem}: {e}"))?;
            shas.insert(stem.clone(), sha);
        }
    }
    Ok(shas)
}

/// Lets the driver open the thousand connections of part 5.
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write the plain struct passed by pointer; no aliasing.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max.min(65536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// One part of the run.
type Part = fn(&mut Bench) -> Res<()>;

fn usage() -> ! {
    eprintln!("usage: lockmod-bench [--quick] [--only 1,2,...] [--part N] [--out DIR] [--module PATH] [--server BIN]");
    std::process::exit(2)
}

fn run() -> Res<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut quick = false;
    let mut out = root.join("../docs");
    let mut module = std::env::var("LOCKMOD_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("../target/release/libredis_lockmod.so"));
    let mut binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    // `--only 7,8` / `--part N`: run only those parts; the report then has only them.
    let mut only: Option<Vec<u32>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => {
                let list = args.next().unwrap_or_else(|| usage());
                only = Some(list.split(',').map(|p| p.trim().parse().unwrap_or_else(|_| usage())).collect());
            }
            "--part" => only = Some(vec![args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| usage())]),
            "--out" => out = args.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "--module" => module = args.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "--server" => binary = args.next().unwrap_or_else(|| usage()),
            _ => usage(),
        }
    }
    if !module.exists() {
        return Err(format!("module not found at {} (make release)", module.display()));
    }
    raise_fd_limit();
    std::fs::create_dir_all(out.join("img")).map_err(|e| format!("{}: {e}", out.display()))?;
    progress!("starting servers ({})", if quick { "quick run" } else { "full run" });
    let m = Server::start(&binary, Some(&module), "module")?;
    let p = Server::start(&binary, None, "plain")?;
    let lua_dir = root.join("lua");
    let shas = load_scripts(&lua_dir, &[&m, &p])?;
    let mut b =
        Bench { quick, m, p, lua_dir, shas, report: Report::default(), out: out.clone(), binary: binary.clone() };

    let started = std::time::Instant::now();
    // (number, part): numbers are the report's section numbers (10 is the rate limiter's, 11
    // GCRA's, 12 the Rust client's, 13 fencing eras').
    let parts: [(u32, Part); 13] = [
        (1, part1::run),
        (2, part2::run),
        (3, part3::run),
        (4, part4::run),
        (5, part5::run),
        (6, part6::run),
        (7, part7::run),
        (8, part8::run),
        (9, part9_all),
        (10, part10::run),
        (11, part11::run),
        (12, part12::run),
        (13, part13::run),
    ];
    for (n, part) in parts {
        if only.as_ref().is_none_or(|o| o.contains(&n)) {
            part(&mut b)?;
        }
    }
    let header = header(&b, &binary, started.elapsed().as_secs())?;
    let mut md = b.report.markdown(&header);
    // Hand-written notes (profiles, what bounds a missed target) survive every regeneration.
    if let Ok(notes) = std::fs::read_to_string(root.join("notes.md")) {
        md.push('\n');
        md.push_str(&notes);
    }
    let file = out.join("benchmarks.md");
    std::fs::write(&file, md).map_err(|e| format!("{}: {e}", file.display()))?;
    progress!("wrote {} in {} s", file.display(), started.elapsed().as_secs());
    Ok(())
}

/// Part 9, Redisson's synchronizers: per call, scaling, hand-off, releasing many ids.
/// `LOCKMOD_BENCH_9D_ONLY=1 ... --only 9`: releasing many ids alone (about a minute).
fn part9_all(b: &mut Bench) -> Res<()> {
    if std::env::var_os("LOCKMOD_BENCH_9D_ONLY").is_some() {
        return part9_release::run(b);
    }
    part9::run(b)?;
    part9_scaling::run(b)?;
    part9_handoff::run(b)?;
    part9_release::run(b)
}

fn header(b: &Bench, binary: &str, secs: u64) -> Res<String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let version = server::info(&mut b.m.conn()?, "server")?.get("redis_version").cloned().unwrap_or_default();
    let cmd = if b.quick { "make bench-quick" } else { "make bench" };
    let cmd = match std::env::args().skip_while(|a| a != "--only").nth(1) {
        Some(parts) => format!("{cmd}, parts {parts} only"),
        None => cmd.to_string(),
    };
    Ok(format!(
        "# Benchmarks\n\n\
         Produced by `{cmd}` (the driver in `bench/`, `cargo run --release -p lockmod-bench`), in {secs} s.\n\n\
         - machine: {cores} cores (`nproc`), {cpu}, shared with other work: absolute times are noisy\n\
         - server: `{binary}` {version}, `--save \"\" --appendonly no`, one with the module\n  \
           (`target/release/libredis_lockmod.so`) and one without it\n\
         - every figure is a ratio of two sides run in alternating chunks of the same run: the median\n  \
           over the rounds, with the min-max in brackets\n"
    ))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("bench: FAILED: {e}");
        std::process::exit(1);
    }
}
