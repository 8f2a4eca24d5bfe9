//! [`PermitExpirableSemaphore`]: Redisson's `RPermitExpirableSemaphore` (`PSEMAPHORE.*`). Each
//! permit taken has an id and a lease, and comes back by itself when its lease runs out, on the
//! server's clock.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::{change, check_open, positive, release_in_background, run_to_end, unanswered, wait_args, with_block};
use crate::client::{Core, LockClient};
use crate::detach::{detached, GiveBack};
use crate::durations::{after, ms};
use crate::error::{Error, Result};
use crate::reply;
use crate::transport::{CallError, Request};

/// Redisson's `RPermitExpirableSemaphore`. Cheap to clone.
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// # let locks = redis_lockmod_client::LockClient::new(redis::Client::open(url)?)?;
/// use std::time::Duration;
///
/// let workers = locks.permit_expirable_semaphore("crawlers").with_lease(Duration::from_secs(60));
/// workers.try_set_permits(2).await?;
/// let permit = workers.acquire(1).await?;       // comes back by itself after 60 s
/// permit.update_lease(Duration::from_secs(120)).await?;
/// permit.release().await?;                      // Err(LockLost) if a lease ran out first
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    client: LockClient,
    name: Arc<str>,
    lease: Option<Duration>,
}

impl LockClient {
    /// A semaphore whose permits have ids and leases (Redisson's `RPermitExpirableSemaphore`).
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore { client: self.clone(), name: name.into(), lease: None }
    }
}

impl PermitExpirableSemaphore {
    fn core(&self) -> &Arc<Core> {
        self.client.core()
    }

    /// The default lease of a permit taken with this object; without one a permit never
    /// expires (Redisson's `acquire()` without a lease).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The semaphore's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn change(&self, c: redis::Cmd) -> Result<redis::Value> {
        change(self.core(), &self.name, c).await
    }

    async fn read(&self, c: redis::Cmd) -> Result<redis::Value> {
        self.core().transport.read(&self.name, c, self.core().command_timeout).await
    }

    /// Sets the permits if the semaphore does not exist yet; true if it was set.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        Ok(reply::int(
            &self.change(redis::cmd("PSEMAPHORE.TRYSETPERMITS").arg(&*self.name).arg(permits).clone()).await?,
        )? == 1)
    }

    /// Sets the total (available plus taken) to `permits`, as Redisson's `setPermits`.
    pub async fn set_permits(&self, permits: u64) -> Result<()> {
        self.change(redis::cmd("PSEMAPHORE.SETPERMITS").arg(&*self.name).arg(permits).clone()).await.map(|_| ())
    }

    /// Takes `permits` for this object's lease, waiting in the server without limit.
    pub async fn acquire(&self, permits: u64) -> Result<PermitGuard> {
        loop {
            if let Some(g) = self.take(permits, None).await? {
                return Ok(g);
            }
        }
    }

    /// Takes `permits`, waiting at most `timeout` (zero: tries once; longer than the server can
    /// express, `Duration::MAX`: no limit); `Ok(None)` if they did not come. Dropping this
    /// future ends the wait; permits granted in that instant go back before the client's next
    /// request on the semaphore.
    pub async fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<Option<PermitGuard>> {
        self.take(permits, Some(timeout)).await
    }

    async fn take(&self, permits: u64, timeout: Option<Duration>) -> Result<Option<PermitGuard>> {
        check_open(&self.name, self.core())?;
        positive(permits, "permits")?;
        let lease = match self.lease {
            Some(l) => positive(ms(l), "lease")?,
            None => 0,
        };
        let sem = self.clone();
        detached(self.core(), &self.name, move |cancel| async move {
            let core = sem.core().clone();
            let (block, t) = wait_args(&core, timeout);
            let c = redis::cmd("PSEMAPHORE.ACQUIRE").arg(&*sem.name).arg(permits).arg(lease).clone();
            let cmds = [with_block(c, block)];
            let sent = Instant::now();
            let req = Request { key: &sem.name, cmds: &cmds, timeout: t, cancel: Some(&cancel), sync: core.sync() };
            match core.transport.call(req).await {
                Ok(r) => match reply::opt_texts(r.values.first().unwrap_or(&redis::Value::Nil))? {
                    None => Ok(None),
                    Some(ids) => {
                        if let Err(e) = core.check_synced("PSEMAPHORE.ACQUIRE", &sem.name, r.synced) {
                            // No replica has the permits taken: given back first, not waited for.
                            let back = redis::cmd("PSEMAPHORE.RELEASE").arg(&*sem.name).arg(&ids).clone();
                            let _ = core.transport.once(&sem.name, back, core.command_timeout).await;
                            return Err(e);
                        }
                        // The lease starts when the server serves the request: never before the send.
                        let deadline = (lease > 0).then(|| after(sent, Duration::from_millis(lease))).flatten();
                        Ok(Some(PermitGuard::new(sem.clone(), ids, deadline)))
                    }
                },
                Err(CallError::Failed(e)) => Err(e),
                Err(CallError::Lost(l)) => Err(unanswered("PSEMAPHORE.ACQUIRE", &sem.name, &cancel, l.cause)),
            }
        })
        .await
    }

    /// Gives back the permits of `ids`: all of them, or none when one is unknown, already
    /// released or expired. True if they were released.
    pub async fn try_release(&self, ids: &[String]) -> Result<bool> {
        if ids.is_empty() {
            return Err(Error::InvalidArgument("no permit id given".into()));
        }
        let v = self.change(redis::cmd("PSEMAPHORE.RELEASE").arg(&*self.name).arg(ids).clone()).await?;
        Ok(usize::try_from(reply::int(&v)?).ok() == Some(ids.len()))
    }

    /// As [`try_release`](Self::try_release), but [`Error::NotHeld`] when nothing was released.
    pub async fn release(&self, ids: &[String]) -> Result<()> {
        if self.try_release(ids).await? {
            return Ok(());
        }
        Err(Error::NotHeld { name: self.name.to_string(), what: format!("permit(s) {}", ids.join(", ")) })
    }

    /// Sets the lease of a permit still held to `lease` from now (zero: never expires); false
    /// if it is gone.
    pub async fn update_lease(&self, id: &str, lease: Duration) -> Result<bool> {
        let c = redis::cmd("PSEMAPHORE.UPDATELEASE").arg(&*self.name).arg(id).arg(ms(lease)).clone();
        let core = self.core();
        let (v, synced) = core.transport.read_synced(&self.name, c, core.command_timeout, core.sync()).await?;
        core.check_synced("PSEMAPHORE.UPDATELEASE", &self.name, synced)?;
        Ok(reply::int(&v)? == 1)
    }

    /// The permits available now (expired ones back).
    pub async fn available_permits(&self) -> Result<i64> {
        reply::int(&self.read(redis::cmd("PSEMAPHORE.AVAILABLE").arg(&*self.name).clone()).await?)
    }

    /// The permits taken and not expired.
    pub async fn acquired_permits(&self) -> Result<i64> {
        reply::int(&self.read(redis::cmd("PSEMAPHORE.ACQUIRED").arg(&*self.name).clone()).await?)
    }
}

