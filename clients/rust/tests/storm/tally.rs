//! The storm's counts, per side (the Rust tasks, the Python threads, the Python asyncio tasks,
//! the Node workers) and per event, and the table they are printed as.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The sides of the storm, in the table's order.
pub const SIDES: [&str; 4] = ["rust", "py-sync", "py-asyncio", "node"];

/// The table's columns: the sides, and the nemesis' own holds.
const COLUMNS: [&str; 5] = ["rust", "py-sync", "py-asyncio", "node", "nemesis"];

/// What the nemesis does to a client it saw parked in `LOCK.ACQUIRE`, as counted (those that
/// hit: the client was there; by then it may have been granted and sent its next request).
pub const ACTIONS: [&str; 3] = ["nemesis_kill", "nemesis_unblock_error", "nemesis_unblock_timeout"];

/// The rows of the table, with what each counts.
pub const ROWS: [(&str, &str); 16] = [
    ("grants", "critical sections entered"),
    ("fenced", "  of them with a fencing token"),
    ("drops", "  released by dropping the guard"),
    ("timeouts", "acquires that ran out of time"),
    ("cancels", "acquires cancelled by the caller"),
    ("unblocked", "acquires that got UNBLOCKED"),
    ("lost", "waits killed, not granted, no time left"),
    ("settles", "lost replies settled (*.HOLDS)"),
    ("settled_granted", "  of them: granted after all"),
    ("cancel_give_backs", "cancelled waits' grants given back"),
    ("cancel_settles", "cancelled waits settled by asking"),
    ("cancel_lost", "cancelled waits also killed (not granted)"),
    ("nemesis_kill", "nemesis: CLIENT KILL ID"),
    ("nemesis_unblock_error", "nemesis: CLIENT UNBLOCK ERROR"),
    ("nemesis_unblock_timeout", "nemesis: CLIENT UNBLOCK TIMEOUT"),
    ("raced", "  struck in the transaction of an unlock"),
];

#[derive(Debug, Default)]
pub struct Tally(Mutex<BTreeMap<(String, String), u64>>);

impl Tally {
    pub fn add(&self, side: &str, what: &str, n: u64) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((side.to_string(), what.to_string())).or_default() += n;
    }

    pub fn get(&self, side: &str, what: &str) -> u64 {
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&(side.to_string(), what.to_string())).copied().unwrap_or(0)
    }

    /// Adds a worker process' `counts k=v ...` line (from its stdout).
    pub fn add_line(&self, side: &str, stdout: &str) -> Result<(), String> {
        let line = stdout.lines().find_map(|l| l.strip_prefix("counts")).ok_or(format!("{side} printed no counts"))?;
        for kv in line.split_whitespace() {
            let (k, v) = kv.split_once('=').ok_or(format!("{side}: bad count {kv:?}"))?;
            self.add(side, k, v.parse().map_err(|_| format!("{side}: bad count {kv:?}"))?);
        }
        Ok(())
    }

    /// The table: one row per event, one column per side.
    pub fn table(&self) -> String {
        let mut out = format!("{:<58}", "");
        for side in COLUMNS {
            out += &format!("{side:>11}");
        }
        out.push('\n');
        for (what, label) in ROWS {
            out += &format!("{:<58}", format!("{label} ({what})"));
            for side in COLUMNS {
                out += &format!("{:>11}", self.get(side, what));
            }
            out.push('\n');
        }
        out
    }
}
