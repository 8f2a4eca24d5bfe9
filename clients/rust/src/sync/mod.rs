//! Redisson's synchronizers on the module's commands and Redisson's layout, so a Redisson
//! client shares them by name: [`Semaphore`] (`RSemaphore`, `SEMAPHORE.*`),
//! [`PermitExpirableSemaphore`] (`RPermitExpirableSemaphore`, `PSEMAPHORE.*`),
//! [`CountDownLatch`] (`RCountDownLatch`, `COUNTDOWN.*`) and [`RateLimiter`] (`RRateLimiter`,
//! `RATELIMITER.*`). A wait is the server's `BLOCK`, served in arrival order (a waiter for 3
//! permits is not overtaken by a later one for 1).
//!
//! Permits have no owner, so a lost reply cannot be settled by asking the server what the
//! caller holds: a command that changes something is sent once, and a lost reply is
//! [`Error::StateUnknown`](crate::Error) (the permits may or may not have been taken). Reads
//! are asked again.

mod latch;
mod permits;
mod ratelimiter;
mod semaphore;

pub use latch::CountDownLatch;
pub use permits::{PermitExpirableSemaphore, PermitGuard};
pub use ratelimiter::{RateLimiter, RateLimiterConfig, RateType, SetRate};
pub use semaphore::{Semaphore, SemaphoreGuard};

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::client::Core;
use crate::durations::{self, ms};
use crate::error::{Error, Result};
use crate::settle;

/// `(BLOCK ms or None, request timeout)` of a wait: `None` waits without limit (`BLOCK 0`), so
/// does a wait longer than the server can express (`Duration::MAX`); zero tries once, else the
/// server waits that long (the request gets it on top of the command timeout).
pub(crate) fn wait_args(core: &Core, timeout: Option<Duration>) -> (Option<u64>, Option<Duration>) {
    match timeout {
        None => (Some(0), None),
        Some(d) if durations::unlimited(d) => (Some(0), None),
        Some(d) if ms(d) == 0 => (None, Some(core.command_timeout)),
        Some(d) => (Some(ms(d)), Some(d.saturating_add(core.command_timeout))),
    }
}

/// Runs `fut` (the release of a dropped guard's permits) in the background, as a settle of
/// `name`: the client's next request on it waits for the release.
pub(crate) fn release_in_background<F>(core: &Arc<Core>, name: &str, fut: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let settling = core.transport.settles.begin(name);
    core.spawn(settle::as_settle(async move {
        let _settling = settling;
        fut.await;
    }));
}

/// Runs `fut` (a guard's release) in a task of the client, so that dropping the caller's future
/// does not stop it half-way; its result, or the error of a task that did not run to its end.
pub(crate) async fn run_to_end<T, F>(core: &Arc<Core>, fut: F) -> Result<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = Result<T>> + Send + 'static,
{
    core.spawn(fut).await.map_err(Error::from_join)?
}

pub(crate) fn with_block(mut c: redis::Cmd, block: Option<u64>) -> redis::Cmd {
    if let Some(b) = block {
        c.arg("BLOCK").arg(b);
    }
    c
}

pub(crate) fn positive(v: u64, what: &str) -> Result<u64> {
    if v == 0 {
        return Err(Error::InvalidArgument(format!("{what} must be positive")));
    }
    Ok(v)
}

pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument("a name is a non-empty string".into()));
    }
    Ok(())
}

/// A new wait after `close` is refused; a release (or a give-back) still goes out.
pub(crate) fn check_open(name: &str, core: &Core) -> Result<()> {
    check_name(name)?;
    if core.shutdown.is_cancelled() {
        return Err(Error::Closed);
    }
    Ok(())
}

/// A change, sent once, with the replica sync: `Err(NoSyncedReplicas)` (after it was applied)
/// when no replica acknowledged it.
pub(crate) async fn change(core: &Core, name: &str, c: redis::Cmd) -> Result<redis::Value> {
    check_name(name)?;
    let command = crate::transport::command_name(&c);
    let (v, synced) = core.transport.once_synced(name, c, core.command_timeout, core.sync()).await?;
    core.check_synced(&command, name, synced)?;
    Ok(v)
}

/// A wait's reply that did not come: the outcome is unknown (permits have no owner to ask
/// about). Cancelled, its unblock failed (refused, or no connection): the wait's connection is
/// closed, so the server drops the waiter and the module gives back a grant it had not answered
/// yet; one answered in that instant is lost with the connection, which is logged.
pub(crate) fn unanswered(command: &str, name: &str, cancel: &CancellationToken, cause: String) -> Error {
    if cancel.is_cancelled() {
        tracing::warn!(
            "redis-lockmod: a cancelled {command} of {name} got no reply ({cause}): permits answered in that instant are not given back"
        );
    }
    Error::unknown(command, name, cause)
}
