//! The rate limiter (RATELIMITER.*), GCRA and CL.THROTTLE, their BLOCK waits, and Redisson's
//! RRateLimiter and RGcra sharing them.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod block_ratelimiter;
mod cl_throttle;
mod gcra;
mod gcra_redisson;
mod gcra_server_has;
mod ratelimiter;
mod ratelimiter_long;
mod ratelimiter_safety;
mod ratelimiter_shared;
