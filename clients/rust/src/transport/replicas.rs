//! Replica sync after grants, renewals and releases (Redisson's `checkLockSyncedSlaves`):
//! `WAIT <replicas the primary has> <timeout>` (and `WAITAOF 1 0 <timeout>` where the primary
//! has the AOF on and the command), pipelined after the request so that it costs no round trip.
//!
//! The primary's replica count and AOF setting are read with `INFO` when the library first
//! talks to a node and again, in the background, when the last reading is older than
//! [`STALE`]: a primary without replicas gets no `WAIT` at all.

use std::sync::Mutex;
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;

use crate::reply;

/// How old a reading of the replica count may be before it is read again.
const STALE: Duration = Duration::from_secs(1);

/// What a node's `INFO` said.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Durability {
    pub replicas: i64,
    /// `WAITAOF` exists (Redis 7.2+, Valkey 8+) and the AOF is on.
    pub aof: bool,
}

#[derive(Debug, Default)]
pub(crate) struct ReplicaState {
    seen: Mutex<Option<(Durability, Instant)>>,
    refreshing: Mutex<bool>,
}

/// What the pipelined sync commands replied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Synced {
    pub expected: i64,
    pub acked: i64,
}

impl ReplicaState {
    /// The last reading, and whether it should be read again.
    pub fn get(&self) -> (Option<Durability>, bool) {
        let seen = self.seen.lock().map(|s| *s).unwrap_or(None);
        match seen {
            None => (None, true),
            Some((d, at)) => (Some(d), at.elapsed() > STALE),
        }
    }

    pub fn set(&self, d: Durability) {
        if let Ok(mut s) = self.seen.lock() {
            *s = Some((d, Instant::now()));
        }
    }

    /// True for the one caller that should refresh now.
    pub fn claim_refresh(&self) -> bool {
        self.refreshing.lock().map(|mut r| !std::mem::replace(&mut *r, true)).unwrap_or(false)
    }

    pub fn refreshed(&self) {
        if let Ok(mut r) = self.refreshing.lock() {
            *r = false;
        }
    }
}

/// What `INFO replication persistence server` says: `connected_slaves`, `aof_enabled`, and
/// whether the server has `WAITAOF` (Redis 7.2, Valkey 8; Valkey reports redis_version 7.2.4).
pub(crate) fn parse_durability(text: &str) -> Durability {
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':'))).map(|s| s.trim().to_string())
    };
    let replicas = field("connected_slaves").and_then(|s| s.parse().ok()).unwrap_or(0);
    let aof_on = field("aof_enabled").as_deref() == Some("1");
    let version = |f: &str| field(f).map(|v| v.split('.').filter_map(|p| p.parse::<u32>().ok()).collect::<Vec<_>>());
    let has_waitaof = match (version("valkey_version"), version("redis_version")) {
        (Some(v), _) => v >= vec![8],
        (None, Some(v)) => v >= vec![7, 2],
        _ => false,
    };
    Durability { replicas, aof: aof_on && has_waitaof }
}

/// The commands pipelined after a request to wait for its durability.
pub(crate) fn sync_cmds(d: Durability, timeout: Duration) -> Vec<Cmd> {
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
    let mut cmds = Vec::new();
    if d.replicas > 0 {
        cmds.push(redis::cmd("WAIT").arg(d.replicas).arg(ms).clone());
    }
    if d.aof {
        cmds.push(redis::cmd("WAITAOF").arg(1).arg(0).arg(ms).clone());
    }
    cmds
}

/// Reads the replies of [`sync_cmds`] (in that order) into what was expected and acknowledged.
pub(crate) fn parse_synced(d: Durability, replies: &[Value]) -> Option<Synced> {
    if d.replicas > 0 {
        let acked = replies.first().and_then(|v| reply::int(v).ok()).unwrap_or(0);
        return Some(Synced { expected: d.replicas, acked });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replica_count_and_waitaof_are_read_from_info() {
        let d = parse_durability("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n# Persistence\r\naof_enabled:1\r\nredis_version:7.2.4\r\n");
        assert_eq!((d.replicas, d.aof), (2, true));
        let old = parse_durability("connected_slaves:0\r\naof_enabled:1\r\nredis_version:7.0.15\r\n");
        assert_eq!((old.replicas, old.aof), (0, false), "no WAITAOF before 7.2");
        let cmds = sync_cmds(d, std::time::Duration::from_secs(1));
        assert_eq!(cmds.len(), 2);
        assert!(
            sync_cmds(Durability::default(), std::time::Duration::from_secs(1)).is_empty(),
            "no replicas: nothing pipelined"
        );
    }
}
