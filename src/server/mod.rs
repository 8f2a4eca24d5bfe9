//! The top floor: everything registered with Redis, and what only the whole module knows.
//!
//! Owns the module's `OnLoad` (`load`: the command table, the order of registration, the
//! callbacks each layer hands to `ffi`), the configs as logged (`config`), the command
//! metadata and docs (`metadata`, one file per family), the version (`version`) and
//! `INFO lockmod` (`info`).
//!
//! May import every module below it: commands, redisson, blocking, effects, watch, acl, ffi,
//! core. Nothing imports it.

pub mod config;
#[cfg(not(test))]
mod hooks;
pub mod info;
#[cfg(not(test))]
mod load;
pub mod metadata;
pub mod version;
