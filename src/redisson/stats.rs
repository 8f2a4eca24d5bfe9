//! `INFO lockmod` counters of Redisson's scripts: calls run natively per kind, calls that ran
//! the Lua after all, recognised calls left to Lua, unknown scripts that look like
//! Redisson's (a release whose scripts the table misses), and `NOSCRIPT` answers.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::rewrite::Native;

/// The kinds counted, in `INFO` order: one per native command a script can become.
const KINDS: [Native; N] = [
    Native::LockAcquire,
    Native::LockUnlock,
    Native::LockRenew,
    Native::LockForceUnlock,
    Native::RwRlock,
    Native::RwWlock,
    Native::RwUnlock,
    Native::RwRenew,
    Native::RwForceUnlock,
    Native::FairAcquire,
    Native::FairUnlock,
    Native::FairCancel,
    Native::FairForceUnlock,
    Native::SemAcquire,
    Native::SemRelease,
    Native::SemTrySet,
    Native::SemAdd,
    Native::SemDrain,
    Native::PsemTrySet,
    Native::PsemSetPermits,
    Native::PsemAcquire,
    Native::PsemRelease,
    Native::PsemUpdateLease,
    Native::PsemAvailable,
    Native::PsemAcquired,
    Native::CountdownTrySet,
    Native::CountdownDecr,
    Native::RateTrySet,
    Native::RateSet,
    Native::RateAcquire,
    Native::RateAvailable,
    Native::RateRelease,
    Native::RateExpire,
    Native::Gcra,
];

const N: usize = 34;

/// The `INFO` field of each kind (Redis prefixes `lockmod_`).
const FIELDS: [&str; N] = [
    "redisson_lock_acquire",
    "redisson_lock_unlock",
    "redisson_lock_renew",
    "redisson_lock_forceunlock",
    "redisson_rwlock_rlock",
    "redisson_rwlock_wlock",
    "redisson_rwlock_unlock",
    "redisson_rwlock_renew",
    "redisson_rwlock_forceunlock",
    "redisson_fairlock_acquire",
    "redisson_fairlock_unlock",
    "redisson_fairlock_cancel",
    "redisson_fairlock_forceunlock",
    "redisson_semaphore_acquire",
    "redisson_semaphore_release",
    "redisson_semaphore_trysetpermits",
    "redisson_semaphore_addpermits",
    "redisson_semaphore_drain",
    "redisson_psemaphore_trysetpermits",
    "redisson_psemaphore_setpermits",
    "redisson_psemaphore_acquire",
    "redisson_psemaphore_release",
    "redisson_psemaphore_updatelease",
    "redisson_psemaphore_available",
    "redisson_psemaphore_acquired",
    "redisson_countdown_trysetcount",
    "redisson_countdown_decr",
    "redisson_ratelimiter_trysetrate",
    "redisson_ratelimiter_setrate",
    "redisson_ratelimiter_acquire",
    "redisson_ratelimiter_available",
    "redisson_ratelimiter_release",
    "redisson_ratelimiter_expire",
    "redisson_gcra",
];

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static NATIVE: [AtomicU64; N] = [ZERO; N];
/// Recognised calls that ran the script after all (an error, a state the native command does
/// not reproduce exactly).
static FALLBACKS: AtomicU64 = AtomicU64::new(0);
/// Recognised calls left to Lua: keys or arguments the module would not derive, a replica,
/// `maxmemory`, an ACL the native path would not match, a batched renewal of several locks.
static LEFT: AtomicU64 = AtomicU64::new(0);
/// Scripts not in the table that look like Redisson's (`rewrite::looks_like_redisson`).
static UNKNOWN: AtomicU64 = AtomicU64::new(0);
/// `EVALSHA`s of a recognised script this server's script cache does not hold, answered
/// `NOSCRIPT` by Redis as without the module (`super::cache`).
static NOSCRIPT: AtomicU64 = AtomicU64::new(0);

