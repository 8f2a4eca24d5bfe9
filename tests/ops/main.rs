//! Operating the module: INFO lockmod and its wait-time histograms, module configs, command
//! metadata, the monitoring script.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod config;
mod info;
mod metadata;
mod monitoring_script;
mod wait_times;
