//! Counters since start (or the last `CONFIG RESETSTAT`), shown by `INFO lockmod`.
//!
//! Plain relaxed atomics: Redis calls the module from its main thread, and a counter costs one
//! uncontended add on the hot path.

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
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
/// Locks granted by the module whose lease ran out while still held.
pub static EXPIRED_HELD: Counter = Counter::new();
/// Bytes the module has allocated and not freed (maintained by the allocator).
pub static MEMORY: AtomicI64 = AtomicI64::new(0);

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
    &EXPIRED_HELD,
];

pub fn reset() {
    for c in ALL {
        c.0.store(0, Relaxed);
    }
    crate::redisson::stats::reset();
}

/// The `INFO lockmod` fields, in order (Redis prefixes each with `lockmod_`).
pub fn info_fields(parked_now: u64) -> Vec<(&'static str, i64)> {
    let g = |c: &Counter| c.get() as i64;
    let mut fields = vec![
        ("acquired", g(&ACQUIRED)),
        ("refused", g(&REFUSED)),
        ("reentries", g(&REENTRIES)),
        ("released", g(&RELEASED)),
        ("forced", g(&FORCED)),
        ("renewed", g(&RENEWED)),
        ("blocked_now", parked_now as i64),
        ("blocked_total", g(&PARKED)),
        ("handoffs", g(&HANDOFFS)),
        ("block_timeouts", g(&TIMEOUTS)),
        ("block_disconnects", g(&DISCONNECTS)),
        ("expired_while_held", g(&EXPIRED_HELD)),
        ("memory_bytes", MEMORY.load(Relaxed)),
        ("indexed_read_holds", crate::hold_index::positions() as i64),
    ];
    fields.extend(crate::redisson::stats::info_fields());
    fields
}

// -- Leases that expire while held ------------------------------------------------------------
//
// Redis reports an expiry only after deleting the key, so the module remembers which keys it
// granted (a 64-bit hash per held lock) and forgets them on any deletion event: an `expired`
// event for a remembered key is a lease that ran out under its holder.
//
// Every first grant pays one insert, so the hashing is foldhash (seeded per process, so key
// names cannot be chosen to collide) rather than std's SipHash: a few ns instead of ~30.

type Held = (RandomState, HashSet<u64, RandomState>);

thread_local! {
    static HELD: RefCell<Held> = RefCell::new((RandomState::default(), HashSet::default()));
}

fn fingerprint(state: &RandomState, db: i32, key: &[u8]) -> u64 {
    state.hash_one((db, key))
}

/// The module granted `key` (a first hold).
pub fn granted(db: i32, key: &[u8]) {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            let f = fingerprint(&h.0, db, key);
            h.1.insert(f);
        }
    });
}

/// A key event: forget deleted keys, and count the ones that expired while held.
pub fn on_key_event(event: &[u8], db: i32, key: &[u8]) {
    let expired = event == b"expired" || event == b"evicted";
    if !(expired || event == b"del" || event == b"rename_from" || event == b"set") {
        return;
    }
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            if h.1.is_empty() {
                return;
            }
            let f = fingerprint(&h.0, db, key);
            if h.1.remove(&f) && event == b"expired" {
                EXPIRED_HELD.inc();
            }
        }
    });
}

/// Everything was flushed: nothing is held.
pub fn forget_all() {
    HELD.with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.1.clear();
        }
    });
}
