//! The names the command filter watches, and which arguments of a command it looks at.
//!
//! The module does not subscribe to the keyspace events of ordinary writes (every `SET`, `HSET`,
//! `DEL` in the server would call into it through a freshly built context). Instead its
//! command filter, which Redis runs before every command from a client, from `MULTI` and from
//! each `redis.call()` in a script, looks at the command's key arguments, and only while
//! something can go stale: a lock with parked clients, or a read-hold index entry. Then the
//! cost per command is a name classification and a length test (a hash lookup when the length
//! matches a watched name); otherwise it is one thread-local read.
//!
//! This file is pure: the set of watched names (a multiset: a lock with parked clients and an
//! index entry is counted twice), and the classification of a command by its name. The filter
//! itself is `crate::ffi::server`; what a hit does is `crate::blocking::changed` and
//! `crate::hold_index::changed`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use foldhash::fast::RandomState;

/// Lengths below this are tested against a bitmask before any hash lookup.
const SHORT: usize = 256;

#[derive(Default)]
struct Names {
    count: HashMap<Vec<u8>, u32, RandomState>,
    /// How many watched names have each length (index `SHORT` counts all longer ones).
    by_len: Vec<u32>,
}

/// Bit `l` set when some watched name has length `l` (`l < SHORT`); the last word's top bit
/// stands for every longer length. A static, so the filter's usual miss reads no thread-local.
static MASK: [AtomicU64; SHORT / 64] = [const { AtomicU64::new(0) }; SHORT / 64];

fn mask_bit(len: usize) -> (usize, u64) {
    let l = len.min(SHORT - 1);
    (l / 64, 1 << (l % 64))
}

thread_local! {
    static NAMES: RefCell<Names> = RefCell::new(Names::default());
}

// The two flags every command and every write of the module read first. Plain statics, not
// thread-locals: in a shared object each thread-local access is a call (`__tls_get_addr`).
// Redis runs the module on its main thread only, so relaxed ordering is all they need.

/// True while any name is watched or any read hold is indexed: the filter's first test.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// True while the read-hold index has entries: timeout-key arguments then matter too.
static INDEXED: AtomicBool = AtomicBool::new(false);

/// Whether the filter has anything to look for.
#[inline]
pub fn active() -> bool {
    ACTIVE.load(Relaxed)
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

/// Told when the filter has something to look for, or nothing any more (the module registers
/// its command filter only meanwhile).
static ON_CHANGE: Mutex<Option<fn(bool)>> = Mutex::new(None);

/// Sets what [`ON_CHANGE`] calls.
pub fn on_change(f: fn(bool)) {
    if let Ok(mut h) = ON_CHANGE.lock() {
        *h = Some(f);
    }
}

fn refresh() {
    let any = NAMES.with(|n| n.try_borrow().map(|n| !n.count.is_empty()).unwrap_or(true));
    let now = any || INDEXED.load(Relaxed);
    if ACTIVE.swap(now, Relaxed) != now {
        let hook = ON_CHANGE.lock().ok().and_then(|h| *h);
        if let Some(f) = hook {
            f(now);
        }
    }
}

/// Starts watching `name` (once more, if already watched).
pub fn add(name: &[u8]) {
    NAMES.with(|n| {
        let Ok(mut n) = n.try_borrow_mut() else { return };
        *n.count.entry(name.to_vec()).or_insert(0) += 1;
        if n.by_len.is_empty() {
            n.by_len = vec![0; SHORT + 1];
        }
        let l = name.len().min(SHORT);
        n.by_len[l] += 1;
        let (w, b) = mask_bit(name.len());
        MASK[w].fetch_or(b, Relaxed);
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
        let l = name.len().min(SHORT);
        if let Some(b) = n.by_len.get_mut(l) {
            *b = b.saturating_sub(1);
        }
        // The bit of the last length stands for every longer one: clear it when none is left.
        let (w, b) = mask_bit(name.len());
        let left = if l >= SHORT - 1 { n.by_len[SHORT - 1..].iter().sum() } else { n.by_len[l] };
        if left == 0 {
            MASK[w].fetch_and(!b, Relaxed);
        }
    });
    refresh();
}

/// Forgets every name (the module was loaded again: Redis forgot nothing it needs, we did).
pub fn reset() {
    NAMES.with(|n| {
        if let Ok(mut n) = n.try_borrow_mut() {
            *n = Names::default();
        }
    });
    for w in &MASK {
        w.store(0, Relaxed);
    }
    INDEXED.store(false, Relaxed);
    refresh();
}

/// Whether `name` is watched: a bit test on its length first, a hash lookup only on a match.
#[inline]
pub fn is_watched(name: &[u8]) -> bool {
    let (w, b) = mask_bit(name.len());
    if MASK[w].load(Relaxed) & b == 0 {
        return false;
    }
    NAMES.with(|n| n.try_borrow().is_ok_and(|n| n.count.contains_key(name)))
}

/// How many distinct names are watched (for `INFO lockmod`).
pub fn watched() -> usize {
    NAMES.with(|n| n.try_borrow().map(|n| n.count.len()).unwrap_or(0))
}

const TIMEOUT_MARK: &[u8] = b":rwlock_timeout:";

/// Whether `name` has the shape of a read hold's timeout key, `...:rwlock_timeout:<digits>`:
/// a test of its last bytes, so the filter can afford it on every key argument.
#[inline]
pub fn looks_like_timeout_key(name: &[u8]) -> bool {
    let digits = name.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    digits > 0 && name.len() > digits + TIMEOUT_MARK.len() && name[..name.len() - digits].ends_with(TIMEOUT_MARK)
}

/// Which arguments of a command may name a key it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// None that matter: a read, or a command of this module (which keeps its own state
    /// current and serves its lock itself).
    Ignore,
    /// `argv[1]`: every single-key write (`SET`, `HSET`, `PEXPIRE`, `LPOP`, `RESTORE`, ...), and
    /// the destination of the `*STORE` commands.
    First,
    /// Any argument from `argv[1]` on: the commands that change keys named later (`DEL k1 k2`,
    /// `RENAME a b`, `LMOVE`, `BITOP op dest`, `SORT ... STORE d`, `MIGRATE`, the `*MPOP`s).
    All,
    /// `EXEC`: the queued commands were filtered when they were queued, not when they run.
    Exec,
}

