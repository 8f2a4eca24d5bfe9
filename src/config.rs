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

/// The module's configs with their current values, `name=value` separated by spaces.
pub fn describe() -> String {
    let pubsub = if sharded() { "sharded" } else { "global" };
    let scripts = if redisson_native() { "native" } else { "off" };
    format!("lockmod.pubsub={pubsub} lockmod.redisson-scripts={scripts}")
}

/// The NOTICE line logged once the module is loaded: its version and configuration.
pub fn loaded_line() -> String {
    format!(
        "lockmod {} (module version {}) loaded: {}",
        crate::version::VERSION,
        crate::version::MODULE_VERSION,
        describe()
    )
}

/// The warning logged when the module is loaded with arguments (it takes none).
pub fn unknown_argument(first: &str, count: usize) -> String {
    format!(
        "lockmod: unknown load argument {first:?} ({count} given; lockmod takes none): refusing to load. \
         Configs are set as `lockmod.pubsub sharded` in redis.conf, `--lockmod.pubsub sharded` on the \
         command line, `MODULE LOADEX <path> CONFIG lockmod.pubsub sharded` or `CONFIG SET`"
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_line_names_the_version_and_every_config() {
        let line = loaded_line();
        assert!(line.contains(crate::version::VERSION), "{line}");
        assert!(line.contains("lockmod.pubsub=global"), "{line}");
    }

    #[test]
    fn an_unknown_argument_is_named_with_the_right_way_to_configure() {
        let line = unknown_argument("pubsub", 2);
        assert!(line.contains("\"pubsub\"") && line.contains("lockmod.pubsub sharded"), "{line}");
    }
}
