//! What every part of the benchmark gets: [`Bench`] (the two servers, the loaded scripts, the
//! report being written), [`strs`], and the `progress!` line.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::report::Report;
use crate::server::{self, Server};

/// A command line as owned strings.
pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
/// Everything a part needs: the two servers, the loaded scripts, the report being written.
pub struct Bench {
    pub quick: bool,
    /// The server with the module loaded.
    pub m: Server,
    /// The server without it (the Lua reference and the module-free SET NX PX baseline).
    pub p: Server,
    pub lua_dir: PathBuf,
    /// Script file stem -> SHA1, loaded on both servers.
    pub shas: HashMap<String, String>,
    pub report: Report,
    pub out: PathBuf,
    /// The server binary, for parts that start servers of their own.
    pub binary: String,
}

impl Bench {
    /// The SHA of a Lua reference script, or None (with a loud line) when the file is missing.
    pub fn sha(&self, stem: &str) -> Option<String> {
        self.shas.get(stem).cloned()
    }

    /// Whether the module registers `cmd`.
    pub fn has(&self, cmd: &str) -> bool {
        self.m.conn().map(|mut c| server::has_command(&mut c, cmd)).unwrap_or(false)
    }

    /// Whether a row can run: its command exists and its script does; otherwise it is skipped.
    pub fn available(&mut self, what: &str, cmd: &str, scripts: &[&str]) -> bool {
        if !self.has(cmd) {
            self.report.skip(format!("{what}: the module has no {cmd}"));
            return false;
        }
        for s in scripts {
            if self.sha(s).is_none() {
                self.report.skip(format!("{what}: no bench/lua/{s}.lua"));
                return false;
            }
        }
        true
    }

    /// Rounds of alternating chunks: more in the full run, one or two in the quick one.
    pub fn rounds(&self, full: usize) -> usize {
        if self.quick {
            2
        } else {
            full
        }
    }

    /// Chunk sizes and counts: `full` in the full run, `quick` in the quick one.
    pub fn size(&self, full: usize, quick: usize) -> usize {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// Progress line on stderr.
#[macro_export]
macro_rules! progress {
    ($($t:tt)*) => { eprintln!("bench: {}", format!($($t)*)) };
}
