//! The read-hold index: for each read-write lock whose read holds were scanned once, a
//! [`HoldExpiries`] cache, so the next read unlocks find the largest lease in O(log N).
//!
//! The keyspace stays the only truth. An entry is built from it the first time a read unlock
//! needs it, is kept current by the module's own writes (`crate::effects` updates it, then
//! reports the write while [`accounted`] marks it as already reflected), and is dropped on
//! anything else that may have changed what it mirrors: a command of anyone else (Redisson's
//! Lua, a watchdog renewal, `DEL`, `RENAME`, ...) naming the lock hash or a key that may be one
//! of its timeout keys, seen by the command filter before it runs ([`changed`]); `EXEC` (its
//! commands were filtered when queued); eviction, and the expiry of the hash itself
//! ([`on_key_gone`]). `expired` events on timeout keys change nothing (an expired hold's time
//! lies in the past, so it never counts). `FLUSH*`, `SWAPDB`, loading and a role change drop
//! everything. Memory is bounded by [`MAX_POSITIONS`].
//!
//! Redis runs module commands and callbacks on its main thread, so the state is thread-local.
//! No borrow of it is held while calling into Redis (which may fire events back into here).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

use super::names as watched;
use crate::core::lock::hold_expiries::HoldExpiries;
use crate::core::names;

/// At most this many holds are indexed over all locks (about 40 bytes each).
pub const MAX_POSITIONS: usize = 250_000;

#[derive(Default)]
struct Registry {
    /// db -> lock key -> its holds.
    locks: HashMap<i32, HashMap<Vec<u8>, HoldExpiries>>,
    /// db -> the prefix of a lock's timeout keys (`{name}:` or `name:`) -> those locks (two
    /// lock names, `x` and `{x}`, share one prefix).
    roots: HashMap<i32, HashMap<Vec<u8>, Vec<Vec<u8>>>>,
    positions: usize,
}

thread_local! {
    static INDEX: RefCell<Registry> = RefCell::new(Registry::default());
    /// The lock (db, key) whose entry already reflects the event being fired.
    static ACCOUNTED: RefCell<Option<(i32, Vec<u8>)>> = const { RefCell::new(None) };
}

// Flags read on every write of the module: plain statics (a thread-local access is a call in
// a shared object); Redis runs the module on its main thread only.

/// Set if an event could not be applied: the next access drops everything.
static STALE: AtomicBool = AtomicBool::new(false);
/// Whether any lock is indexed: every write of the module asks first, and the common answer
/// (no read-write lock ever scanned) costs no lookup.
static ANY: AtomicBool = AtomicBool::new(false);

fn any() -> bool {
    ANY.load(Relaxed) || STALE.load(Relaxed)
}

/// An index no read unlock has used for this long is dropped: while it has entries the
/// module's command filter runs before every command in the server, and a lock whose read
/// unlocks are that rare gains little from it (the next one scans, and builds it again).
pub const IDLE_MS: i64 = 5_000;

/// When a read unlock last used (or built) an entry, in ms.
static LAST_USE: AtomicI64 = AtomicI64::new(0);

/// Drops the whole index if no read unlock used it for [`IDLE_MS`]. Called by the filter now
/// and then: with no command at all, an index costs nothing.
pub fn expire_idle(now: i64) {
    if any() && now - LAST_USE.load(Relaxed) > IDLE_MS {
        clear();
    }
}

fn with<T>(f: impl FnOnce(&mut Registry) -> T) -> Option<T> {
    INDEX.with(|r| {
        let mut r = r.try_borrow_mut().ok()?;
        if STALE.swap(false, Relaxed) {
            r.reset();
        }
        let out = f(&mut r);
        let any = !r.locks.values().all(HashMap::is_empty);
        if any != ANY.load(Relaxed) {
            ANY.store(any, Relaxed);
            watched::set_indexed(any);
        }
        Some(out)
    })
}

impl Registry {
    /// Forgets every entry, and the filter's interest in their names.
    fn reset(&mut self) {
        for key in self.locks.values().flat_map(HashMap::keys) {
            watched::remove(key);
            watched::remove_root(root_first(key));
        }
        *self = Registry::default();
    }

    fn entry(&mut self, db: i32, key: &[u8]) -> Option<&mut HoldExpiries> {
        self.locks.get_mut(&db)?.get_mut(key)
    }

    fn remove(&mut self, db: i32, key: &[u8]) {
        let Some(h) = self.locks.get_mut(&db).and_then(|m| m.remove(key)) else { return };
        watched::remove(key);
        watched::remove_root(root_first(key));
        self.positions = self.positions.saturating_sub(h.positions());
        let root = names::suffix(key, b"");
        if let Some(roots) = self.roots.get_mut(&db) {
            if let Some(v) = roots.get_mut(&root) {
                v.retain(|k| k != key);
                if v.is_empty() {
                    roots.remove(&root);
                }
            }
        }
    }

    /// Drops every lock that `key` may be a timeout key of, except the accounted one.
    fn remove_owners_of_timeout_key(&mut self, db: i32, key: &[u8], spare: Option<&[u8]>) {
        let Some(roots) = self.roots.get(&db) else { return };
        let mut hit: Vec<Vec<u8>> = Vec::new();
        for (p, _) in key.iter().enumerate().filter(|(_, &b)| b == b':') {
            if let Some(locks) = roots.get(&key[..=p]) {
                hit.extend(locks.iter().filter(|l| Some(l.as_slice()) != spare).cloned());
            }
        }
        for lock in hit {
            self.remove(db, &lock);
        }
    }
}

