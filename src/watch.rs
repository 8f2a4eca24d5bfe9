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
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

use foldhash::fast::RandomState;

/// Lengths below this are tested against a bitmask before any hash lookup.
const SHORT: usize = 256;

#[derive(Default)]
struct Names {
    count: HashMap<Vec<u8>, u32, RandomState>,
    /// How many watched names have each length (index `SHORT` counts all longer ones).
    by_len: Vec<u32>,
    /// Bit `l` set when some watched name has length `l` (`l < SHORT`).
    mask: [u64; SHORT / 64],
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
        if l < SHORT {
            n.mask[l / 64] |= 1 << (l % 64);
        }
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
            if *b == 0 && l < SHORT {
                n.mask[l / 64] &= !(1 << (l % 64));
            }
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
    INDEXED.store(false, Relaxed);
    refresh();
}

/// Whether `name` is watched: a bit test on its length first, a hash lookup only on a match.
#[inline]
pub fn is_watched(name: &[u8]) -> bool {
    NAMES.with(|n| {
        let Ok(n) = n.try_borrow() else { return false };
        let l = name.len();
        let maybe = if l < SHORT { n.mask[l / 64] & (1 << (l % 64)) != 0 } else { n.by_len[SHORT] > 0 };
        maybe && n.count.contains_key(name)
    })
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

/// The longest command name classified by name; longer ones are [`Keys::First`].
const LONGEST: usize = 20;

/// Classifies a command by its name (any case). Unknown commands are [`Keys::First`]: a
/// spurious hit only costs a re-check, a missed one a late wake-up.
pub fn classify(cmd: &[u8]) -> Keys {
    if cmd.len() > LONGEST {
        return Keys::First;
    }
    let mut buf = [0u8; LONGEST];
    let lower = &mut buf[..cmd.len()];
    lower.copy_from_slice(cmd);
    lower.make_ascii_lowercase();
    if lower.starts_with(b"lock.") || lower.starts_with(b"rwlock.") || lower.starts_with(b"fairlock.") {
        return Keys::Ignore;
    }
    match &*lower {
        b"exec" => Keys::Exec,
        b"del" | b"unlink" | b"mset" | b"msetnx" | b"rename" | b"renamenx" | b"copy" | b"smove" | b"lmove"
        | b"blmove" | b"rpoplpush" | b"brpoplpush" | b"bitop" | b"sort" | b"georadius" | b"georadiusbymember"
        | b"geosearchstore" | b"lmpop" | b"blmpop" | b"zmpop" | b"bzmpop" | b"blpop" | b"brpop" | b"bzpopmin"
        | b"bzpopmax" | b"migrate" => Keys::All,
        // Reads that name a key first, and commands without keys, that clients send often:
        // a monitoring `HGETALL` of a lock must not drop its index entry.
        b"get" | b"mget" | b"exists" | b"type" | b"ttl" | b"pttl" | b"expiretime" | b"pexpiretime" | b"strlen"
        | b"getrange" | b"hget" | b"hmget" | b"hgetall" | b"hexists" | b"hlen" | b"hkeys" | b"hvals" | b"hstrlen"
        | b"hrandfield" | b"hscan" | b"llen" | b"lindex" | b"lrange" | b"lpos" | b"scard" | b"sismember"
        | b"smembers" | b"smismember" | b"sscan" | b"zcard" | b"zcount" | b"zscore" | b"zmscore" | b"zrank"
        | b"zrevrank" | b"zrange" | b"zrevrange" | b"zrangebyscore" | b"zrevrangebyscore" | b"zscan" | b"dump"
        | b"touch" | b"object" | b"memory" | b"ping" | b"echo" | b"info" | b"multi" | b"discard" | b"watch"
        | b"unwatch" | b"select" | b"client" | b"config" | b"command" | b"scan" | b"keys" | b"dbsize" | b"time"
        | b"eval" | b"evalsha" | b"eval_ro" | b"evalsha_ro" | b"fcall" | b"fcall_ro" | b"script" | b"function"
        | b"subscribe" | b"psubscribe" | b"ssubscribe" | b"unsubscribe" | b"punsubscribe" | b"sunsubscribe"
        | b"publish" | b"spublish" | b"pubsub" | b"hello" | b"auth" | b"quit" | b"reset" | b"readonly"
        | b"readwrite" | b"wait" | b"waitaof" | b"slowlog" | b"latency" | b"monitor" => Keys::Ignore,
        _ => Keys::First,
    }
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
        assert_eq!(classify(b"SOMEMODULE.WRITE"), Keys::First);
        assert_eq!(classify(b"averyveryverylongcommandname"), Keys::First);
    }
}
