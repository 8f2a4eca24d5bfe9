//! The node's own record of its fencing era (`lockmod.fencing-era-file`, default
//! `lockmod-fencing-era`): a small file in the server's `dir`, beside the RDB and the AOF, that
//! holds the largest era this node ever opened. The keyspace's record (`effects/era.rs`) is
//! lost with the history it records (a restart from a snapshot taken before it, a crash loop);
//! this file is not, so an event on the same node always goes above every era the node used.
//!
//! - **Written** before the first fencing write of each era (a grant's move or count, the
//!   walk's move, the keyspace record, the filter's rewrite): [`open`] asks one relaxed load,
//!   and the first time in an era writes `<era>\n` durably: a temporary file, `fsync`, `rename`
//!   over the file, `fsync` of the directory; all on the main thread, so no grant of the era
//!   is answered before the era is on disk. Never on a replica or while loading. A server that
//!   never fenced anything writes no file.
//! - **Read** at every event and when the module loads into an empty keyspace (`crate::fencing`).
//! - **Where**: Redis keeps `dir` as its working directory (`CONFIG SET dir` changes it, `CONFIG
//!   GET dir` reports it), so the name is opened relative to it. After `CONFIG SET dir` (or a new
//!   name) the era in force is written to the new place at once ([`moved`]).
//! - **When it cannot be written or read** (a read-only disk, permissions, a directory in its
//!   place): a warning (once until a write succeeds again), `fencing_era_file_errors` in `INFO
//!   lockmod`, and grants go on with the keyspace record alone (the bound without the file).
//!   A failed era is not tried again before the next one: a broken disk costs no syscall per grant.
//!
//! File I/O is `std::fs` (no `unsafe`); the only Redis call is the log.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use crate::core::lock::era;
use crate::core::{config, IntBuf};
use crate::ffi::{log, Ctx};

/// Durable writes of the file.
static WRITES: AtomicU64 = AtomicU64::new(0);
/// Failed reads and writes of the file.
static ERRORS: AtomicU64 = AtomicU64::new(0);
/// How long the last write took, in µs (the `fsync`s dominate).
static LAST_USEC: AtomicI64 = AtomicI64::new(0);
/// A failure was logged and no write succeeded since: later failures are only counted.
static WARNED: AtomicBool = AtomicBool::new(false);

/// The era the file holds: `None` when the file is off, absent, or unreadable (a failure is
/// counted and warned of; the keyspace's record is then the only bound).
pub fn read() -> Option<i64> {
    let name = config::era_file()?;
    match fs::read(&name) {
        Ok(bytes) => {
            let era = parse(&bytes);
            if era.is_none() {
                failed(&name, "reading", "it holds no era");
            }
            era
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            failed(&name, "reading", &e.to_string());
            None
        }
    }
}

/// Before a fencing write: the era in force is in the file, written now if this is the era's
/// first (a replica, or a server still loading, writes nothing and leaves the era unopened).
#[inline]
pub fn open(ctx: &Ctx) {
    if !era::is_open() {
        open_now(ctx);
    }
}

#[cold]
#[inline(never)]
fn open_now(ctx: &Ctx) {
    if ctx.is_replica() || ctx.is_loading() {
        return;
    }
    era::opened();
    store(era::era());
}

/// `dir` or the file's name changed: a node that opened the era in force writes it to the
/// new place now, so the files beside the next snapshot there hold it.
pub fn moved(ctx: &Ctx) {
    if era::is_open() && !ctx.is_replica() && !ctx.is_loading() {
        store(era::era());
    }
}

/// (writes, errors, last write's µs), for `INFO lockmod`.
pub fn counts() -> (u64, u64, i64) {
    (WRITES.load(Relaxed), ERRORS.load(Relaxed), LAST_USEC.load(Relaxed))
}

/// `CONFIG RESETSTAT`: the write and error counters back to 0 (the last write's time is a
/// gauge, and stays).
pub fn reset_counts() {
    WRITES.store(0, Relaxed);
    ERRORS.store(0, Relaxed);
}

