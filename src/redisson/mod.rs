//! Redisson's own lock scripts, run as the native commands (`lockmod.redisson-scripts native`).
//!
//! A Redisson application sends its lock scripts with `EVALSHA` (or `EVAL`). The module's
//! command filter (`ffi::filter`) recognises each by its SHA1 ([`table`]), maps its KEYS and
//! ARGV to the native command's arguments ([`rewrite`]) when they are exactly the ones the
//! module derives from the lock name, and rewrites the call before Redis looks it up, so the
//! native command runs instead of the Lua. [`exec`] then makes the native command answer
//! exactly what the script would: it converts the replies where Redisson's scripts differ
//! (older releases, batched renewals), and wherever the native command cannot give the Lua's
//! answer (an error, a state only some script versions handle) it runs the script itself,
//! before anything was written ([`reverse`] rebuilds its KEYS and ARGV). [`stats`] counts
//! what happened, for `INFO lockmod`, [`unknown`] spots scripts that look like Redisson's but
//! are not in the table, [`acl`] lists the commands a script runs, for the ACL check, and
//! [`cache`] tracks which of the scripts the server's script cache holds (`NOSCRIPT`,
//! asked by [`cache_probe`]).
//!
//! The lock scripts' table, mapping and answers are at this folder's root, where each also
//! hands the other families' bodies on: the synchronizers' (`RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch`) to [`sync`], the rate limiter's
//! (`RRateLimiter`, `RGcra`) to [`rate`], each folder with its own table, mapping and runner.
//!
//! The filter's part: [`filter`] rewrites a call, [`strings`] holds what it needs (made at
//! load), [`dispatch`] runs a rewritten call when its command is dispatched, [`learn`] notes
//! what may change the script cache. The filter itself is `ffi::filter`; the ACL check of a
//! rewritten call is `acl::script`.
//!
//! May import: blocking, effects, acl, ffi, core. Imported by server.

pub mod acl;
pub mod cache;
pub mod cache_probe;
pub mod dispatch;
pub mod exec;
pub mod filter;
pub mod learn;
pub mod lua_number;
pub mod native;
pub mod rate;
pub mod reverse;
pub mod rewrite;
pub mod stats;
pub mod strings;
pub mod sync;
pub mod table;
pub mod unknown;