/// When the first lease of a guard's permits runs out (on the library's clock).
#[derive(Debug, Default)]
struct Expiry {
    deadline: Mutex<Option<Instant>>,
    moved: Notify,
}

/// Permits taken from a [`PermitExpirableSemaphore`]. Dropped without
/// [`release`](PermitGuard::release), they are given back in the background.
#[must_use = "dropping the guard gives the permits back at once (in the background)"]
#[derive(Debug)]
pub struct PermitGuard {
    sem: PermitExpirableSemaphore,
    ids: Vec<String>,
    expiry: Arc<Expiry>,
    done: bool,
}

impl PermitGuard {
    fn new(sem: PermitExpirableSemaphore, ids: Vec<String>, deadline: Option<Instant>) -> PermitGuard {
        let expiry = Arc::new(Expiry { deadline: Mutex::new(deadline), moved: Notify::new() });
        PermitGuard { sem, ids, expiry, done: false }
    }

    /// The permits' ids (32 hex digits each).
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// Sets every permit's lease to `lease` from now (zero: never expires). False if one is
    /// gone (its lease ran out).
    pub async fn update_lease(&self, lease: Duration) -> Result<bool> {
        let sent = Instant::now();
        let mut all = true;
        for id in &self.ids {
            all &= self.sem.update_lease(id, lease).await?;
        }
        if all {
            if let Ok(mut d) = self.expiry.deadline.lock() {
                *d = (!lease.is_zero()).then(|| after(sent, lease)).flatten();
            }
            self.expiry.moved.notify_waiters();
        }
        Ok(all)
    }

    /// A future that completes when the first lease runs out (never, without a lease):
    /// `select!` on it to stop work the permits no longer cover.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let expiry = self.expiry.clone();
        async move {
            loop {
                let moved = expiry.moved.notified();
                let deadline = expiry.deadline.lock().map(|d| *d).unwrap_or(None);
                match deadline {
                    Some(d) => tokio::select! {
                        _ = tokio::time::sleep_until(d) => return,
                        _ = moved => {}
                    },
                    None => moved.await,
                }
            }
        }
    }

    /// Gives the permits back. [`Error::LockLost`] when they were not all still held (a lease
    /// ran out first: the work they covered was not protected all along).
    pub async fn release(mut self) -> Result<()> {
        self.done = true;
        let sem = self.sem.clone();
        let ids = std::mem::take(&mut self.ids);
        let core = sem.core().clone();
        run_to_end(&core, async move {
            if sem.try_release(&ids).await? {
                Ok(())
            } else {
                Err(Error::lost(&sem.name))
            }
        })
        .await
    }
}

/// Permits granted to a cancelled acquire: given back, as a settle.
impl GiveBack for PermitGuard {
    async fn give_back(mut self) {
        self.done = true;
        let ids = std::mem::take(&mut self.ids);
        tracing::info!(
            "redis-lockmod: permit(s) of {} granted to a cancelled acquire: giving them back",
            self.sem.name
        );
        if let Err(e) = self.sem.try_release(&ids).await {
            tracing::warn!("redis-lockmod: giving back permit(s) of {}: {e}", self.sem.name);
        }
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let sem = self.sem.clone();
        let ids = std::mem::take(&mut self.ids);
        let core = sem.core().clone();
        release_in_background(&core, &sem.name.clone(), async move {
            if let Err(e) = sem.try_release(&ids).await {
                tracing::warn!("redis-lockmod: giving back permit(s) of {}: {e}", sem.name);
            }
        });
    }
}
