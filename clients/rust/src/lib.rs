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
//! The blocking API, for code that is not async, is [`blocking`]. The crate's README and the
//! repository's docs/clients.md ("Rust") say how it behaves: waiting, lost replies, the
//! watchdog, what a dropped guard costs.
#![deny(missing_docs)]

pub mod blocking;
mod client;
mod detach;
mod error;
mod guard;
mod holder;
mod kinds;
mod lock;
mod lockref;
mod names;
mod protocol;
mod reply;
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
