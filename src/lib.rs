//! redis-lockmod: Redisson's locks as native Redis commands.
//!
//! This file only registers things with Redis. The lock algorithms live in `core`, the
//! command parsing in `commands`, the keyspace writes in `effects`, the C API in `ffi`.

pub mod acl;
pub mod blocking;
pub mod commands;
pub mod core;
pub mod effects;
pub mod ffi;
pub mod redisson;
pub mod server;
pub mod watch;
