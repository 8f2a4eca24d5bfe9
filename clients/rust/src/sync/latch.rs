//! [`CountDownLatch`]: Redisson's `RCountDownLatch` (`COUNTDOWN.*`), a count in the string
//! `name`; every waiter wakes when it reaches zero (the key is then deleted).

use std::sync::Arc;
use std::time::Duration;

use super::{check_name, check_open, wait_args, with_block};
use crate::client::{Core, LockClient};
use crate::detach::detached;
use crate::error::{Error, Result};
use crate::reply;
use crate::transport::{CallError, Request};

/// Redisson's `RCountDownLatch`. Cheap to clone.
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// # let locks = redis_lockmod_client::LockClient::new(redis::Client::open(url)?)?;
/// let latch = locks.count_down_latch("started");
/// latch.try_set_count(1).await?;
/// let waiter = tokio::spawn({
///     let latch = latch.clone();
///     async move { latch.wait(None).await }            // Redisson's await(): parked in the server
/// });
/// assert_eq!(latch.count_down().await?, 0);            // open: every waiter wakes
/// assert!(waiter.await??);
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    client: LockClient,
    name: Arc<str>,
}

impl LockClient {
    /// A count-down latch (Redisson's `RCountDownLatch`).
    pub fn count_down_latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch { client: self.clone(), name: name.into() }
    }
}

impl CountDownLatch {
    fn core(&self) -> &Arc<Core> {
        self.client.core()
    }

    /// The latch's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the count if the latch does not exist yet; true if it was set.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        check_name(&self.name)?;
        let c = redis::cmd("COUNTDOWN.TRYSETCOUNT").arg(&*self.name).arg(count).clone();
        Ok(reply::int(&self.core().transport.once(&self.name, c, self.core().command_timeout).await?)? == 1)
    }

    /// Decrements the count; returns the count left (at zero the latch opens).
    pub async fn count_down(&self) -> Result<i64> {
        check_name(&self.name)?;
        let c = redis::cmd("COUNTDOWN.DECR").arg(&*self.name).clone();
        reply::int(&self.core().transport.once(&self.name, c, self.core().command_timeout).await?)
    }

    /// The count now (0 when the latch does not exist).
    pub async fn count(&self) -> Result<i64> {
        let c = redis::cmd("COUNTDOWN.COUNT").arg(&*self.name).clone();
        reply::int(&self.core().transport.read(&self.name, c, self.core().command_timeout).await?)
    }

    /// Redisson's `await`: waits in the server until the count is zero, at most `timeout`
    /// (`None`, or longer than the server can express: no limit; zero: checks once). True once it is zero (or the latch does not
    /// exist), false when the time ran out. Dropping this future ends the wait in the server.
    pub async fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        check_open(&self.name, self.core())?;
        let latch = self.clone();
        detached(self.core(), &self.name, move |cancel| async move {
            let core = latch.core().clone();
            let (block, t) = wait_args(&core, timeout);
            let cmds = [with_block(redis::cmd("COUNTDOWN.AWAIT").arg(&*latch.name).clone(), block)];
            let req = Request { key: &latch.name, cmds: &cmds, timeout: t, cancel: Some(&cancel), sync: None };
            match core.transport.call(req).await {
                Ok(r) => Ok(r.values.first().and_then(|v| reply::int(v).ok()) == Some(1)),
                Err(CallError::Failed(e)) => Err(e),
                // Waiting changes nothing: a lost reply is an error to retry, not an unknown state.
                Err(CallError::Lost(l)) => Err(Error::unknown("COUNTDOWN.AWAIT", &latch.name, l.cause)),
            }
        })
        .await
    }
}
