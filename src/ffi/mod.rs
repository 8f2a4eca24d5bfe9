//! The only module with `unsafe`: small wrappers over the Redis module C API, one file per API
//! area.
//!
//! Everything above this module sees safe types: [`Ctx`] (a command's context), [`Args`] (its
//! argv), [`Key`] (an open key, closed on drop) and [`RStr`] (an owned module string, freed on
//! drop). The SDK's safe layer allocates a `Vec<RedisString>` and retains every argument on each
//! call; the lock commands are meant to cost about as much as a `SET NX PX`, so the hot path goes
//! straight to the C API through these wrappers instead.
//!
//! Every API function used here exists in Redis 7.0; [`missing_apis`] checks that at load time,
//! so the `api!` fallback (a panic, caught by [`dispatch`] and turned into an error reply) is
//! never reached on a supported server.
//!
//! The ground floor: it imports no module of the crate but `core` (its plain types: `Reply`,
//! `LockError`, the config values). Where Redis calls the module back (the command filter,
//! timers, key-space and server events, blocked clients, `INFO`, config sets, a rewritten
//! call's dispatch), the layer that owns the reaction hands its function in at load, through
//! a hook struct, a function pointer or a trait; nothing here names a higher module.

// `api!` reads a static inside its own `unsafe`, which nests in callers' unsafe blocks.
#![allow(unused_unsafe)]

use std::os::raw::c_int;

use redis_module::raw;

pub type RawCtx = *mut raw::RedisModuleCtx;
pub type RawStr = *mut raw::RedisModuleString;

const OK: c_int = raw::REDISMODULE_OK as c_int;
const READ: c_int = raw::REDISMODULE_READ as c_int;
const WRITE: c_int = raw::REDISMODULE_WRITE as c_int;

/// Resolves a module API function pointer, which Redis fills in when the module loads.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: Redis writes these pointers once, in RedisModule_Init, before any other code
        // of the module runs; afterwards they are only read.
        match unsafe { raw::$name } {
            Some(f) => f,
            None => $crate::ffi::api_missing(stringify!($name)),
        }
    };
}

/// An optional module API function (`None` on a server without it).
macro_rules! opt {
    ($name:ident) => {
        // SAFETY: Redis writes these pointers once, in RedisModule_Init, before any other code
        // of the module runs; afterwards they are only read.
        unsafe { raw::$name }
    };
}

// Declared after `api!` and `opt!` so the macros are in scope there.
mod api;
mod args;
mod context;
mod keys;
mod keys_collections;
mod log;
mod replicate;
mod reply;

pub mod acl;
pub mod after_unit;
pub mod alloc;
pub mod answers_due;
pub mod blocked;
pub mod call;
pub mod command;
pub mod config;
pub mod events;
pub mod filter;
pub mod filter_call;
pub mod handover;
pub mod info;
pub mod latency;
pub mod lookup;
pub mod memory;
pub mod metadata;
pub mod modified;
pub mod pause;
pub mod random;
pub mod scan;
pub mod script_cache;
pub mod shared;
pub mod timers;

pub(crate) use api::api_missing;
pub use api::{missing_apis, NEEDED_APIS};
pub use args::{args_probed, reset_args_probed, Args, NotAnInteger, RStr, StrRef};
pub use command::{create_command, dispatch, CommandFn, Handler};
pub use context::Ctx;
pub use keys::{Key, KeyKind};
pub use log::log;
pub use replicate::Arg;
pub use reply::IntBuf;
