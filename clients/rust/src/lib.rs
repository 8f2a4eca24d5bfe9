//! Redisson's locks and synchronizers for Rust (tokio, redis-rs), on the
//! redis-lockmod Redis module: [`Lock`], [`ReadWriteLock`], the fair
//! lock, fencing tokens, [`Semaphore`], [`PermitExpirableSemaphore`], [`CountDownLatch`] and
//! [`RateLimiter`], with Redisson's keys and owner names, so that Rust, Java (Redisson), Python
//! and Node share one lock by name.
//!
//! ```
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
//! use redis_lockmod_client::LockClient;
//!
//! let locks = LockClient::new(redis::Client::open(url)?)?;
//! let guard = locks.lock("orders").acquire().await?;   // waits in the server (BLOCK)
//! // ... the critical section ...
//! guard.unlock().await?;                                // Err(LockLost) if it was lost meanwhile
//! # locks.close().await;
//! # Ok(()) }
//! ```
//!
//! How it behaves (the crate's README and the repository's docs/clients.md, "Rust", say more):
//!
//! - **The guard is the hold**, as in `tokio::sync`: every acquire takes the lock under a new
//!   owner name, so tasks sharing one [`Lock`] (clones, an `Arc<Lock>`) exclude each other, for
//!   every kind. Redisson's reentrance is a choice: [`Lock::reentrant`],
//!   [`ReadWriteLock::reentrant`], [`Lock::with_owner`]. (Before issue 34 a lock object was one
//!   reentrant holder: see the README's "Migrating from the reentrant lock object".) A
//!   [`LockGuard`] is `Send + Sync + 'static`: it moves into a spawned task.
//! - **Dropping a future is safe, and ordered.** A dropped acquire ends its wait in the server
//!   (`CLIENT UNBLOCK`) and gives back a grant that raced the drop; a dropped guard is released.
//!   `Drop` never blocks: that work runs in a task of the client, and the client's next request
//!   on that name waits for it, so an unlock right after a cancelled wait never hands the lock to
//!   that waiter.
//! - **No panic on any `Duration`**: a wait longer than the server can express
//!   (`Duration::MAX`) waits without limit, as tokio's timers saturate.
//! - **Errors** are one [`Error`] (`std::error::Error + Send + Sync + 'static`): an error reply,
//!   a lock lost while held, an outcome that could not be learned, no replica synced, a bad
//!   argument, a closed client, a runtime that shut down, a task that panicked. "Not granted in
//!   time" is `Ok(None)`.
//! - **Costs**: one connection of the library's own per request in flight (a parked wait holds
//!   one), up to 256 idle per server; one watchdog task per client; no key left per unlock (its
//!   `LATCH` key is deleted once answered). A lock taken away by someone else is noticed at its
//!   next renewal, within `renew_interval` (10 s by default). TLS: redis-rs' TLS feature and a
//!   `rediss://` address.
//!
//! The blocking API, for code that is not async, is [`blocking`].
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

pub mod blocking;
mod client;
mod detach;
mod durations;
mod error;
mod guard;
mod holder;
mod kinds;
mod lock;
mod lockref;
mod names;
mod protocol;
mod reply;
mod schedule;
mod settle;
mod sync;
mod transport;
mod watchdog;

pub use client::{LockClient, LockClientBuilder, Servers};
pub use error::{Error, Result};
pub use guard::{LockGuard, Unlocked};
pub use lock::{FairLock, Lock, ReadWriteLock};
pub use sync::{
    CountDownLatch, PermitExpirableSemaphore, PermitGuard, RateLimiter, RateLimiterConfig, RateType, Semaphore,
    SemaphoreGuard, SetRate,
};
pub use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

// The examples of the crate's README, of docs/clients.md ("Rust") and of the repository's
// README run as doctests
// (`make test-docs`, against the servers scripts/doc-servers.sh starts).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/clients.md")]
struct ClientsDocExamples;

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct RepositoryReadmeExamples;
