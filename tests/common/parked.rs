//! Waiting for clients parked with BLOCK: the server's own count of blocked clients.

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
