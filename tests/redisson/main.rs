//! The module against the Lua it replaces: random differential runs against bench/lua/ and
//! Redisson's own bodies, every body on every kind of state, and `lockmod.redisson-scripts`.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod diff_fair;
mod diff_lock;
mod diff_ratelimiter;
mod diff_redisson;
mod diff_redisson_ratelimiter;
mod diff_rwlock;
mod diff_sync;
mod redisson_noscript;
mod redisson_ratelimiter_states;
mod redisson_scripts;
mod redisson_states;
mod redisson_sync_states;