/// Classifies a command by its name (any case), by length first and without copying: the
/// filter does this for every command while something is watched. Unknown commands are
/// [`Keys::First`]: a spurious hit only costs a re-check, a missed one a late wake-up.
pub fn classify(cmd: &[u8]) -> Keys {
    let is = |name: &[u8]| cmd.eq_ignore_ascii_case(name);
    let any = |names: &[&[u8]]| names.iter().any(|n| cmd.eq_ignore_ascii_case(n));
    match cmd.len() {
        3 if is(b"del") => Keys::All,
        3 if any(&[b"get", b"ttl"]) => Keys::Ignore,
        4 if is(b"exec") => Keys::Exec,
        4 if is(b"mset") || is(b"copy") || is(b"sort") => Keys::All,
        4 if any(&[b"pttl", b"type", b"hget", b"hlen", b"llen", b"mget", b"dump", b"ping", b"info", b"eval"]) => {
            Keys::Ignore
        }
        5 if any(&[b"smove", b"lmove", b"bitop", b"lmpop", b"zmpop", b"blpop", b"brpop"]) => Keys::All,
        5 if any(&[
            b"multi", b"hkeys", b"hvals", b"scard", b"zcard", b"zrank", b"watch", b"fcall", b"hscan", b"sscan",
        ]) =>
        {
            Keys::Ignore
        }
        6 if any(&[b"unlink", b"msetnx", b"rename", b"blmove", b"blmpop", b"bzmpop"]) => Keys::All,
        6 if any(&[
            b"exists", b"strlen", b"lindex", b"lrange", b"zscore", b"zrange", b"config", b"client", b"select",
        ]) =>
        {
            Keys::Ignore
        }
        7 if is(b"migrate") => Keys::All,
        7 if any(&[b"hgetall", b"hexists", b"discard", b"evalsha", b"publish"]) => Keys::Ignore,
        8 if any(&[b"renamenx", b"bzpopmin", b"bzpopmax"]) => Keys::All,
        8 if any(&[b"smembers", b"spublish"]) => Keys::Ignore,
        9 if any(&[b"rpoplpush", b"georadius"]) => Keys::All,
        9 if any(&[b"sismember"]) => Keys::Ignore,
        10 if is(b"brpoplpush") => Keys::All,
        14 if is(b"geosearchstore") => Keys::All,
        17 if is(b"georadiusbymember") => Keys::All,
        n if n >= 9 && is_own(cmd) => Keys::Ignore,
        _ => Keys::First,
    }
}

/// A command of this module (`LOCK.*`, `RWLOCK.*`, `FAIRLOCK.*`): it keeps what it changes
/// current itself and serves its own lock.
fn is_own(cmd: &[u8]) -> bool {
    let starts = |p: &[u8]| cmd.len() > p.len() && cmd[..p.len()].eq_ignore_ascii_case(p);
    starts(b"lock.") || starts(b"rwlock.") || starts(b"fairlock.")
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
        set_indexed(false);
        assert!(!active());
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

    #[test]
    fn commands_are_classified_by_name_in_any_case() {
        assert_eq!(classify(b"SET"), Keys::First);
        assert_eq!(classify(b"hset"), Keys::First);
        assert_eq!(classify(b"PExpire"), Keys::First);
        assert_eq!(classify(b"DEL"), Keys::All);
        assert_eq!(classify(b"unlink"), Keys::All);
        assert_eq!(classify(b"RENAME"), Keys::All);
        assert_eq!(classify(b"exec"), Keys::Exec);
        assert_eq!(classify(b"HGETALL"), Keys::Ignore);
        assert_eq!(classify(b"LOCK.ACQUIRE"), Keys::Ignore);
        assert_eq!(classify(b"fairlock.unlock"), Keys::Ignore);
        assert_eq!(classify(b"publish"), Keys::Ignore);
        assert_eq!(classify(b"MIGRATE"), Keys::All);
        assert_eq!(classify(b"zrank"), Keys::Ignore);
        assert_eq!(classify(b"Config"), Keys::Ignore);
        assert_eq!(classify(b"lock."), Keys::First);
        assert_eq!(classify(b"SOMEMODULE.WRITE"), Keys::First);
        assert_eq!(classify(b"averyveryverylongcommandname"), Keys::First);
    }
}
