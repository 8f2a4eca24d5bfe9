//! The commands of each lock kind and how to read their replies: pure data, no I/O.
//!
//! The commands are the module's (docs/commands.md): an acquire replies nil when granted and
//! an integer when not; with `TOKEN`, `[-1, token]` when granted and `[ttl, -1]` when not.

use redis::{Cmd, Value};

use crate::error::Error;
use crate::reply;

/// Which hold count of an owner a lock object moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Side {
    /// The reentrant and the fair lock.
    Main,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
}

/// One lock kind: its commands.
#[derive(Debug)]
pub(crate) struct Kind {
    pub acquire: &'static str,
    pub unlock: &'static str,
    pub renew: &'static str,
    pub holds: &'static str,
    pub force: &'static str,
    pub side: Side,
    pub fenceable: bool,
    pub fair: bool,
}

pub(crate) static REENTRANT: Kind = Kind {
    acquire: "LOCK.ACQUIRE",
    unlock: "LOCK.UNLOCK",
    renew: "LOCK.RENEW",
    holds: "LOCK.HOLDS",
    force: "LOCK.FORCEUNLOCK",
    side: Side::Main,
    fenceable: true,
    fair: false,
};
pub(crate) static FAIR: Kind = Kind {
    acquire: "FAIRLOCK.ACQUIRE",
    unlock: "FAIRLOCK.UNLOCK",
    renew: "FAIRLOCK.RENEW",
    holds: "FAIRLOCK.HOLDS",
    force: "FAIRLOCK.FORCEUNLOCK",
    side: Side::Main,
    fenceable: true,
    fair: true,
};
pub(crate) static READ: Kind = Kind {
    acquire: "RWLOCK.RLOCK",
    unlock: "RWLOCK.UNLOCK",
    renew: "RWLOCK.RENEW",
    holds: "RWLOCK.HOLDS",
    force: "RWLOCK.FORCEUNLOCK",
    side: Side::Read,
    fenceable: false,
    fair: false,
};
pub(crate) static WRITE: Kind = Kind { acquire: "RWLOCK.WLOCK", side: Side::Write, fenceable: true, ..READ };

impl Kind {
    /// `READ`/`WRITE` for a read-write lock's unlock and force unlock.
    fn side_arg(&self) -> Option<&'static str> {
        match self.side {
            Side::Main => None,
            Side::Read => Some("READ"),
            Side::Write => Some("WRITE"),
        }
    }

    /// The acquire: `BLOCK ms` to wait in the server (0: no limit), else the immediate form
    /// (for the fair lock `NOQUEUE`, Redisson's `tryLock()`, which queues nothing).
    pub fn acquire_cmd(
        &self,
        name: &str,
        owner: &str,
        lease_ms: u64,
        wait_ms: u64,
        block_ms: Option<u64>,
        token: bool,
    ) -> Cmd {
        let mut c = redis::cmd(self.acquire);
        c.arg(name).arg(owner).arg(lease_ms);
        if self.fair {
            c.arg(wait_ms);
        }
        match block_ms {
            Some(ms) => {
                c.arg("BLOCK").arg(ms);
            }
            None if self.fair => {
                c.arg("NOQUEUE");
            }
            None => {}
        }
        if token {
            c.arg("TOKEN");
        }
        c
    }

    /// The unlock, always with a `LATCH`, so that a re-sent unlock is answered, not applied twice.
    pub fn unlock_cmd(&self, name: &str, owner: &str, lease_ms: u64, request_id: &str, latch_ms: u64) -> Cmd {
        let mut c = redis::cmd(self.unlock);
        c.arg(name).arg(owner);
        if let Some(s) = self.side_arg() {
            c.arg(s);
        }
        c.arg(lease_ms).arg("LATCH").arg(request_id).arg(latch_ms);
        c
    }

    pub fn holds_cmd(&self, name: &str, owner: &str) -> Cmd {
        let mut c = redis::cmd(self.holds);
        c.arg(name).arg(owner);
        c
    }

    /// The owner's hold count on this side (`RWLOCK.HOLDS` replies `[reads, writes]`).
    pub fn parse_holds(&self, v: &Value) -> Result<i64, Error> {
        match self.side {
            Side::Main => reply::int(v),
            Side::Read | Side::Write => {
                let items = reply::items(v)?;
                let i = usize::from(self.side == Side::Write);
                items.get(i).map(reply::int).unwrap_or_else(|| reply::int(&Value::Nil))
            }
        }
    }

    pub fn renew_cmd(&self, name: &str, owner: &str, lease_ms: u64) -> Cmd {
        let mut c = redis::cmd(self.renew);
        c.arg(name).arg(owner).arg(lease_ms);
        c
    }

    pub fn force_cmd(&self, name: &str) -> Cmd {
        let mut c = redis::cmd(self.force);
        c.arg(name);
        if let Some(s) = self.side_arg() {
            c.arg(s);
        }
        c
    }

    /// Redisson's `isLocked()`: the key exists (read-write: it is in this side's mode).
    pub fn locked_cmd(&self, name: &str) -> Cmd {
        match self.side {
            Side::Main => {
                let mut c = redis::cmd("EXISTS");
                c.arg(name);
                c
            }
            _ => {
                let mut c = redis::cmd("HGET");
                c.arg(name).arg("mode");
                c
            }
        }
    }

    pub fn parse_locked(&self, v: &Value) -> Result<bool, Error> {
        match self.side {
            Side::Main => Ok(reply::int(v)? == 1),
            Side::Read => Ok(reply::opt_text(v)?.as_deref() == Some("read")),
            Side::Write => Ok(reply::opt_text(v)?.as_deref() == Some("write")),
        }
    }
}

