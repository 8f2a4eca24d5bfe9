//! The module configs' current values, kept in atomics so the hot path reads them lock-free.
//!
//! Registered with Redis by `crate::server` (through `ffi::config`); documented in
//! docs/configuration.md. Here, below every layer that reads them.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Mutex;

/// `lockmod.pubsub`: how unlock messages are published.
pub const PUBSUB_GLOBAL: i32 = 0;
/// `SPUBLISH`: for Redisson clients configured with sharded pub/sub in a cluster.
pub const PUBSUB_SHARDED: i32 = 1;

static PUBSUB: AtomicI32 = AtomicI32::new(PUBSUB_GLOBAL);

pub fn pubsub() -> i32 {
    PUBSUB.load(Ordering::Relaxed)
}

/// Sets `lockmod.pubsub`; false (and no change) for a value that is not one of the above.
pub fn set_pubsub(v: i32) -> bool {
    if v != PUBSUB_GLOBAL && v != PUBSUB_SHARDED {
        return false;
    }
    PUBSUB.store(v, Ordering::Relaxed);
    true
}

pub fn sharded() -> bool {
    pubsub() == PUBSUB_SHARDED
}

/// `lockmod.redisson-scripts`: Redisson's own lock scripts run as sent (`off`) or, when the
/// module recognises one, as the native command (`native`). See `crate::redisson`.
pub const SCRIPTS_OFF: i32 = 0;
pub const SCRIPTS_NATIVE: i32 = 1;

static SCRIPTS: AtomicI32 = AtomicI32::new(SCRIPTS_OFF);

pub fn redisson_scripts() -> i32 {
    SCRIPTS.load(Ordering::Relaxed)
}

/// Sets `lockmod.redisson-scripts`; false (and no change) for a value that is not one of the above.
pub fn set_redisson_scripts(v: i32) -> bool {
    if v != SCRIPTS_OFF && v != SCRIPTS_NATIVE {
        return false;
    }
    SCRIPTS.store(v, Ordering::Relaxed);
    true
}

/// The command filter's first (and, when `off`, only) check.
#[inline]
pub fn redisson_native() -> bool {
    redisson_scripts() == SCRIPTS_NATIVE
}

/// `lockmod.fencing-era-file`: the file in the server's `dir` where the node keeps its fencing
/// era (`crate::effects::era::file`); empty turns it off.
pub const ERA_FILE_DEFAULT: &str = "lockmod-fencing-era";

static ERA_FILE: Mutex<String> = Mutex::new(String::new());
/// False until the first set (Redis sets the default at load): the default is in force.
static ERA_FILE_SET: AtomicBool = AtomicBool::new(false);

/// The era file's name, or `None` when the file is turned off.
pub fn era_file() -> Option<String> {
    if !ERA_FILE_SET.load(Ordering::Relaxed) {
        return Some(ERA_FILE_DEFAULT.to_string());
    }
    let name = ERA_FILE.lock().map(|n| n.clone()).unwrap_or_default();
    (!name.is_empty()).then_some(name)
}

/// The era file's name as `CONFIG GET` shows it (empty: off).
pub fn era_file_shown() -> String {
    era_file().unwrap_or_default()
}

/// Sets `lockmod.fencing-era-file`; an error (and no change) for a name that is not a plain
/// file name: like `dbfilename`, the file stays in `dir`.
pub fn set_era_file(name: &[u8]) -> Result<(), &'static str> {
    let name = era_file_name(name)?;
    let mut held = ERA_FILE.lock().map_err(|_| "lockmod.fencing-era-file is unavailable")?;
    *held = name;
    ERA_FILE_SET.store(true, Ordering::Relaxed);
    Ok(())
}

/// `name` checked: UTF-8, no `/` or NUL, not `.` or `..`, at most 200 bytes (room for the
/// temporary file's suffix under the usual 255-byte limit); empty is allowed (off).
pub fn era_file_name(name: &[u8]) -> Result<String, &'static str> {
    const WHY: &str = "lockmod.fencing-era-file must be a file name in the server's dir (no '/'), or empty";
    let name = std::str::from_utf8(name).map_err(|_| WHY)?;
    if name.contains(['/', '\0']) || name == "." || name == ".." || name.len() > 200 {
        return Err(WHY);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn an_era_file_name_is_a_plain_name_in_dir_or_empty() {
        let cases: &[(&[u8], bool)] = &[
            (b"lockmod-fencing-era", true),
            (b"", true),
            (b".hidden", true),
            (b"a/b", false),
            (b"/etc/passwd", false),
            (b"..", false),
            (b".", false),
            (b"nul\0", false),
            (b"\xff", false),
        ];
        for &(name, ok) in cases {
            assert_eq!(era_file_name(name).is_ok(), ok, "{:?}", String::from_utf8_lossy(name));
        }
        assert!(era_file_name(&[b'a'; 201]).is_err());
    }
}
