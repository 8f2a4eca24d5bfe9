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
];

const N: usize = 27;

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

pub fn native(kind: Native) {
    if let Some(i) = KINDS.iter().position(|k| *k == kind) {
        NATIVE[i].fetch_add(1, Relaxed);
    }
}

pub fn fallback() {
    FALLBACKS.fetch_add(1, Relaxed);
}

pub fn left_to_lua() {
    LEFT.fetch_add(1, Relaxed);
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
    for c in [&FALLBACKS, &LEFT, &UNKNOWN, &NOSCRIPT] {
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
    v
}
