//! The module configs' current values, kept in atomics so the hot path reads them lock-free.
//!
//! Registered with Redis in `ffi::config`; documented in docs/configuration.md.

use std::sync::atomic::{AtomicI32, Ordering};

/// `lockmod.pubsub`: how unlock messages are published.
pub const PUBSUB_GLOBAL: i32 = 0;
/// `SPUBLISH`: for Redisson clients configured with sharded pub/sub in a cluster.
pub const PUBSUB_SHARDED: i32 = 1;

static PUBSUB: AtomicI32 = AtomicI32::new(PUBSUB_GLOBAL);

pub fn pubsub() -> i32 {
    PUBSUB.load(Ordering::Relaxed)
}

/// Sets `lockmod.pubsub`; false (and no change) for a value that is not one of the above.
pub fn set_pubsub(v: i32) -> bool {
    if v != PUBSUB_GLOBAL && v != PUBSUB_SHARDED {
        return false;
    }
    PUBSUB.store(v, Ordering::Relaxed);
    true
}

pub fn sharded() -> bool {
    pubsub() == PUBSUB_SHARDED
}
