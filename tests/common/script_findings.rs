//! What a states run of Redisson's bodies found (`tests/redisson/redisson_sync_states.rs`,
//! `tests/redisson/redisson_ratelimiter_states.rs`): for each call, whether the native side
//! answered as the Lua, how it ran (natively, or as Lua under which `redisson_lua_<cause>`), and
//! whether it was ordinary use, which must run natively. [`Findings::report`] prints which (body,
//! state) pairs went to Lua and why, and fails on any difference, miscount or ordinary call left to
//! Lua.

use std::collections::BTreeMap;

use super::redisson::{info, Raw};

pub const CAUSES: [&str; 8] =
    ["not_accelerated", "arguments", "server_state", "acl", "script_cache", "module_rule", "script_state", "error"];

/// `redisson_native_total` and the `redisson_lua_<cause>` counters.
pub type Counts = (u64, [u64; 8]);

pub fn counters(c: &mut redis::Connection) -> Counts {
    let m = info(c, "lockmod");
    let get = |f: &str| m.get(&format!("lockmod_redisson_{f}")).and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut causes = [0; 8];
    for (i, c) in CAUSES.iter().enumerate() {
        causes[i] = get(&format!("lua_{c}"));
    }
    (get("native_total"), causes)
}

/// One call: what it was, its replies, the keyspace difference after it, whether it was
/// ordinary use.
pub struct Case<'a> {
    /// The call and its state, for the messages.
    pub what: String,
    /// The body (SHA1 prefix and role) and the state alone, for the summary of calls left to Lua.
    pub body: String,
    pub state: String,
    pub lua: &'a Raw,
    pub native: &'a Raw,
    /// The replies matched (within whatever tolerance the run allows).
    pub same: bool,
    pub keyspace: Option<String>,
    pub ordinary: bool,
}

#[derive(Default)]
pub struct Findings {
    pub cases: usize,
    pub native: usize,
    pub ordinary: usize,
    pub ordinary_native: usize,
    pub differences: Vec<String>,
    pub miscounted: Vec<String>,
    pub not_native_in_ordinary_use: Vec<String>,
    /// (body, cause) -> the states it went to Lua on.
    pub left: BTreeMap<(String, &'static str), Vec<String>>,
}

impl Findings {
    /// Records one call, with the counters before and after it.
    pub fn note(&mut self, c: Case, before: Counts, after: Counts) {
        let native = after.0 > before.0;
        self.cases += 1;
        self.native += usize::from(native);
        if !c.same {
            self.differences.push(format!("{}: lua {:?}, native {:?}", c.what, c.lua, c.native));
        } else if let Some(d) = c.keyspace {
            self.differences.push(format!("{}: {d}", c.what));
        }
        // Counted once: natively, or under the one cause that sent it to Lua.
        let moved: Vec<&str> =
            CAUSES.iter().zip(after.1.iter().zip(&before.1)).filter(|(_, (a, b))| a > b).map(|(c, _)| *c).collect();
        let once = if native { moved.is_empty() && after.0 == before.0 + 1 } else { moved.len() == 1 };
        if !once {
            self.miscounted.push(format!("{}: native {native}, causes {moved:?}", c.what));
        }
        if !native {
            let cause = moved.first().copied().unwrap_or("uncounted");
            self.left.entry((c.body, cause)).or_default().push(c.state);
        }
        if c.ordinary {
            self.ordinary += 1;
            self.ordinary_native += usize::from(native);
            if !native {
                self.not_native_in_ordinary_use.push(c.what);
            }
        }
    }

    /// Prints the summary; fails on any difference, miscount or ordinary call left to Lua, or
    /// when fewer than `min_cases` ran (unless the run was narrowed by `$only_var`).
    pub fn report(&self, took: std::time::Duration, min_cases: usize, only_var: &str) {
        eprintln!(
            "{} calls in {:.1} s, {} ran natively; ordinary use: {} of {} native; left to Lua:",
            self.cases,
            took.as_secs_f64(),
            self.native,
            self.ordinary_native,
            self.ordinary
        );
        for ((body, cause), states) in &self.left {
            let shown: Vec<&str> = states.iter().take(6).map(String::as_str).collect();
            let more = if states.len() > 6 { format!(", ... ({} in all)", states.len()) } else { String::new() };
            eprintln!("  {body}: {cause}: {}{more}", shown.join(", "));
        }
        assert!(self.cases > min_cases || std::env::var_os(only_var).is_some(), "{} calls", self.cases);
        let mut failures = Vec::new();
        for (what, list) in [
            ("calls answered unlike the Lua", &self.differences),
            ("calls not counted once (natively or under one cause)", &self.miscounted),
            ("calls of ordinary use left to Lua", &self.not_native_in_ordinary_use),
        ] {
            if !list.is_empty() {
                failures.push(format!("{} {what}:\n  {}", list.len(), list.join("\n  ")));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
