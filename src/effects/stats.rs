//! Counters since start (or the last `CONFIG RESETSTAT`), shown by `INFO lockmod`
//! (`crate::server::info` assembles the section), and the leases granted and still held.
//!
//! Plain relaxed atomics: Redis calls the module from its main thread, and a counter costs one
//! uncontended add on the hot path.

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use foldhash::fast::RandomState;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    /// A load and a store, not a locked read-modify-write: only Redis' main thread runs the
    /// module, and an atomic add costs tens of cycles on every grant.
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    pub fn inc(&self) {
        self.add(1);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Grants: first holds, re-entries and BLOCK hand-offs.
pub static ACQUIRED: Counter = Counter::new();
/// Acquires answered "held by someone else" (a BLOCK call that parks counts once).
pub static REFUSED: Counter = Counter::new();
/// Re-entries among the grants.
pub static REENTRIES: Counter = Counter::new();
/// Unlocks that released a hold (partially or completely).
pub static RELEASED: Counter = Counter::new();
/// Force-unlocks that deleted a lock.
pub static FORCED: Counter = Counter::new();
/// Renewals of a held lock.
pub static RENEWED: Counter = Counter::new();
/// Clients parked with BLOCK, in total.
pub static PARKED: Counter = Counter::new();
/// Grants made to parked clients.
pub static HANDOFFS: Counter = Counter::new();
/// Parked clients whose BLOCK time ran out.
pub static TIMEOUTS: Counter = Counter::new();
/// Parked clients that disconnected (or were unblocked with an error).
pub static DISCONNECTS: Counter = Counter::new();
/// Grants to parked clients given back because their reply never reached the client (it was
/// unblocked with an error, or went away, after the grant and before its reply).
pub static GIVEN_BACK: Counter = Counter::new();
/// Locks granted by the module whose lease ran out while still held.
pub static EXPIRED_HELD: Counter = Counter::new();
/// Times a change armed the 0 ms timer that serves locks with parked clients (a release by the
/// module's own command serves in the command and arms none).
pub static SERVE_TIMERS: Counter = Counter::new();
/// Synchronizer commands run (`SEMAPHORE.*`, `PSEMAPHORE.*`, `COUNTDOWN.*`).
pub static SYNC_CALLS: Counter = Counter::new();
/// Synchronizer waits satisfied: permits taken, a latch seen open (first try or parked).
pub static SYNC_GRANTED: Counter = Counter::new();
/// Synchronizer waits refused (a BLOCK call that parks counts once).
pub static SYNC_REFUSED: Counter = Counter::new();
/// Synchronizer waiters parked with BLOCK, in total (also in `PARKED`).
pub static SYNC_PARKED: Counter = Counter::new();
/// Parked synchronizer waiters served (also in `HANDOFFS`).
pub static SYNC_HANDOFFS: Counter = Counter::new();
/// Expired permits of the expirable semaphore returned by the module's timer.
pub static PERMITS_RECLAIMED: Counter = Counter::new();
/// Rate limiter commands run (`RATELIMITER.*`).
pub static RATE_CALLS: Counter = Counter::new();
/// Rate limiter acquires granted (first try or parked).
pub static RATE_GRANTED: Counter = Counter::new();
/// Rate limiter acquires refused (a BLOCK call that parks counts once).
pub static RATE_REFUSED: Counter = Counter::new();
/// Rate limiter waiters parked with BLOCK, in total (also in `PARKED`, `SYNC_PARKED`).
pub static RATE_PARKED: Counter = Counter::new();
/// Parked rate limiter waiters served (also in `HANDOFFS`, `SYNC_HANDOFFS`).
pub static RATE_HANDOFFS: Counter = Counter::new();
/// Times a rate limiter's zset was summed member by member: its total was not remembered,
/// because someone else (Redisson's Lua) changed it since the module last did.
pub static RATE_WINDOW_SUMS: Counter = Counter::new();

/// Every counter, for `CONFIG RESETSTAT`.
const ALL: &[&Counter] = &[
    &ACQUIRED,
    &REFUSED,
    &REENTRIES,
    &RELEASED,
    &FORCED,
    &RENEWED,
    &PARKED,
    &HANDOFFS,
    &TIMEOUTS,
    &DISCONNECTS,
    &GIVEN_BACK,
    &EXPIRED_HELD,
    &SERVE_TIMERS,
    &SYNC_CALLS,
    &SYNC_GRANTED,
    &SYNC_REFUSED,
    &SYNC_PARKED,
    &SYNC_HANDOFFS,
    &PERMITS_RECLAIMED,
    &RATE_CALLS,
    &RATE_GRANTED,
    &RATE_REFUSED,
    &RATE_PARKED,
    &RATE_HANDOFFS,
    &RATE_WINDOW_SUMS,
];

/// `CONFIG RESETSTAT`: every counter back to 0.
pub fn reset() {
    for c in ALL {
        c.0.store(0, Relaxed);
    }
}

// -- Leases that expire while held ------------------------------------------------------------
//
// Redis reports an expiry only after deleting the key, so the module remembers which keys it
// granted (a 64-bit hash per held lock, with the lease end it last wrote and when the hold
// began) and forgets them when it deletes them itself: an `expired` event for a remembered key
// is a lease that ran out under its holder. When the hold began is what `LOCK.CONTENDED` shows
// as its age.
//
// The module no longer hears other clients' writes (it subscribes to `expired` and `evicted`
// events only), so a lock deleted, renamed or renewed by someone else stays remembered. A sweep,
// run when the set has doubled since the last one, forgets entries whose lease ended more than
// [`GRACE_MS`] ago without an `expired` event; the cost: a lock renewed only by others for
// that long is not counted when it finally expires.
//
// Every first grant pays one insert, so the hashing is foldhash (seeded per process, so key
// names cannot be chosen to collide) rather than std's SipHash: a few ns instead of ~30.

/// How long past its lease end a remembered lock is kept without an `expired` event.
pub const GRACE_MS: i64 = 10 * 60 * 1000;
/// The set is not swept below this size.
const SWEEP_FROM: usize = 1024;

/// A lock the module granted: the lease end it last wrote and when the hold began (ms).
#[derive(Clone, Copy)]
struct Lease {
    end: i64,
    since: i64,
}

struct Held {
    state: RandomState,
    /// Fingerprint -> its lease.
    leases: HashMap<u64, Lease, BuildHasherDefault<Fingerprinted>>,
    /// Sweep when the set reaches this size.
    sweep_at: usize,
}

thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held {
        state: RandomState::default(),
        leases: HashMap::default(),
        sweep_at: SWEEP_FROM,
    });
}

