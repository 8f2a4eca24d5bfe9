//! The names the command filter watches, and the flags that say whether it looks at keys.
//!
//! The module does not subscribe to the keyspace events of ordinary writes (every `SET`, `HSET`,
//! `DEL` in the server would call into it through a freshly built context). The read-hold
//! index, which must drop an entry before anyone else's write to its lock or timeout keys can
//! be read back, learns of those writes from a command filter, which Redis runs before every
//! command from a client, queued in `MULTI`, or called by a script. The module's one filter
//! (`crate::ffi::filter`) looks at keys only while the index has entries (one flag test
//! otherwise). Then each command costs a look at `argv[1]` ([`may_matter`]: a bit test for
//! the watched names, a first-byte test for timeout keys; a hash lookup or a suffix test only
//! when those pass), and a bit test on its name ([`may_name_later_keys`]) before the few
//! commands that change keys named later have their other arguments looked at. A command is
//! classified by name (`super::classify`, to let reads through) only when a key matters.
//!
//! This file is pure: the set of watched names (a multiset) and the flags; the classification
//! of a command by its name is `super::classify`, the filter's part that uses both
//! `super::filter`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use foldhash::fast::RandomState;

use crate::ffi::filter::{set_watching, watching};

/// Bits of the prefilter.
const BITS: usize = 1024;

#[derive(Default)]
struct Names {
    count: HashMap<Vec<u8>, u32, RandomState>,
    /// How many watched names set each bit of [`MASK`].
    per_bit: Vec<u32>,
    /// How many timeout-key roots start with each byte (bits of [`ROOTS`]).
    per_root: Vec<u32>,
}

/// A one-hash Bloom filter of the watched names over their length, first and last byte: a
/// static, so the filter's usual miss costs a few instructions and no thread-local access.
static MASK: [AtomicU64; BITS / 64] = [const { AtomicU64::new(0) }; BITS / 64];

/// The first bytes of the timeout keys of indexed locks (`{name}:...`, or `name:...` for a name
/// with a hash tag): a key starting with any other byte is no timeout key of theirs.
static ROOTS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

fn bit(name: &[u8]) -> usize {
    let (first, last) = (name.first().copied().unwrap_or(0), name.last().copied().unwrap_or(0));
    (name.len() ^ usize::from(first) << 2 ^ usize::from(last) << 5) % BITS
}

thread_local! {
    static NAMES: RefCell<Names> = RefCell::new(Names::default());
}

// The flags every command and every write of the module read first. Plain statics, not
// thread-locals: in a shared object each thread-local access is a call (`__tls_get_addr`).
// Redis runs the module on its main thread only, so relaxed ordering is all they need.

/// True while the read-hold index has entries: timeout-key arguments then matter too.
static INDEXED: AtomicBool = AtomicBool::new(false);

/// Whether the filter has anything to look for: any name watched or any read hold indexed.
/// The flag is the filter's own (`ffi::filter::watching`), read before every command.
#[inline]
pub fn active() -> bool {
    watching()
}

/// Whether timeout-key arguments matter (the read-hold index has entries).
#[inline]
pub fn indexed() -> bool {
    INDEXED.load(Relaxed)
}

/// The read-hold index has entries (or none any more).
pub fn set_indexed(on: bool) {
    INDEXED.store(on, Relaxed);
    refresh();
}

fn refresh() {
    let any = NAMES.with(|n| n.try_borrow().map(|n| !n.count.is_empty()).unwrap_or(true));
    set_watching(any || INDEXED.load(Relaxed));
}

/// Starts watching `name` (once more, if already watched).
pub fn add(name: &[u8]) {
    NAMES.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else { return };
        *n.count.entry(name.to_vec()).or_insert(0) += 1;
        if n.per_bit.is_empty() {
            n.per_bit = vec![0; BITS];
        }
        let b = bit(name);
        n.per_bit[b] += 1;
        MASK[b / 64].fetch_or(1 << (b % 64), Relaxed);
    });
    refresh();
}

/// Stops watching `name` once (it stays watched while other owners still watch it).
pub fn remove(name: &[u8]) {
    NAMES.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else { return };
        let Some(c) = n.count.get_mut(name) else { return };
        *c -= 1;
        if *c == 0 {
            n.count.remove(name);
        }
        let b = bit(name);
        if let Some(k) = n.per_bit.get_mut(b) {
            *k = k.saturating_sub(1);
            if *k == 0 {
                MASK[b / 64].fetch_and(!(1 << (b % 64)), Relaxed);
            }
        }
    });
    refresh();
}

/// A lock whose timeout keys start with `first` is indexed (once more).
pub fn add_root(first: u8) {
    NAMES.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else { return };
        if n.per_root.is_empty() {
            n.per_root = vec![0; 256];
        }
        n.per_root[usize::from(first)] += 1;
        ROOTS[usize::from(first / 64)].fetch_or(1 << (first % 64), Relaxed);
    });
}

