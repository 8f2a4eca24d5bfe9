//! The errors of every call of the library, as one typed enum.
//!
//! "Not acquired within the timeout" is not an error: an acquire returns `Ok(None)` then, as
//! the module replies a TTL and Redisson's `tryLock` returns `false`.

use std::time::Duration;

/// What went wrong. Match on the variant; each one says what the caller may assume.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server refused the command with an error reply (`ERR ...`, `WRONGTYPE ...`,
    /// `NOPERM ...`), or a connection could not be made before anything was sent: nothing
    /// changed.
    #[error(transparent)]
    Redis(#[from] redis::RedisError),

    /// The lock was held and is not any more: a renewal found it gone, its lease ran out before
    /// it was renewed or released, or it was force-unlocked. What it protected may have been
    /// changed by another holder meanwhile. Nothing is sent to release it.
    #[error("lock {name:?} was lost while held (lease ran out, or force-unlocked)")]
    LockLost {
        /// The lock's name.
        name: String,
    },

    /// A release of something the caller does not hold: permit ids unknown, released or
    /// expired (Redisson's `IllegalMonitorStateException`).
    #[error("{name:?}: {what} not held")]
    NotHeld {
        /// The lock's or semaphore's name.
        name: String,
        /// What was not held.
        what: String,
    },

    /// A reply was lost (a timeout, a broken connection) and the outcome could not be settled
    /// by asking the server within the client's `resolve_timeout`. For a lock, a grant it may
    /// have made is not renewed and frees itself within its lease; a semaphore's permits have
    /// no owner, so a lost reply of a command that changes something is never settled by
    /// asking: this error says the command may or may not have run.
    #[error("{command} {name:?}: reply lost, outcome unknown ({cause})")]
    StateUnknown {
        /// The command whose reply was lost.
        command: String,
        /// The lock's or synchronizer's name.
        name: String,
        /// What happened to the reply.
        cause: String,
    },

    /// A grant, release or other change was applied on the primary but no replica acknowledged
    /// it within the sync timeout (Redisson's `checkLockSyncedSlaves`, `NoSyncedSlavesException`):
    /// a failover now could lose it. A grant (a lock's, or a semaphore's permits) is given back
    /// before this is returned; a release or other change stays applied (and is recorded).
    #[error("{command} {name:?}: {synced} of {replicas} replica(s) acknowledged it within {timeout:?}")]
    NoSyncedReplicas {
        /// The command that was not synced.
        command: String,
        /// The lock's or semaphore's name.
        name: String,
        /// Replicas the primary had (`online` in its `INFO replication`).
        replicas: i64,
        /// Replicas that acknowledged it.
        synced: i64,
        /// How long the library waited (`WAIT`'s timeout).
        timeout: Duration,
    },

    /// An argument the module would refuse (a zero lease, an empty name, a read lock with a
    /// fencing token): nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The [`LockClient`](crate::LockClient) was closed.
    #[error("the lock client is closed")]
    Closed,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn lost(name: &str) -> Error {
        Error::LockLost { name: name.to_string() }
    }

    pub(crate) fn unknown(command: &str, name: &str, cause: impl std::fmt::Display) -> Error {
        Error::StateUnknown { command: command.to_string(), name: name.to_string(), cause: cause.to_string() }
    }

    /// True for [`Error::LockLost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }
}