/// The set's keys are already seeded hashes: they are used as they are, not hashed again.
#[derive(Default)]
struct Fingerprinted(u64);

impl Hasher for Fingerprinted {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are u64); anything else is folded in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

fn fingerprint(state: &RandomState, db: i32, key: &[u8]) -> u64 {
    state.hash_one((db, key))
}

/// The module granted `key` (a first hold) with a lease ending at `at`. `joins` when the
/// grant may join holds already there (a read hold): the hold began with the first of them, if
/// their lease still runs.
pub fn granted(db: i32, key: &[u8], at: i64, now: i64, joins: bool) {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            let f = fingerprint(&h.state, db, key);
            // One probe of the table, as the plain insert it replaces: a first grant pays no
            // second lookup for the hold's age.
            match h.leases.entry(f) {
                Entry::Occupied(mut e) => {
                    let l = e.get_mut();
                    if !(joins && l.end >= now) {
                        l.since = now;
                    }
                    l.end = at;
                }
                Entry::Vacant(e) => {
                    e.insert(Lease { end: at, since: now });
                }
            }
            if h.leases.len() >= h.sweep_at {
                h.leases.retain(|_, l| l.end + GRACE_MS >= now);
                h.sweep_at = (2 * h.leases.len()).max(SWEEP_FROM);
            }
        }
    });
}

/// The module moved the lease of `key` to end at `at` (a renewal, a re-entry, an unlock that
/// leaves holds).
pub fn lease_moved(db: i32, key: &[u8], at: i64) {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            if h.leases.is_empty() {
                return;
            }
            let f = fingerprint(&h.state, db, key);
            if let Some(l) = h.leases.get_mut(&f) {
                l.end = at;
            }
        }
    });
}

