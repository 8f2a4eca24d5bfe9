//! Pure lock logic: Redisson's algorithms over a small [`Store`] trait.
//!
//! Nothing here imports `redis_module`. The module's store (`crate::effects`) applies every
//! write to the keyspace and propagates it; the unit tests use `memory::MemoryStore` with a
//! fake clock. Each lock operation reads and type-checks every key it will touch *before* its
//! first write, so an error (`WRONGTYPE`, a corrupt hold count) leaves the keyspace unchanged.
//!
//! Also here, being pure and needed below every layer that uses them: Redisson's names
//! (`names`), the derived keys and channels each command touches (`access`, which the
//! algorithms declare before they write), and the config values (`config`).
//!
//! May import: nothing of the crate (the bottom floor). Imported by every other module.

pub mod access;
pub mod config;
pub mod contended;
pub mod countdown;
pub mod era;
pub mod error;
pub mod fair;
pub mod fencing;
pub mod gcra;
pub mod hold_expiries;
pub mod holds;
pub mod info;
pub mod kinds;
pub mod latch;
pub mod names;
pub mod numbers;
pub mod permits;
pub mod rate_bodies;
pub mod rate_body_settings;
pub mod rate_index;
pub mod rate_info;
pub mod rate_settings;
pub mod rate_window;
mod rate_window_write;
pub mod ratelimiter;
pub mod reentrant;
pub mod reply;
pub mod rwlock;
pub mod semaphore;
pub mod slots;
pub mod store;
pub mod sync_info;
pub mod sync_names;
pub mod wait_times;

#[cfg(test)]
pub mod memory;
#[cfg(test)]
pub mod memory_rate;
#[cfg(test)]
pub mod memory_sync;

#[cfg(test)]
mod access_tests;

pub use error::{Denied, LockError};
pub use latch::{latch_check, latch_record, latch_record_unreleased, Latch};
pub use numbers::{deadline, incremented, parse_i64, IntBuf};
pub use reply::{Reply, Result};
pub use store::{permit, Store};

#[cfg(test)]
mod kinds_tests;
#[cfg(test)]
mod times_tests;
