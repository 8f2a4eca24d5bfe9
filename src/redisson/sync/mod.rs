//! Redisson's synchronizer bodies (`RSemaphore`, `RPermitExpirableSemaphore`,
//! `RCountDownLatch`) run natively, one family as in `crate::core::sync`: the bodies by SHA1
//! ([`table`]), their KEYS/ARGV mapped to the native command's arguments and back
//! ([`rewrite`]), and the native command made to answer exactly what the body would
//! ([`exec`]). The lock scripts' own table, mapping and runner, at `redisson/`'s root, hand a
//! synchronizer's body to these.

pub mod exec;
pub mod rewrite;
pub mod table;
