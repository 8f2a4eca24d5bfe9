//! redis-cell, built for part 11 from its crates.io release at run time: none of its code is
//! in this repository. A scratch Cargo project under `target/redis-cell/` depends on it, so
//! Cargo downloads it into its registry (`cargo metadata` names the directory); its sources are
//! copied next to the scratch project and built there as the standalone crate they are (a
//! `dylib` with `RedisModule_OnLoad`). The result is kept: a later run reuses it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::progress;
use crate::server::Res;

/// The release on crates.io (its latest; later versions ship as binaries on GitHub only).
pub const VERSION: &str = "0.2.2";

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn write(path: &Path, text: &str) -> Res<()> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Copies the directory `from` into `to` (created), files and subdirectories.
fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for e in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))?.flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
    }
    Ok(())
}

/// Runs a Cargo command line, failing with its stderr.
fn run(cmd: &mut Command, what: &str) -> Res<String> {
    let out = cmd.output().map_err(|e| format!("{what}: cannot run cargo: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{what} failed: {}", err.lines().rev().take(5).collect::<Vec<_>>().join(" | ")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The built `libredis_cell.so` (built now if it is not there yet).
pub fn build(root: &Path) -> Res<PathBuf> {
    let dir = root.join("../target/redis-cell");
    let so =
        dir.join(format!("target/release/libredis_cell.{}", if cfg!(target_os = "macos") { "dylib" } else { "so" }));
    let stamp = dir.join("built-version");
    if so.exists() && std::fs::read_to_string(&stamp).is_ok_and(|v| v == VERSION) {
        return Ok(so);
    }
    progress!("part 11: building redis-cell {VERSION} from crates.io into {}", dir.display());
    let fetch = dir.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).map_err(|e| format!("{}: {e}", fetch.display()))?;
    // `[workspace]`: a project of its own, not a member of the repository's workspace above it.
    write(
        &fetch.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"redis-cell-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nredis-cell = \"={VERSION}\"\n\n[workspace]\n"
        ),
    )?;
    write(&fetch.join("src/lib.rs"), "")?;
    let meta = run(
        cargo().args(["metadata", "--format-version", "1", "--manifest-path"]).arg(fetch.join("Cargo.toml")),
        "cargo metadata (downloading redis-cell)",
    )?;
    let manifest = meta
        .split("\"manifest_path\":\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .find(|p| p.ends_with(&format!("/redis-cell-{VERSION}/Cargo.toml")))
        .ok_or("cargo metadata names no redis-cell crate")?;
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    copy_dir(Path::new(manifest).parent().ok_or("bad manifest path")?, &src)?;
    // The copy builds as a project of its own too, with the versions the scratch project locked.
    let toml = std::fs::read_to_string(src.join("Cargo.toml")).map_err(|e| e.to_string())?;
    write(&src.join("Cargo.toml"), &format!("{toml}\n[workspace]\n"))?;
    let _ = std::fs::copy(fetch.join("Cargo.lock"), src.join("Cargo.lock"));
    run(
        cargo()
            .args(["build", "--release", "--quiet", "--manifest-path"])
            .arg(src.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(dir.join("target")),
        "cargo build of redis-cell",
    )?;
    if !so.exists() {
        return Err(format!("redis-cell built, but {} is missing", so.display()));
    }
    write(&stamp, VERSION)?;
    Ok(so)
}
