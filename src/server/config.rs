//! The module's configs as the log shows them: the line logged at load, and the refusal of
//! load arguments. Their values live in `crate::core::config`; `ffi::config` registers them.

use crate::core::config::{era_file_shown, redisson_native, sharded};

/// The module's configs with their current values, `name=value` separated by spaces.
pub fn describe() -> String {
    let pubsub = if sharded() { "sharded" } else { "global" };
    let scripts = if redisson_native() { "native" } else { "off" };
    let era_file = era_file_shown();
    format!("lockmod.pubsub={pubsub} lockmod.redisson-scripts={scripts} lockmod.fencing-era-file={era_file:?}")
}

/// The NOTICE line logged once the module is loaded: its version and configuration.
pub fn loaded_line() -> String {
    format!(
        "lockmod {} (module version {}) loaded: {}",
        super::version::VERSION,
        super::version::MODULE_VERSION,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_line_names_the_version_and_every_config() {
        let line = loaded_line();
        assert!(line.contains(crate::server::version::VERSION), "{line}");
        assert!(line.contains("lockmod.pubsub=global"), "{line}");
    }

    #[test]
    fn an_unknown_argument_is_named_with_the_right_way_to_configure() {
        let line = unknown_argument("pubsub", 2);
        assert!(line.contains("\"pubsub\"") && line.contains("lockmod.pubsub sharded"), "{line}");
    }
}
