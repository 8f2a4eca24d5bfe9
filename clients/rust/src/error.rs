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

    /// The tokio runtime the client was built on (its background tasks run there) has shut
    /// down, so nothing more can be sent. Build the client on a runtime that outlives its use
    /// (the blocking API has a runtime of its own). A hold taken before is not renewed any
    /// more and frees itself at the end of its lease.
    #[error("the tokio runtime of the lock client has shut down: build the client on a runtime that outlives it")]
    RuntimeShutdown,

    /// A task of the library panicked: a bug (please report it with this message). The call's
    /// outcome is unknown; a hold it may have taken is not renewed and frees itself at the end
    /// of its lease.
    #[error("a task of the lock client panicked ({0}): a bug, please report it")]
    TaskPanicked(String),
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

    /// The error of a task of the client that did not run to its end: the runtime shut down,
    /// or the task panicked.
    pub(crate) fn from_join(e: tokio::task::JoinError) -> Error {
        if e.is_panic() {
            let p = e.into_panic();
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            return Error::TaskPanicked(what);
        }
        Error::RuntimeShutdown
    }

    /// True for [`Error::LockLost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_that_panicked_or_never_ran_to_its_end_gets_its_own_error() {
        let panicked = tokio::spawn(async { panic!("boom") }).await.unwrap_err();
        assert!(matches!(Error::from_join(panicked), Error::TaskPanicked(m) if m == "boom"));
        let dropped = tokio::spawn(std::future::pending::<()>());
        dropped.abort();
        assert!(matches!(Error::from_join(dropped.await.unwrap_err()), Error::RuntimeShutdown));
    }
}