/// Why a recognised call ran as Lua, for `INFO lockmod` (`lockmod_redisson_lua_<cause>`). The
/// first five are decided by the filter, before the call is rewritten ([`left_to_lua`]); the
/// last three when the rewritten call runs, by running the script itself ([`fallback`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A body no native command answers (`isLocked`).
    NotAccelerated,
    /// Keys, channel, publish command or times the module would not derive (a `NameMapper`,
    /// a key prefix, `SPUBLISH` against `lockmod.pubsub`, a batched renewal of several locks).
    Arguments,
    /// A replica, a server loading or over `maxmemory`.
    ServerState,
    /// ACL: a user the native path would not treat as the Lua does (Redis 7.0: some user is
    /// restricted; 7.2+: the caller may not run an inner command).
    Acl,
    /// The script cache: not followed (`SCRIPT` renamed), or the script not (or no longer) in it.
    ScriptCache,
    /// A state where the module's own rules (one kind per name, a fair queue not jumped, a
    /// parked writer first) would decide the native answer.
    ModuleRule,
    /// A state a script version handles its own way (an odd latch value, an older fair script's
    /// queue check, a count the shadowed renewal fails on).
    ScriptState,
    /// The native command's error (`WRONGTYPE`, a corrupt count): the script's own error.
    Error,
}

const CAUSES: [(Cause, &str); 8] = [
    (Cause::NotAccelerated, "redisson_lua_not_accelerated"),
    (Cause::Arguments, "redisson_lua_arguments"),
    (Cause::ServerState, "redisson_lua_server_state"),
    (Cause::Acl, "redisson_lua_acl"),
    (Cause::ScriptCache, "redisson_lua_script_cache"),
    (Cause::ModuleRule, "redisson_lua_module_rule"),
    (Cause::ScriptState, "redisson_lua_script_state"),
    (Cause::Error, "redisson_lua_error"),
];

static BY_CAUSE: [AtomicU64; 8] = [ZERO; 8];

fn count_cause(cause: Cause) {
    if let Some(i) = CAUSES.iter().position(|(c, _)| *c == cause) {
        BY_CAUSE[i].fetch_add(1, Relaxed);
    }
}

pub fn native(kind: Native) {
    if let Some(i) = KINDS.iter().position(|k| *k == kind) {
        NATIVE[i].fetch_add(1, Relaxed);
    }
}

/// A rewritten call answered by running the script itself, for `cause`.
pub fn fallback(cause: Cause) {
    FALLBACKS.fetch_add(1, Relaxed);
    count_cause(cause);
}

/// A recognised call the filter left to Lua, for `cause`.
pub fn left_to_lua(cause: Cause) {
    LEFT.fetch_add(1, Relaxed);
    count_cause(cause);
}

pub fn noscript() {
    NOSCRIPT.fetch_add(1, Relaxed);
}

/// Counts an unknown Redisson-like script; true the first time (to log its SHA1 once).
pub fn unknown() -> bool {
    UNKNOWN.fetch_add(1, Relaxed) == 0
}

pub fn reset() {
    for c in &NATIVE {
        c.store(0, Relaxed);
    }
    for c in BY_CAUSE.iter().chain([&FALLBACKS, &LEFT, &UNKNOWN, &NOSCRIPT]) {
        c.store(0, Relaxed);
    }
}

/// The fields, in order, for `INFO lockmod`.
pub fn info_fields() -> Vec<(&'static str, i64)> {
    let mut v: Vec<(&'static str, i64)> =
        FIELDS.iter().zip(&NATIVE).map(|(f, c)| (*f, c.load(Relaxed) as i64)).collect();
    v.push(("redisson_native_total", NATIVE.iter().map(|c| c.load(Relaxed) as i64).sum()));
    v.push(("redisson_fallbacks", FALLBACKS.load(Relaxed) as i64));
    v.push(("redisson_left_to_lua", LEFT.load(Relaxed) as i64));
    v.push(("redisson_unknown_scripts", UNKNOWN.load(Relaxed) as i64));
    v.push(("redisson_noscript", NOSCRIPT.load(Relaxed) as i64));
    v.extend(CAUSES.iter().zip(&BY_CAUSE).map(|((_, f), c)| (*f, c.load(Relaxed) as i64)));
    v
}
