//! Rate limiting, one family: Redisson's `RRateLimiter` (a sliding window of grants on
//! Redisson's keys, over the `RateStore` trait) and GCRA (`GCRA`, `CL.THROTTLE`: one string per
//! name), which Redisson's `RGcra` body also runs on.
//!
//! - `limiter`: the native `RATELIMITER.*` commands; `settings`: `SETRATE` and `TRYSETRATE`.
//! - `window` (reads) and `window_write` (writes): the grant zset, with what `index` remembers
//!   of it between commands.
//! - `bodies` and `body_settings`: Redisson's own bodies, each run exactly as its Lua.
//! - `info`: `SYNC.INFO` of a limiter; `gcra`; `memory`: `RateStore` on the unit tests'
//!   in-memory store.

pub mod bodies;
pub mod body_settings;
pub mod gcra;
pub mod index;
pub mod info;
pub mod limiter;
pub mod settings;
pub mod store;
pub mod window;
mod window_write;

#[cfg(test)]
pub mod memory;
