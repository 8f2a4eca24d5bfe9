//! The synchronizers (Redisson's `RSemaphore`, `RPermitExpirableSemaphore`,
//! `RCountDownLatch`), one family: each is a string counter on its name, written through the
//! `SyncStore` trait, with its derived keys and channels named in one place (`names`) and one
//! read-only picture for all three (`SYNC.INFO`, `info`).
//!
//! - `semaphore`; `permits`: the expirable semaphore, the semaphore's counter plus a lease per
//!   permit; `countdown`: the count-down latch.
//! - `memory`: `SyncStore` on the unit tests' in-memory store.

pub mod countdown;
pub mod info;
pub mod names;
pub mod permits;
pub mod semaphore;
pub mod store;

#[cfg(test)]
pub mod memory;