/// The first byte of a lock's timeout keys: those of `names::suffix(key, ..)`.
fn root_first(key: &[u8]) -> u8 {
    match key.first() {
        Some(&b) if key.contains(&b'{') => b,
        _ => b'{',
    }
}

/// True if `key` in `db` has an index entry.
pub fn is_indexed(db: i32, key: &[u8]) -> bool {
    if !any() {
        return false;
    }
    with(|r| r.entry(db, key).is_some()).unwrap_or(false)
}

/// The count an indexed lock's entry records for `field`, or None if the lock is not indexed.
pub fn count(db: i32, key: &[u8], field: &[u8]) -> Option<i64> {
    if !any() {
        return None;
    }
    with(|r| r.entry(db, key).map(|h| h.count(field))).flatten()
}

/// The largest remaining read lease of an indexed lock (0 when none is left), or None.
pub fn max_pttl(db: i32, key: &[u8], now: i64) -> Option<i64> {
    if !any() {
        return None;
    }
    LAST_USE.store(now, Relaxed);
    with(|r| r.entry(db, key).map(|h| h.max_pttl(now))).flatten()
}

/// Applies a write the module made to an indexed lock; false (nothing done) if not indexed.
/// `f` must not call into Redis.
pub fn update(db: i32, key: &[u8], f: impl FnOnce(&mut HoldExpiries)) -> bool {
    if !any() {
        return false;
    }
    with(|r| {
        let Some(h) = r.entry(db, key) else { return false };
        let before = h.positions();
        f(h);
        let after = h.positions();
        r.positions = (r.positions + after).saturating_sub(before);
        true
    })
    .unwrap_or(false)
}

/// Adds a freshly scanned lock, making room by dropping the others if needed; a lock with
/// more holds than the whole budget stays unindexed (its unlocks scan).
pub fn insert(db: i32, key: &[u8], holds: HoldExpiries, now: i64) {
    LAST_USE.store(now, Relaxed);
    let n = holds.positions();
    if n > MAX_POSITIONS {
        return;
    }
    with(|r| {
        r.remove(db, key);
        if r.positions + n > MAX_POSITIONS {
            r.reset();
        }
        r.positions += n;
        r.locks.entry(db).or_default().insert(key.to_vec(), holds);
        watched::add(key);
        watched::add_root(root_first(key));
        r.roots.entry(db).or_default().entry(names::suffix(key, b"")).or_default().push(key.to_vec());
    });
}

/// Forgets one lock (the module deleted it).
pub fn forget(db: i32, key: &[u8]) {
    if !any() {
        return;
    }
    with(|r| r.remove(db, key));
}

/// Forgets everything: FLUSH*, SWAPDB, loading, a role change.
pub fn clear() {
    if !any() {
        return;
    }
    if with(Registry::reset).is_none() {
        STALE.store(true, Relaxed);
    }
}

/// The module was loaded (again): whatever it remembered, it did not see the writes made
/// while it was not loaded.
pub fn reload() {
    INDEX.with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            *r = Registry::default();
        }
    });
    STALE.store(false, Relaxed);
    ANY.store(false, Relaxed);
}

/// Runs `write` (the module's write of `key`, already reflected in `key`'s entry) so that
/// reporting it to [`on_write`] does not drop that entry.
pub fn accounted<T>(db: i32, key: &[u8], write: impl FnOnce() -> T) -> T {
    let previous = ACCOUNTED.with(|a| a.replace(Some((db, key.to_vec()))));
    let out = write();
    ACCOUNTED.with(|a| *a.borrow_mut() = previous);
    out
}

/// The module wrote `key` in `db`: drop what the write may have made stale, except the entry
/// it was accounted to (the store updates that one itself).
pub fn on_write(db: i32, key: &[u8]) {
    if any() {
        drop_stale(Some(db), key, true);
    }
}

/// A command of someone else names `key` (the command filter, before the command runs; the
/// database is unknown, so every database's entry of that name goes).
pub fn changed(key: &[u8]) {
    if any() {
        drop_stale(None, key, true);
    }
}

/// An `expired` or `evicted` event. An expired timeout key needs nothing: its hold's expiry
/// lies in the past, so it no longer counts.
pub fn on_key_gone(db: i32, event: &[u8], key: &[u8]) {
    if any() {
        drop_stale(Some(db), key, event != b"expired");
    }
}

fn drop_stale(db: Option<i32>, key: &[u8], timeout_keys_too: bool) {
    let timeout_key = timeout_keys_too && watched::looks_like_timeout_key(key);
    let applied = with(|r| {
        let dbs: Vec<i32> = match db {
            Some(d) => vec![d],
            None => r.locks.keys().copied().collect(),
        };
        ACCOUNTED.with(|a| {
            let a = a.borrow();
            for db in dbs {
                let spare = a.as_ref().filter(|(d, _)| *d == db).map(|(_, k)| k.as_slice());
                if spare != Some(key) {
                    r.remove(db, key);
                }
                if timeout_key {
                    r.remove_owners_of_timeout_key(db, key, spare);
                }
            }
        })
    });
    if applied.is_none() {
        STALE.store(true, Relaxed);
    }
}

/// Holds indexed now, over all locks (for tests and INFO).
pub fn positions() -> usize {
    with(|r| r.positions).unwrap_or(0)
}
