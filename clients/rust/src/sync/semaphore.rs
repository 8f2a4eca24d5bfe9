//! [`Semaphore`]: Redisson's `RSemaphore` (`SEMAPHORE.*`), a count of permits in the string
//! `name`, taken and given back by anyone.

use std::sync::Arc;
use std::time::Duration;

use super::{change, check_open, positive, release_in_background, run_to_end, unanswered, wait_args, with_block};
use crate::client::{Core, LockClient};
use crate::detach::{detached, GiveBack};
use crate::durations::ms;
use crate::error::Result;
use crate::reply;
use crate::transport::{CallError, Request};

/// Redisson's `RSemaphore`. Cheap to clone.
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// # let locks = redis_lockmod_client::LockClient::new(redis::Client::open(url)?)?;
/// let sem = locks.semaphore("pool");
/// sem.try_set_permits(3, None).await?;              // false if it exists already
/// let two = sem.acquire(2).await?;                  // waits in the server (BLOCK)
/// assert_eq!(sem.available_permits().await?, 1);
/// two.release().await?;                             // or drop it: released in the background
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Semaphore {
    client: LockClient,
    name: Arc<str>,
}

impl LockClient {
    /// A semaphore (Redisson's `RSemaphore`).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore { client: self.clone(), name: name.into() }
    }
}

impl Semaphore {
    fn core(&self) -> &Arc<Core> {
        self.client.core()
    }

    /// The semaphore's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn change(&self, c: redis::Cmd) -> Result<redis::Value> {
        change(self.core(), &self.name, c).await
    }

    /// Sets the permits if the semaphore does not exist yet (`lease`: the key expires then).
    /// True if it was set.
    pub async fn try_set_permits(&self, permits: u64, lease: Option<Duration>) -> Result<bool> {
        let mut c = redis::cmd("SEMAPHORE.TRYSETPERMITS");
        c.arg(&*self.name).arg(permits);
        if let Some(l) = lease {
            c.arg("LEASE").arg(positive(ms(l), "lease")?);
        }
        Ok(reply::int(&self.change(c).await?)? == 1)
    }

    /// Takes `permits`, waiting in the server without limit.
    pub async fn acquire(&self, permits: u64) -> Result<SemaphoreGuard> {
        loop {
            if let Some(g) = self.take(permits, None).await? {
                return Ok(g);
            }
        }
    }

    /// Takes `permits`, waiting in the server at most `timeout` (zero: tries once; longer than
    /// the server can express, `Duration::MAX`: no limit); `Ok(None)` if they did not come.
    /// Dropping this future ends the wait in the server; permits granted in that instant are
    /// given back before the client's next request on the semaphore.
    pub async fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<Option<SemaphoreGuard>> {
        self.take(permits, Some(timeout)).await
    }

    async fn take(&self, permits: u64, timeout: Option<Duration>) -> Result<Option<SemaphoreGuard>> {
        check_open(&self.name, self.core())?;
        positive(permits, "permits")?;
        let sem = self.clone();
        detached(self.core(), &self.name, move |cancel| async move {
            let core = sem.core().clone();
            let (block, t) = wait_args(&core, timeout);
            let cmds = [with_block(redis::cmd("SEMAPHORE.ACQUIRE").arg(&*sem.name).arg(permits).clone(), block)];
            let req = Request { key: &sem.name, cmds: &cmds, timeout: t, cancel: Some(&cancel), sync: core.sync() };
            match core.transport.call(req).await {
                Ok(r) if r.values.first().and_then(|v| reply::int(v).ok()) == Some(1) => {
                    if let Err(e) = core.check_synced("SEMAPHORE.ACQUIRE", &sem.name, r.synced) {
                        // No replica has the permits taken: given back first, not waited for.
                        let back = redis::cmd("SEMAPHORE.RELEASE").arg(&*sem.name).arg(permits).clone();
                        let _ = core.transport.once(&sem.name, back, core.command_timeout).await;
                        return Err(e);
                    }
                    Ok(Some(SemaphoreGuard { sem: sem.clone(), permits, done: false }))
                }
                Ok(_) => Ok(None),
                Err(CallError::Failed(e)) => Err(e),
                Err(CallError::Lost(l)) => Err(unanswered("SEMAPHORE.ACQUIRE", &sem.name, &cancel, l.cause)),
            }
        })
        .await
    }

    /// Gives `permits` back, whoever took them; returns the permits available.
    pub async fn release(&self, permits: u64) -> Result<i64> {
        let c = redis::cmd("SEMAPHORE.RELEASE").arg(&*self.name).arg(positive(permits, "permits")?).clone();
        reply::int(&self.change(c).await?)
    }

    /// Adds `delta` permits (negative: removes them), as Redisson's `addPermits`.
    pub async fn add_permits(&self, delta: i64) -> Result<()> {
        self.change(redis::cmd("SEMAPHORE.ADDPERMITS").arg(&*self.name).arg(delta).clone()).await.map(|_| ())
    }

    /// Takes every available permit; returns how many.
    pub async fn drain_permits(&self) -> Result<i64> {
        reply::int(&self.change(redis::cmd("SEMAPHORE.DRAIN").arg(&*self.name).clone()).await?)
    }

    /// The permits available now (0 when the semaphore does not exist).
    pub async fn available_permits(&self) -> Result<i64> {
        let c = redis::cmd("SEMAPHORE.AVAILABLE").arg(&*self.name).clone();
        reply::int(&self.core().transport.read(&self.name, c, self.core().command_timeout).await?)
    }
}

/// Permits taken from a [`Semaphore`]; dropped without [`release`](SemaphoreGuard::release),
/// they are given back in the background (as a [`LockGuard`](crate::LockGuard)).
#[must_use = "dropping the guard gives the permits back at once (in the background)"]
#[derive(Debug)]
pub struct SemaphoreGuard {
    sem: Semaphore,
    permits: u64,
    done: bool,
}

impl SemaphoreGuard {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// Gives the permits back; returns the permits available then.
    pub async fn release(mut self) -> Result<i64> {
        self.done = true;
        let sem = self.sem.clone();
        let n = self.permits;
        let core = sem.core().clone();
        run_to_end(&core, async move { sem.release(n).await }).await
    }

    /// Keeps the permits taken (nothing is given back), as tokio's `SemaphorePermit::forget`.
    pub fn forget(mut self) {
        self.done = true;
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let sem = self.sem.clone();
        let n = self.permits;
        let core = sem.core().clone();
        release_in_background(&core, &sem.name.clone(), async move {
            if let Err(e) = sem.release(n).await {
                tracing::warn!("redis-lockmod: giving back {n} permit(s) of {}: {e}", sem.name);
            }
        });
    }
}

/// Permits granted to a cancelled acquire: given back, as a settle.
impl GiveBack for SemaphoreGuard {
    async fn give_back(mut self) {
        self.done = true;
        let n = self.permits;
        tracing::info!(
            "redis-lockmod: {n} permit(s) of {} granted to a cancelled acquire: giving them back",
            self.sem.name
        );
        if let Err(e) = self.sem.release(n).await {
            tracing::warn!("redis-lockmod: giving back {n} permit(s) of {}: {e}", self.sem.name);
        }
    }
}
