//! `CONFIG RESETSTAT` when nothing saw it.
//!
//! The command filter, which sees `CONFIG RESETSTAT` as it happens, is registered only while
//! read holds are indexed (a registered filter costs every command in the server). A reset
//! made otherwise shows in Redis' own count of our commands' calls (`INFO commandstats`,
//! zeroed by the reset): fewer than we ran since we last looked. `INFO lockmod` looks, and
//! then rebuilds each counter from what happened after the reset: every increment is logged
//! with the number of the command call it happened in, so the increments of the calls Redis
//! counted since the reset are known (exactly, unless more than [`LOG`] increments have
//! happened since; then the oldest of them are missing).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use super::{Counter, ALL, DISCONNECTS};

/// Calls of the module's commands since load, never reset (counted as each call starts).
pub static CALLS: Counter = Counter::new(u8::MAX);

/// Increments remembered.
const LOG: usize = 4096;

/// Each entry: the call number (high 48 bits), the counter index, the amount (8 bits each).
static ENTRIES: [AtomicU64; LOG] = [const { AtomicU64::new(0) }; LOG];
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Redis' count of our calls and ours, at the last look (or reset seen).
static REDIS_BASE: AtomicU64 = AtomicU64::new(0);
static OURS_BASE: AtomicU64 = AtomicU64::new(0);
static DISCONNECTS_BASE: AtomicU64 = AtomicU64::new(0);

/// Counter `index` grew by `n` during the current call.
pub(super) fn logged(index: u8, n: u64) {
    if index == u8::MAX {
        return;
    }
    let call = CALLS.get() & ((1 << 48) - 1);
    let mut left = n;
    while left > 0 {
        let part = left.min(255);
        let at = NEXT.load(Relaxed);
        ENTRIES[at % LOG].store(call << 16 | u64::from(index) << 8 | part, Relaxed);
        NEXT.store(at.wrapping_add(1), Relaxed);
        left -= part;
    }
}

/// Given Redis' count of our calls now, whether its statistics were reset since we last
/// looked; if so, the counters already hold only what followed the reset. Redis 7.0 counts a
/// call when it runs, Valkey a parked one only when it is answered (never if its client leaves
/// first): parked clients and disconnects since the last look are the margin.
pub fn reset_happened(redis_calls: u64, parked_now: u64) -> bool {
    let (ours, disconnects) = (CALLS.get(), DISCONNECTS.get());
    let redis_base = REDIS_BASE.swap(redis_calls, Relaxed);
    let ran = ours.saturating_sub(OURS_BASE.swap(ours, Relaxed));
    let left = disconnects.saturating_sub(DISCONNECTS_BASE.swap(disconnects, Relaxed));
    let expected = (redis_base + ran).saturating_sub(parked_now + left);
    if redis_calls >= redis_base && redis_calls >= expected {
        return false;
    }
    // The reset came after our call number `ours - redis_calls`: keep what followed it.
    keep_after(ours.saturating_sub(redis_calls));
    DISCONNECTS_BASE.store(super::DISCONNECTS.get(), Relaxed);
    true
}

/// Sets every counter to its increments made in calls after number `call`.
fn keep_after(call: u64) {
    let mut sums = [0u64; 16];
    let n = NEXT.load(Relaxed).min(LOG);
    for e in ENTRIES.iter().take(n) {
        let v = e.load(Relaxed);
        if v >> 16 > call {
            if let Some(s) = sums.get_mut(((v >> 8) & 0xff) as usize) {
                *s += v & 0xff;
            }
        }
    }
    for (i, s) in sums.iter().enumerate().take(ALL.len()) {
        super::set(i, *s);
    }
}

/// The filter saw `CONFIG RESETSTAT`: Redis' count of our calls restarts from zero now.
pub fn reset_seen_now() {
    REDIS_BASE.store(0, Relaxed);
    OURS_BASE.store(CALLS.get(), Relaxed);
    DISCONNECTS_BASE.store(0, Relaxed);
}

/// The module was loaded: Redis counts its commands from zero.
pub fn reload() {
    reset_seen_now();
}

#[cfg(test)]
mod tests {
    use super::super::{ACQUIRED, REFUSED};
    use super::*;

    /// One test: the counters are process-wide, and tests run on parallel threads.
    #[test]
    fn an_unseen_reset_keeps_exactly_what_followed_it() {
        reload();
        let call = |f: &dyn Fn()| {
            CALLS.inc();
            f();
        };
        let base = (ACQUIRED.get(), REFUSED.get());
        call(&|| ACQUIRED.inc());
        call(&|| REFUSED.inc());
        assert!(!reset_happened(2, 0), "Redis counted both calls: no reset");
        call(&|| ACQUIRED.inc());
        // Redis reset its statistics here: it counts only the next two calls.
        call(&|| ACQUIRED.inc());
        call(&|| {
            ACQUIRED.inc();
            REFUSED.inc();
        });
        assert!(reset_happened(2, 0));
        assert_eq!((ACQUIRED.get(), REFUSED.get()), (2, 1), "from {base:?}");
        assert!(!reset_happened(2, 0), "a second look sees nothing new");
        assert!(!reset_happened(2, 1), "a parked call Valkey has not counted yet is no reset");
    }
}