/// `key` is gone: deleted by the module (`del`), or an `expired`/`evicted` event. An expiry
/// of a remembered key is a lease that ran out while held.
pub fn on_key_event(event: &[u8], db: i32, key: &[u8]) {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            if h.leases.is_empty() {
                return;
            }
            let f = fingerprint(&h.state, db, key);
            if h.leases.remove(&f).is_some() && event == b"expired" {
                EXPIRED_HELD.inc();
            }
        }
    });
}

/// When the module's hold of `key` began (ms), if the module granted it and has not seen it
/// end: for `LOCK.CONTENDED`.
pub fn held_since(db: i32, key: &[u8]) -> Option<i64> {
    HELD.with(|h| {
        let h = h.try_borrow().ok()?;
        h.leases.get(&fingerprint(&h.state, db, key)).map(|l| l.since)
    })
}

/// Locks the module granted whose lease has not ended at `now` (`INFO lockmod`'s
/// `held_locks`): O(locks remembered). A lock the module released or saw expire is gone at
/// once; one deleted by anyone else counts until its lease would have ended.
pub fn held_now(now: i64) -> usize {
    HELD.with(|h| h.try_borrow().map(|h| h.leases.values().filter(|l| l.end >= now).count()).unwrap_or(0))
}

/// Locks remembered as granted and held (for tests of the sweep).
pub fn remembered() -> usize {
    HELD.with(|h| h.try_borrow().map(|h| h.leases.len()).unwrap_or(0))
}

/// Everything was flushed: nothing is held.
pub fn forget_all() {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.leases.clear();
            h.sweep_at = SWEEP_FROM;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_of_a_granted_lock_counts_once_and_a_deletion_not_at_all() {
        let before = EXPIRED_HELD.get();
        granted(0, b"a", 1_000, 0, false);
        granted(0, b"b", 1_000, 0, false);
        on_key_event(b"del", 0, b"b");
        on_key_event(b"expired", 0, b"b");
        on_key_event(b"expired", 1, b"a");
        assert_eq!(EXPIRED_HELD.get(), before);
        on_key_event(b"expired", 0, b"a");
        on_key_event(b"expired", 0, b"a");
        assert_eq!(EXPIRED_HELD.get(), before + 1);
    }

    #[test]
    fn the_sweep_forgets_locks_whose_lease_ended_long_ago() {
        forget_all();
        granted(0, b"renewed", 1_000, 2_000, false);
        lease_moved(0, b"renewed", 10 * GRACE_MS);
        for i in 0..SWEEP_FROM - 2 {
            granted(0, format!("old{i}").as_bytes(), 1_000, 2_000, false);
        }
        assert_eq!(remembered(), SWEEP_FROM - 1);
        granted(0, b"new", 3 * GRACE_MS, 2 * GRACE_MS, false);
        assert_eq!(remembered(), 2, "only the renewed lock and the new one are left");
    }

    #[test]
    fn a_hold_is_aged_from_its_first_grant_and_a_joining_read_hold_keeps_that_age() {
        forget_all();
        granted(0, b"lock", 5_000, 1_000, false);
        lease_moved(0, b"lock", 9_000);
        assert_eq!(held_since(0, b"lock"), Some(1_000), "a renewal keeps the age");
        granted(0, b"rw", 5_000, 1_000, true);
        granted(0, b"rw", 6_000, 2_000, true);
        assert_eq!(held_since(0, b"rw"), Some(1_000), "a second reader joins the running hold");
        granted(0, b"rw", 9_000, 7_000, true);
        assert_eq!(held_since(0, b"rw"), Some(7_000), "the earlier holds' lease had ended");
        granted(0, b"lock", 20_000, 3_000, false);
        assert_eq!(held_since(0, b"lock"), Some(3_000), "a first hold of a free lock starts anew");
        assert_eq!(held_now(8_000), 2, "both leases run");
        assert_eq!(held_now(10_000), 1, "the read holds' lease ended at 9 s, the lock's runs to 20 s");
        assert_eq!(held_now(21_000), 0);
        on_key_event(b"del", 0, b"lock");
        assert_eq!(held_since(0, b"lock"), None);
        assert_eq!(held_since(1, b"rw"), None, "another database");
    }
}
