//! Waiting for clients parked with BLOCK: the server's own count of blocked clients, and the
//! module's counters of parks and timeouts (which a client whose short BLOCK already ran out
//! still shows).

use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::{call, Server, Value};

/// Starts `cmd` on a connection of its own (a client that may park), returning its reply.
pub fn spawn_call(s: &Server, cmd: &[&str]) -> JoinHandle<Result<Value, String>> {
    let mut c = s.conn();
    let args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || call(&mut c, &args.iter().map(String::as_str).collect::<Vec<_>>()))
}

/// `blocked_clients` from `INFO clients`.
pub fn blocked_clients(c: &mut redis::Connection) -> usize {
    let info: String = redis::cmd("INFO").arg("clients").query(c).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(usize::MAX)
}

/// Every integer field of `INFO lockmod`, by its name without `lockmod_`.
pub fn lockmod_ints(c: &mut redis::Connection) -> std::collections::BTreeMap<String, i64> {
    let text: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    text.lines()
        .filter_map(|l| l.strip_prefix("lockmod_"))
        .filter_map(|l| l.split_once(':'))
        .filter_map(|(k, v)| v.trim().parse().ok().map(|v| (k.to_string(), v)))
        .collect()
}

/// `lockmod_<field>` from `INFO lockmod`.
pub fn lockmod_field(c: &mut redis::Connection, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO");
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("lockmod_{field}:")));
    line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no integer lockmod_{field} in {info}"))
}

/// Waits until the server reports `n` blocked clients, or panics after 5 s.
pub fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = blocked_clients(c);
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "blocked_clients stayed {now}, wanted {n}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the server reports `n` blocked clients, as [`wait_blocked`], unless `short` (a
/// client with a short BLOCK, one of the `n`) replies first: its BLOCK ran out before the
/// others were parked beside it, as a stalled test thread can make it happen. True once all
/// `n` were seen parked at once; false if `short` replied first (the caller starts again).
pub fn parked_beside<T>(c: &mut redis::Connection, n: usize, short: &JoinHandle<T>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = blocked_clients(c);
        if now == n {
            return true;
        }
        if short.is_finished() {
            return false;
        }
        assert!(Instant::now() < deadline, "blocked_clients stayed {now}, wanted {n}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `case` (which starts its own server) until it returns `Some`, at most 5 times: for a
/// case whose short BLOCK must outlast parking others beside it ([`parked_beside`]), and which
/// returns `None` where a stalled test thread let the BLOCK run out first.
pub fn until_parked_beside<T>(mut case: impl FnMut() -> Option<T>) -> T {
    (0..5).find_map(|_| case()).expect("the short BLOCK ran out before the case was set up, 5 times: too loaded")
}

/// A field of `INFO lockmod` (without its `lockmod_` prefix), e.g. `blocked_total`.
pub fn lockmod_stat(c: &mut redis::Connection, field: &str) -> i64 {
    let text: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    let line = text.lines().find_map(|l| l.strip_prefix(&format!("lockmod_{field}:")));
    line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no lockmod_{field} in INFO"))
}
