//! The blocking API, for code that is not async: the same locks and synchronizers, each call
//! run to completion on a runtime of the client's own (one worker thread, which also runs the
//! watchdogs and the background releases of dropped guards).
//!
//! Never call it from inside an async runtime (tokio refuses to block there; the call returns
//! [`Error::InvalidArgument`]): use the async API instead. A guard dropped without its unlock
//! is released in the background, on the client's runtime, as in the async API; when the last
//! handle of the client goes (the client, its locks and guards), that drop waits, at most the
//! command timeout, for those background releases before the runtime stops.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
//! use redis_lockmod_client::blocking::LockClient;
//!
//! let locks = LockClient::new(redis::Client::open(url)?)?;
//! let guard = locks.lock("orders").acquire()?;    // waits in the server (BLOCK)
//! // ... the critical section ...
//! guard.unlock()?;
//! # Ok(()) }
//! ```

mod locks;
mod ratelimiter;
mod runtime;
mod sync;

pub use locks::{Lock, LockGuard, ReadWriteLock};
pub use ratelimiter::RateLimiter;
pub use sync::{CountDownLatch, PermitExpirableSemaphore, PermitGuard, Semaphore, SemaphoreGuard};

use std::sync::Arc;

use crate::client::{LockClientBuilder, Servers};
use crate::error::{Error, Result};
use runtime::Rt;

/// The blocking [`crate::LockClient`]: locks and synchronizers are made from it. Cheap to clone.
#[derive(Clone)]
pub struct LockClient {
    rt: Arc<Rt>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::LockClient").finish_non_exhaustive()
    }
}

impl LockClient {
    /// A client of one server, with the default settings.
    pub fn new(client: redis::Client) -> Result<LockClient> {
        LockClient::build(LockClientBuilder::default(), Servers::Standalone(client))
    }

    /// A client with the settings of `builder`, on `servers`.
    pub fn build(builder: LockClientBuilder, servers: Servers) -> Result<LockClient> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redis-lockmod")
            .enable_all()
            .build()
            .map_err(|e| Error::InvalidArgument(format!("cannot start the client's runtime: {e}")))?;
        let client = builder.build_on(servers, runtime.handle().clone())?;
        Ok(LockClient { rt: Arc::new(Rt::new(client, runtime)) })
    }

    fn inner(&self) -> &crate::LockClient {
        // Set at construction and taken only in Drop, when no handle is left.
        self.rt.inner()
    }

    /// The uuid every owner name of this client starts with.
    pub fn id(&self) -> &str {
        self.inner().id()
    }

    /// A reentrant lock (Redisson's `RLock`): a new holder.
    pub fn lock(&self, name: &str) -> Lock {
        Lock::new(self.inner().lock(name), self.rt.clone())
    }

    /// A fair lock (Redisson's `RedissonFairLock`): a new holder.
    pub fn fair_lock(&self, name: &str) -> Lock {
        Lock::new(self.inner().fair_lock(name), self.rt.clone())
    }

    /// A read-write lock (Redisson's `RReadWriteLock`): its two sides share one new holder.
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock::new(self.inner().read_write_lock(name), self.rt.clone())
    }

    /// A semaphore (Redisson's `RSemaphore`).
    pub fn semaphore(&self, name: &str) -> Semaphore {
        Semaphore::new(self.inner().semaphore(name), self.rt.clone())
    }

    /// A semaphore whose permits have ids and leases (`RPermitExpirableSemaphore`).
    pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.inner().permit_expirable_semaphore(name), self.rt.clone())
    }

    /// A count-down latch (Redisson's `RCountDownLatch`).
    pub fn count_down_latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch::new(self.inner().count_down_latch(name), self.rt.clone())
    }

    /// A rate limiter (Redisson's `RRateLimiter`); its client id is this client's uuid.
    pub fn rate_limiter(&self, name: &str) -> RateLimiter {
        RateLimiter::new(self.inner().rate_limiter(name), self.rt.clone())
    }

    /// Waits for the background releases and closes the idle connections
    /// ([`crate::LockClient::close`]).
    pub fn close(&self) -> Result<()> {
        let c = self.rt.client()?.clone();
        self.rt.block_on(async move { c.close().await })
    }
}