/// One lock whose timeout keys start with `first` is no longer indexed.
pub fn remove_root(first: u8) {
    NAMES.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else { return };
        if let Some(k) = n.per_root.get_mut(usize::from(first)) {
            *k = k.saturating_sub(1);
            if *k == 0 {
                ROOTS[usize::from(first / 64)].fetch_and(!(1 << (first % 64)), Relaxed);
            }
        }
    });
}

/// Forgets every name (the module was loaded again: Redis forgot nothing it needs, we did).
pub fn reset() {
    NAMES.with(|n| {
        if let Ok(mut n) = n.try_borrow_mut() {
            *n = Names::default();
        }
    });
    for w in MASK.iter().chain(&ROOTS) {
        w.store(0, Relaxed);
    }
    INDEXED.store(false, Relaxed);
    refresh();
}

/// Whether `name` is watched: a bit test first, a hash lookup only when the bit is set.
#[inline]
pub fn is_watched(name: &[u8]) -> bool {
    let b = bit(name);
    if MASK[b / 64].load(Relaxed) & (1 << (b % 64)) == 0 {
        return false;
    }
    NAMES.with(|n| n.try_borrow().is_ok_and(|n| n.count.contains_key(name)))
}

/// Whether a command naming `key` may change what the filter watches: a watched name, or
/// (while read holds are indexed) a key shaped like a timeout key of an indexed lock. Almost
/// every other key costs a bit test and a byte test, inline; the rest is out of line.
#[inline]
pub fn may_matter(key: &[u8]) -> bool {
    let b = bit(key);
    let first = key.first().copied().unwrap_or(0);
    // Both loads and tests, no branch between them.
    let named = MASK[b / 64].load(Relaxed) & (1 << (b % 64)) != 0;
    let rooted = ROOTS[usize::from(first / 64)].load(Relaxed) & (1 << (first % 64)) != 0;
    (named || rooted) && matters(key)
}

/// [`may_matter`] past its bit tests.
#[inline(never)]
fn matters(key: &[u8]) -> bool {
    is_watched(key) || (indexed() && !key.is_empty() && looks_like_timeout_key(key))
}

/// How many distinct names are watched (for `INFO lockmod`).
pub fn watched() -> usize {
    NAMES.with(|n| n.try_borrow().map(|n| n.count.len()).unwrap_or(0))
}

const TIMEOUT_MARK: &[u8] = b":rwlock_timeout:";

/// Whether `name` has the shape of a read hold's timeout key, `...:rwlock_timeout:<digits>`:
/// a length and a last-byte test reject almost every other key at once.
#[inline]
pub fn looks_like_timeout_key(name: &[u8]) -> bool {
    let n = name.len();
    if n < TIMEOUT_MARK.len() + 2 || !name[n - 1].is_ascii_digit() {
        return false;
    }
    let digits = name.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    n > digits + TIMEOUT_MARK.len() && name[..n - digits].ends_with(TIMEOUT_MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test for everything that reads the process-wide flags (tests run on parallel
    /// threads; the names are per thread, the flags are not).
    #[test]
    fn a_name_is_watched_while_any_owner_watches_it_and_the_index_keeps_the_filter_active() {
        reset();
        assert!(!active());
        add(b"doc");
        add(b"doc");
        assert!(active() && is_watched(b"doc"));
        assert!(!is_watched(b"dog") && !is_watched(b"docs"));
        remove(b"doc");
        assert!(is_watched(b"doc"));
        remove(b"doc");
        assert!(!is_watched(b"doc") && !active());
        let long = vec![b'x'; 300];
        add(&long);
        assert!(is_watched(&long) && !is_watched(&long[..299]));
        remove(&long);
        assert!(!active());
        set_indexed(true);
        assert!(active() && indexed());
        // Timeout keys matter only while indexed, and only with an indexed lock's first byte.
        let timeout = b"{doc}:r1:rwlock_timeout:1";
        assert!(!may_matter(timeout));
        add_root(b'{');
        add_root(b'{');
        assert!(may_matter(timeout) && !may_matter(b"xdoc}:r1:rwlock_timeout:1") && !may_matter(b"{doc}"));
        remove_root(b'{');
        assert!(may_matter(timeout));
        remove_root(b'{');
        assert!(!may_matter(timeout));
        add(b"doc");
        assert!(may_matter(b"doc") && !may_matter(b"") && !may_matter(b"dog"));
        remove(b"doc");
        set_indexed(false);
        assert!(!active());
        add_root(b'{');
        assert!(!may_matter(timeout), "not while nothing is indexed");
        reset();
        set_indexed(true);
        assert!(!may_matter(timeout), "reset forgets the roots");
        set_indexed(false);
    }

    #[test]
    fn timeout_keys_are_recognised_by_their_suffix() {
        assert!(looks_like_timeout_key(b"{doc}:r1:rwlock_timeout:1"));
        assert!(looks_like_timeout_key(b"{doc}:a:b:rwlock_timeout:12"));
        assert!(!looks_like_timeout_key(b"{doc}:r1:rwlock_timeout:"));
        assert!(!looks_like_timeout_key(b":rwlock_timeout:1"));
        assert!(!looks_like_timeout_key(b"doc"));
        assert!(!looks_like_timeout_key(b"12"));
    }
}
