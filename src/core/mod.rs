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
//! One folder per family of primitives, each its commands' algorithms with their unit tests:
//! the locks (`lock`), the synchronizers (`sync`) and the rate limiter (`rate`). What they all
//! stand on stays here: the store traits (`store`) and the in-memory store of the tests
//! (`memory`), names, numbers, errors, replies, access, config, slots, and what looks across
//! every kind (`contended`, `wait_times`).
//!
//! May import: nothing of the crate (the bottom floor). Imported by every other module.

pub mod access;
pub mod config;
pub mod contended;
pub mod error;
pub mod lock;
pub mod names;
pub mod numbers;
pub mod rate;
pub mod reply;
pub mod slots;
pub mod store;
pub mod sync;
pub mod wait_times;

#[cfg(test)]
pub mod memory;

#[cfg(test)]
mod access_tests;

pub use error::{Denied, LockError};
pub use numbers::{deadline, incremented, parse_i64, IntBuf};
pub use reply::{Reply, Result};
pub use store::{permit, Store};
