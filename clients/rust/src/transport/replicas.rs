//! Replicas synced (docs/clients.md, "Replicas synced (the contract)"), as Redisson's
//! `checkLockSyncedSlaves`: what the transport sends after a write of a lock or a semaphore,
//! and how it reads it. No I/O here.
//!
//! A write whose request asks for it is followed, on the same connection and in the same
//! pipeline, by `WAIT <replicas> <ms>`, or `WAITAOF 1 <replicas> <ms>` when the primary has an
//! AOF and the command (`redis_version` 7.2 or later: Redis 7.2+, every Valkey). The replica
//! count is the number of replicas the primary lists as `online` in `INFO replication`, learned
//! per node and kept for [`INFO_TTL`]: when it is stale, `INFO` goes in front of the command in
//! the same pipeline, so no call pays a round trip of its own for it. With no replicas nothing
//! is sent (not even `WAITAOF` for the local AOF alone).

use std::sync::Mutex;
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;

use crate::reply;

/// How long a node's replica count is trusted.
pub(crate) const INFO_TTL: Duration = Duration::from_secs(1);

/// What a primary told about its replicas and its AOF.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Durability {
    /// Replicas listed `state=online` (one still loading its first copy acknowledges nothing).
    pub online: i64,
    pub aof: bool,
    pub waitaof: bool,
}

/// One node's last reading, trusted until `INFO_TTL` after it was made.
#[derive(Debug, Default)]
pub(crate) struct ReplicaState {
    seen: Mutex<Option<(Durability, Instant)>>,
}

/// What the wait after a write said.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Synced {
    /// Replicas the primary had.
    pub expected: i64,
    /// Replicas that acknowledged (0 when the wait itself failed).
    pub acked: i64,
}

impl ReplicaState {
    /// The reading while fresh, else `None` (read `INFO` again).
    pub fn fresh(&self) -> Option<Durability> {
        let seen = self.seen.lock().map(|s| *s).unwrap_or(None)?;
        (seen.1.elapsed() < INFO_TTL).then_some(seen.0)
    }

    pub fn set(&self, d: Durability) {
        if let Ok(mut s) = self.seen.lock() {
            *s = Some((d, Instant::now()));
        }
    }

    /// Forgets the reading (a wait answered otherwise than counted): `INFO` again next time.
    pub fn drop_reading(&self) {
        if let Ok(mut s) = self.seen.lock() {
            *s = None;
        }
    }
}

/// The `INFO` that goes in front of a write when the count is stale.
pub(crate) fn info_cmd() -> Cmd {
    let mut c = redis::cmd("INFO");
    c.arg("server").arg("replication").arg("persistence");
    c
}

/// A `Durability` from `INFO server replication persistence`.
pub(crate) fn parse_durability(text: &str) -> Durability {
    let mut online = 0;
    let mut aof = false;
    let mut version = (0u32, 0u32);
    for line in text.lines() {
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        if key.strip_prefix("slave").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
            online += i64::from(value.contains("state=online"));
        } else if key == "aof_enabled" {
            aof = value.trim() == "1";
        } else if key == "redis_version" {
            // Valkey forked from 7.2.4 and reports that as its redis_version.
            let mut parts = value.trim().split('.').map(|p| p.parse().unwrap_or(0));
            version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        }
    }
    Durability { online, aof, waitaof: version >= (7, 2) }
}

/// The wait after a write, or `None` when there is no replica to wait for.
pub(crate) fn wait_cmd(d: Durability, timeout: Duration) -> Option<Cmd> {
    if d.online == 0 {
        return None;
    }
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
    let mut c;
    if d.aof && d.waitaof {
        c = redis::cmd("WAITAOF");
        c.arg(1).arg(d.online).arg(ms);
    } else {
        c = redis::cmd("WAIT");
        c.arg(d.online).arg(ms);
    }
    Some(c)
}

/// How many replicas acknowledged, from the wait's reply (`WAITAOF` replies `[local,
/// replicas]`); an error reply counts none.
pub(crate) fn acked(d: Durability, v: &Value) -> i64 {
    let n = if d.aof && d.waitaof {
        reply::items(v).ok().and_then(|i| i.get(1)).map(reply::int)
    } else {
        Some(reply::int(v))
    };
    n.and_then(Result::ok).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Server\r\nredis_version:7.2.4\r\n# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
        slave0:ip=127.0.0.1,port=1,state=online,offset=1,lag=0\r\n\
        slave1:ip=127.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0\r\n# Persistence\r\naof_enabled:1\r\n";

    #[test]
    fn only_online_replicas_count_and_waitaof_comes_with_7_2() {
        assert_eq!(parse_durability(INFO), Durability { online: 1, aof: true, waitaof: true });
        let old = parse_durability("redis_version:7.0.15\r\nslave0:state=online\r\naof_enabled:1\r\n");
        assert_eq!(old, Durability { online: 1, aof: true, waitaof: false });
    }

    fn words(c: &Cmd) -> String {
        c.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_wait_is_waitaof_with_an_aof_and_nothing_without_replicas() {
        let t = Duration::from_secs(1);
        let d = parse_durability(INFO);
        assert_eq!(wait_cmd(d, t).map(|c| words(&c)).as_deref(), Some("WAITAOF 1 1 1000"));
        let plain = Durability { aof: false, ..d };
        assert_eq!(wait_cmd(plain, t).map(|c| words(&c)).as_deref(), Some("WAIT 1 1000"));
        assert!(wait_cmd(Durability { online: 0, ..d }, t).is_none(), "no replica: nothing, not even WAITAOF");
        assert_eq!(acked(d, &Value::Array(vec![Value::Int(1), Value::Int(1)])), 1);
        assert_eq!(acked(plain, &Value::Int(0)), 0);
    }
}
