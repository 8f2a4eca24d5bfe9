//! The module configs' current values, kept in atomics so the hot path reads them lock-free.
//!
//! Registered with Redis by `crate::server` (through `ffi::config`); documented in
//! docs/configuration.md. Here, below every layer that reads them.

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

/// `lockmod.redisson-scripts`: Redisson's own lock scripts run as sent (`off`) or, when the
/// module recognises one, as the native command (`native`). See `crate::redisson`.
pub const SCRIPTS_OFF: i32 = 0;
pub const SCRIPTS_NATIVE: i32 = 1;

static SCRIPTS: AtomicI32 = AtomicI32::new(SCRIPTS_OFF);

pub fn redisson_scripts() -> i32 {
    SCRIPTS.load(Ordering::Relaxed)
}

/// Sets `lockmod.redisson-scripts`; false (and no change) for a value that is not one of the above.
pub fn set_redisson_scripts(v: i32) -> bool {
    if v != SCRIPTS_OFF && v != SCRIPTS_NATIVE {
        return false;
    }
    SCRIPTS.store(v, Ordering::Relaxed);
    true
}

/// The command filter's first (and, when `off`, only) check.
#[inline]
pub fn redisson_native() -> bool {
    redisson_scripts() == SCRIPTS_NATIVE
}