/// Writes `era` unless the file holds as much already; the outcome counted.
fn store(era: i64) {
    let Some(name) = config::era_file() else { return };
    let started = Instant::now();
    match write_at_least(Path::new(&name), era) {
        Ok(false) => {}
        Ok(true) => {
            LAST_USEC.store(started.elapsed().as_micros().min(i64::MAX as u128) as i64, Relaxed);
            WRITES.fetch_add(1, Relaxed);
            WARNED.store(false, Relaxed);
        }
        Err(e) => failed(&name, "writing", &e.to_string()),
    }
}

/// True if it wrote: the file at `path` (a bare name: in the working directory, Redis' `dir`)
/// held less than `era`.
fn write_at_least(path: &Path, era: i64) -> io::Result<bool> {
    match fs::read(path) {
        Ok(bytes) if parse(&bytes).is_some_and(|held| held >= era) => return Ok(false),
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let written = write_durably(&temp, path, era);
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map(|()| true)
}

/// `era` into `temp`, synced, renamed over `path`, and the directory synced: after a crash
/// the file holds either its old content or `era`, never a torn write.
fn write_durably(temp: &Path, path: &Path, era: i64) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(temp)?;
    f.write_all(&format(era))?;
    f.sync_all()?;
    drop(f);
    fs::rename(temp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

fn failed(name: &str, doing: &str, why: &str) {
    ERRORS.fetch_add(1, Relaxed);
    if !WARNED.swap(true, Relaxed) {
        let dir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default();
        log(
            c"warning",
            &format!(
                "lockmod: {doing} the fencing era file {dir}/{name} failed ({why}): fencing goes on with the \
                 keyspace's record alone, so a restart from a snapshot older than the last event may repeat \
                 tokens (INFO lockmod counts fencing_era_file_errors; this is logged once until a write succeeds)"
            ),
        );
    }
}

/// The file's content: the era in decimal and a newline.
fn format(era: i64) -> Vec<u8> {
    let mut buf = IntBuf::default();
    let mut out = buf.format(era.max(0)).to_vec();
    out.push(b'\n');
    out
}

/// The era a file holds: a non-negative decimal, surrounding whitespace allowed.
fn parse(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    text.parse::<i64>().ok().filter(|e| (0..=era::MAX_ERA).contains(e))
}

// Test code only: an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn the_file_holds_the_era_in_decimal_and_anything_else_is_no_era() {
        assert_eq!(format(0), b"0\n");
        assert_eq!(format(42), b"42\n");
        let cases: &[(&[u8], Option<i64>)] = &[
            (b"7\n", Some(7)),
            (b"0", Some(0)),
            (b"  12 \n", Some(12)),
            (b"", None),
            (b"-1\n", None),
            (b"x\n", None),
            (b"1 2\n", None),
            (b"\xff", None),
            (b"2147483648\n", None),
        ];
        for &(bytes, want) in cases {
            assert_eq!(parse(bytes), want, "{:?}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(parse(&format(era::MAX_ERA)), Some(era::MAX_ERA));
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lockmod-era-file-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_write_raises_the_file_never_lowers_it_and_leaves_no_temporary_file() {
        let dir = scratch("raise");
        let path = dir.join("lockmod-fencing-era");
        assert!(write_at_least(&path, 3).unwrap(), "absent: written");
        assert_eq!(fs::read(&path).unwrap(), b"3\n");
        assert!(!write_at_least(&path, 2).unwrap(), "already past: left alone");
        assert!(!write_at_least(&path, 3).unwrap());
        assert!(write_at_least(&path, 9).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"9\n");
        fs::write(&path, b"garbage").unwrap();
        assert!(write_at_least(&path, 1).unwrap(), "no era in it: written over");
        assert_eq!(fs::read(&path).unwrap(), b"1\n");
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["lockmod-fencing-era"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_in_the_files_place_is_an_error_and_leaves_nothing_behind() {
        let dir = scratch("blocked");
        let path = dir.join("lockmod-fencing-era");
        fs::create_dir(&path).unwrap();
        assert!(write_at_least(&path, 1).is_err());
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["lockmod-fencing-era"], "the temporary file is removed");
        fs::remove_dir_all(&dir).unwrap();
    }
}
