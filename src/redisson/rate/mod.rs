//! Redisson's rate-limiter bodies (`RRateLimiter`, the `RedissonExpirable` helpers it sends,
//! `RGcra`) run natively, one family as in `crate::core::rate`: the bodies by SHA1 ([`table`]),
//! their KEYS/ARGV mapped to the native command's arguments and back ([`rewrite`]), and the
//! body's own semantics run on the store ([`exec`]). The lock scripts' own table, mapping and
//! runner, at `redisson/`'s root, hand a rate-limiter body to these.

pub mod exec;
pub mod rewrite;
pub mod table;
