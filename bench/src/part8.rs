//! Part 8, near the floor (issue 17): each O(1) command against a minimal C module
//! (`bench/floor/floor.c`) making the same keyspace writes, events and replicated commands,
//! on a fresh server of its own: the physical limit of a native command on this server.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::part1::chunk;
use crate::report::Table;
use crate::server::{Res, Server};
use crate::stats::{now_ms, num, ratios, Ratio, Summary};
use crate::workloads::{Expect, LEASE};
use crate::{progress, strs, Bench};

/// The directory of the `redismodule.h` that the module itself is built against: the one the
/// `redis-module` crate ships (found through `cargo metadata`, so no copy lives in this repo).
fn header_dir(root: &Path) -> Res<PathBuf> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(root.join("../Cargo.toml"))
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let manifest = text
        .split("\"manifest_path\":\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|p| p.contains("/redis-module-") && p.ends_with("/Cargo.toml"))
        .ok_or("cargo metadata names no redis-module crate")?;
    let dir = Path::new(manifest).parent().map(|d| d.join("src/include")).ok_or("bad manifest path")?;
    if !dir.join("redismodule.h").exists() {
        return Err(format!("no redismodule.h in {}", dir.display()));
    }
    Ok(dir)
}

/// Builds `bench/floor/floor.c` with the system C compiler into `target/floor/`.
fn build_floor() -> Res<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out_dir = root.join("../target/floor");
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let so = out_dir.join("libfloor.so");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-Wall", "-shared", "-fPIC", "-I"])
        .arg(header_dir(root)?)
        .arg(root.join("floor/floor.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !status.success() {
        return Err("cc failed on bench/floor/floor.c".into());
    }
    Ok(so)
}

struct Row {
    name: &'static str,
    module: &'static str,
    floor: &'static str,
    /// Acquire first (the unlock row measures releases of held locks).
    held: bool,
    expect: Expect,
}

const ROWS: &[Row] = &[
    Row { name: "acquire free", module: "LOCK.ACQUIRE", floor: "FLOOR.ACQUIRE", held: false, expect: Expect::Nil },
    Row { name: "unlock to zero", module: "LOCK.UNLOCK", floor: "FLOOR.UNLOCK", held: true, expect: Expect::Int(1) },
    Row { name: "read acquire free", module: "RWLOCK.RLOCK", floor: "FLOOR.RLOCK", held: false, expect: Expect::Nil },
];

pub fn run(b: &mut Bench) -> Res<()> {
    let rounds = b.rounds(9);
    let n = b.size(2000, 100);
    let so = build_floor()?;
    let f = Server::start(&b.binary, Some(&so), "floor")?;
    let owner = "6b1f0c3a-0000-4000-8000-000000000001:1";
    let mut t = Table::new(&["workload", "module usec", "floor usec", "module / floor"]);
    let (mut mc, mut fc) = (b.m.conn()?, f.conn()?);
    for row in ROWS {
        if !b.available(&format!("part 8 {}", row.name), row.module, &[]) {
            continue;
        }
        let (mut vm, mut vf) = (vec![], vec![]);
        for r in 0..rounds {
            progress!("part 8: {} round {}/{rounds}", row.name, r + 1);
            let keys: Vec<String> = (0..n).map(|i| format!("floor:{}:{r}:{i}", now_ms())).collect();
            let plan = |cmd: &str| -> Vec<Vec<String>> { keys.iter().map(|k| strs(&[cmd, k, owner, LEASE])).collect() };
            let (msetup, fsetup) =
                if row.held { (plan("LOCK.ACQUIRE"), plan("FLOOR.ACQUIRE")) } else { (vec![], vec![]) };
            let (mcalls, fcalls) = (plan(row.module), plan(row.floor));
            for side in if r % 2 == 0 { [0, 1] } else { [1, 0] } {
                match side {
                    0 => vm.push(chunk(&mut mc, &msetup, &mcalls, row.expect, row.module)?),
                    _ => vf.push(chunk(&mut fc, &fsetup, &fcalls, row.expect, row.floor)?),
                }
            }
        }
        let ratio = Summary::of(&ratios(&vm, &vf));
        t.row(vec![
            row.name.into(),
            num(Summary::of(&vm).median),
            num(Summary::of(&vf).median),
            format!("{}", Ratio(ratio)),
        ]);
        b.report.target(
            &format!("{} ({}): module / floor module", row.name, row.module),
            "<= 1.15x",
            format!("{}", Ratio(ratio)),
            Some(ratio.median <= 1.15),
        );
    }
    b.report.section(
        "8. Near the floor",
        &format!(
            "`INFO commandstats` usec per call of each O(1) command against its counterpart in a minimal C \
             module (`bench/floor/floor.c`, built with the system `cc` against the `redismodule.h` the module is \
             built against) doing the same keyspace writes, keyspace events and replicated commands with the same \
             absolute times, and nothing else, on a fresh server of its own. {n} calls per chunk on fresh keys \
             (pipelined, every reply checked; the unlock chunk acquires its locks first, unmeasured), {rounds} \
             rounds in alternating order, the module's server idle (flushed)."
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