/// `(granted, fencing token)` from an acquire's reply.
pub(crate) fn parse_acquire(v: &Value, token: bool) -> Result<(bool, Option<u64>), Error> {
    if !token {
        return Ok((matches!(v, Value::Nil), None));
    }
    let items = reply::items(v)?;
    let first = items.first().map(reply::int).unwrap_or_else(|| reply::int(&Value::Nil))?;
    let second = items.get(1).map(reply::int).unwrap_or_else(|| reply::int(&Value::Nil))?;
    Ok(if first == -1 { (true, u64::try_from(second).ok()) } else { (false, None) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(c: &Cmd) -> Vec<String> {
        c.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                redis::Arg::Cursor => "<cursor>".into(),
                _ => "<other>".into(),
            })
            .collect()
    }

    #[rustfmt::skip]
    #[test]
    fn acquire_commands_are_the_modules() {
        let cases: &[(&Kind, Option<u64>, bool, &str)] = &[
            (&REENTRANT, None,     false, "LOCK.ACQUIRE n o 100"),
            (&REENTRANT, Some(0),  true,  "LOCK.ACQUIRE n o 100 BLOCK 0 TOKEN"),
            (&FAIR,      None,     false, "FAIRLOCK.ACQUIRE n o 100 300 NOQUEUE"),
            (&FAIR,      Some(50), false, "FAIRLOCK.ACQUIRE n o 100 300 BLOCK 50"),
            (&READ,      Some(5),  false, "RWLOCK.RLOCK n o 100 BLOCK 5"),
            (&WRITE,     None,     true,  "RWLOCK.WLOCK n o 100 TOKEN"),
        ];
        for (kind, block, token, want) in cases {
            assert_eq!(words(&kind.acquire_cmd("n", "o", 100, 300, *block, *token)).join(" "), *want);
        }
    }

    #[test]
    fn unlocks_carry_a_latch_and_read_write_ones_their_side() {
        assert_eq!(words(&REENTRANT.unlock_cmd("n", "o", 9, "r", 60)).join(" "), "LOCK.UNLOCK n o 9 LATCH r 60");
        assert_eq!(words(&WRITE.unlock_cmd("n", "o", 9, "r", 60)).join(" "), "RWLOCK.UNLOCK n o WRITE 9 LATCH r 60");
        assert_eq!(words(&READ.force_cmd("n")).join(" "), "RWLOCK.FORCEUNLOCK n READ");
    }

    #[test]
    fn replies_are_read_as_redisson_does() {
        assert_eq!(parse_acquire(&Value::Nil, false).ok(), Some((true, None)));
        assert_eq!(parse_acquire(&Value::Int(30000), false).ok(), Some((false, None)));
        let granted = Value::Array(vec![Value::Int(-1), Value::Int(7)]);
        assert_eq!(parse_acquire(&granted, true).ok(), Some((true, Some(7))));
        let refused = Value::Array(vec![Value::Int(200), Value::Int(-1)]);
        assert_eq!(parse_acquire(&refused, true).ok(), Some((false, None)));
        let holds = Value::Array(vec![Value::Int(2), Value::Int(1)]);
        assert_eq!(READ.parse_holds(&holds).ok(), Some(2));
        assert_eq!(WRITE.parse_holds(&holds).ok(), Some(1));
    }
}
