//! The names the command filter watches, and which arguments of a command it looks at.
//!
//! The module does not subscribe to the keyspace events of ordinary writes (every `SET`, `HSET`,
//! `DEL` in the server would call into it through a freshly built context). The read-hold
//! index, which must drop an entry before anyone else's write to its lock or timeout keys can
//! be read back, learns of those writes from a command filter, which Redis runs before every
//! command from a client, queued in `MULTI`, or called by a script. The module's one filter
//! (`crate::ffi::server`) looks at keys only while the index has entries (one flag test
//! otherwise). Then each command costs a look at `argv[1]` ([`may_matter`]: a bit test for
//! the watched names, a first-byte test for timeout keys; a hash lookup or a suffix test only
//! when those pass), and a bit test on its name ([`may_name_later_keys`]) before the few
//! commands that change keys named later have their other arguments looked at. A command is
//! classified by name ([`classify`], to let reads through) only when a key matters.
//!
//! This file is pure: the set of watched names (a multiset), and the classification of a
//! command by its name. The filter's part that uses them is `crate::ffi::watch_filter`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use foldhash::fast::RandomState;

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

/// True while any name is watched or any read hold is indexed: the filter looks at keys.
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

fn refresh() {
    let any = NAMES.with(|n| n.try_borrow().map(|n| !n.count.is_empty()).unwrap_or(true));
    ACTIVE.store(any || INDEXED.load(Relaxed), Relaxed);
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

/// A command name of up to 8 bytes as one number, each byte with its ASCII case bit set
/// (`SET`, `set` and `Set` pack alike; no two command names collide).
const fn pack(name: &[u8]) -> u64 {
    let mut v = 0u64;
    let mut i = 0;
    while i < name.len() && i < 8 {
        v |= ((name[i] | 0x20) as u64) << (8 * i);
        i += 1;
    }
    v
}

/// [`pack`] at run time: one load and two operations instead of a loop.
#[inline]
fn pack_rt(name: &[u8]) -> u64 {
    let n = name.len().min(8);
    // Two overlapping 4-byte reads (their common bytes are the same), or bytes one by one
    // below 4: no call to memcpy for a length only known at run time.
    let v = if n >= 4 {
        let word = |at: usize| u64::from(u32::from_le_bytes([name[at], name[at + 1], name[at + 2], name[at + 3]]));
        word(0) | word(n - 4) << (8 * (n - 4))
    } else {
        name[..n].iter().enumerate().fold(0u64, |v, (i, &b)| v | u64::from(b) << (8 * i))
    };
    let used = if n == 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
    v | (0x2020_2020_2020_2020 & used)
}

macro_rules! packed {
    ($($name:ident = $s:literal),* $(,)?) => { $(const $name: u64 = pack($s);)* };
}

packed!(
    DEL = b"del",
    UNLINK = b"unlink",
    MSET = b"mset",
    MSETNX = b"msetnx",
    RENAME = b"rename",
    RENAMENX = b"renamenx",
    COPY = b"copy",
    SMOVE = b"smove",
    LMOVE = b"lmove",
    BLMOVE = b"blmove",
    BITOP = b"bitop",
    SORT = b"sort",
    LMPOP = b"lmpop",
    BLMPOP = b"blmpop",
    ZMPOP = b"zmpop",
    BZMPOP = b"bzmpop",
    BLPOP = b"blpop",
    BRPOP = b"brpop",
    BZPOPMIN = b"bzpopmin",
    BZPOPMAX = b"bzpopmax",
    MIGRATE = b"migrate",
    EXEC = b"exec",
    GET = b"get",
    MGET = b"mget",
    EXISTS = b"exists",
    TYPE = b"type",
    TTL = b"ttl",
    PTTL = b"pttl",
    STRLEN = b"strlen",
    HGET = b"hget",
    HMGET = b"hmget",
    HGETALL = b"hgetall",
    HEXISTS = b"hexists",
    HLEN = b"hlen",
    HKEYS = b"hkeys",
    HVALS = b"hvals",
    HSCAN = b"hscan",
    LLEN = b"llen",
    LINDEX = b"lindex",
    LRANGE = b"lrange",
    SCARD = b"scard",
    SMEMBERS = b"smembers",
    ZCARD = b"zcard",
    ZSCORE = b"zscore",
    ZRANK = b"zrank",
    ZRANGE = b"zrange",
    DUMP = b"dump",
    PING = b"ping",
    ECHO = b"echo",
    INFO = b"info",
    MULTI = b"multi",
    DISCARD = b"discard",
    WATCH = b"watch",
    SELECT = b"select",
    CLIENT = b"client",
    CONFIG = b"config",
    EVAL = b"eval",
    EVALSHA = b"evalsha",
    FCALL = b"fcall",
    PUBLISH = b"publish",
    SPUBLISH = b"spublish",
    SCAN = b"scan",
);

/// The commands that change keys named after `argv[1]` ([`Keys::All`]), in lower case.
const LATER: &[&[u8]] = &[
    b"del",
    b"unlink",
    b"mset",
    b"msetnx",
    b"rename",
    b"renamenx",
    b"copy",
    b"smove",
    b"lmove",
    b"blmove",
    b"bitop",
    b"sort",
    b"lmpop",
    b"blmpop",
    b"zmpop",
    b"bzmpop",
    b"blpop",
    b"brpop",
    b"bzpopmin",
    b"bzpopmax",
    b"migrate",
    b"rpoplpush",
    b"brpoplpush",
    b"georadius",
    b"georadiusbymember",
    b"geosearchstore",
];

/// A name's bit in [`LATER_MASK`], from its length, first and last byte (any case).
const fn later_bit(len: usize, first: u8, last: u8) -> usize {
    (len ^ ((first | 0x20) as usize) << 1 ^ ((last | 0x20) as usize) << 4) % 512
}

/// A one-hash Bloom filter of [`LATER`]: the usual command fails it with one test.
const LATER_MASK: [u64; 8] = {
    let mut m = [0u64; 8];
    let mut i = 0;
    while i < LATER.len() {
        let n = LATER[i];
        let b = later_bit(n.len(), n[0], n[n.len() - 1]);
        m[b / 64] |= 1 << (b % 64);
        i += 1;
    }
    m
};

/// Whether `cmd` is one of the commands that change keys named after `argv[1]`: a bit test,
/// and a comparison with each of [`LATER`] only when the bit is set.
#[inline]
pub fn may_name_later_keys(cmd: &[u8]) -> bool {
    let (Some(&first), Some(&last)) = (cmd.first(), cmd.last()) else { return false };
    let b = later_bit(cmd.len(), first, last);
    LATER_MASK[b / 64] & (1 << (b % 64)) != 0 && is_later(cmd)
}

/// [`may_name_later_keys`] past its bit test: one match on the packed name for the short
/// ones (the same names as [`LATER`]; a test checks), a comparison for the long ones.
#[inline(never)]
fn is_later(cmd: &[u8]) -> bool {
    // `DEL`, the usual one, first: no other name of the list has 3 bytes.
    if cmd.len() == 3 {
        return cmd.eq_ignore_ascii_case(b"del");
    }
    if cmd.len() > 8 {
        return LATER.iter().any(|n| n.len() > 8 && cmd.eq_ignore_ascii_case(n));
    }
    matches!(
        pack_rt(cmd),
        DEL | UNLINK
            | MSET
            | MSETNX
            | RENAME
            | RENAMENX
            | COPY
            | SMOVE
            | LMOVE
            | BLMOVE
            | BITOP
            | SORT
            | LMPOP
            | BLMPOP
            | ZMPOP
            | BZMPOP
            | BLPOP
            | BRPOP
            | BZPOPMIN
            | BZPOPMAX
            | MIGRATE
    )
}

/// Classifies a command by its name (any case): a length test and one match on a packed
/// number for the usual names. The filter asks only for a command that names a key that
/// matters ([`may_matter`]). Unknown commands are [`Keys::First`]: a spurious hit only costs
/// a re-check, a missed one a late wake-up.
pub fn classify(cmd: &[u8]) -> Keys {
    if may_name_later_keys(cmd) {
        return Keys::All;
    }
    if cmd.len() > 8 {
        return if is_own(cmd) { Keys::Ignore } else { Keys::First };
    }
    match pack_rt(cmd) {
        EXEC => Keys::Exec,
        // Reads that name a key first, and commands without keys, that clients send often:
        // a monitoring `HGETALL` of a lock must not drop its index entry.
        GET | MGET | EXISTS | TYPE | TTL | PTTL | STRLEN | HGET | HMGET | HGETALL | HEXISTS | HLEN | HKEYS | HVALS
        | HSCAN | LLEN | LINDEX | LRANGE | SCARD | SMEMBERS | ZCARD | ZSCORE | ZRANK | ZRANGE | DUMP | PING | ECHO
        | INFO | MULTI | DISCARD | WATCH | SELECT | CLIENT | CONFIG | EVAL | EVALSHA | FCALL | PUBLISH | SPUBLISH
        | SCAN => Keys::Ignore,
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
        assert_eq!(classify(b"RPOPLPUSH"), Keys::All);
        assert_eq!(classify(b"HSCAN"), Keys::Ignore);
        assert_eq!(classify(b"dela"), Keys::First);
        assert_eq!(classify(b"de"), Keys::First);
        assert_eq!(classify(b""), Keys::First);
        for name in [&b"a"[..], b"ab", b"abc", b"abcd", b"aBcDe", b"abcdef", b"abcdefg", b"ABCDEFGH"] {
            assert_eq!(pack_rt(name), pack(name), "{name:?}");
        }
    }

    #[test]
    fn commands_that_change_later_keys_are_told_apart_in_any_case_and_the_usual_writes_fail_the_bit_test() {
        for name in LATER {
            let upper = name.to_ascii_uppercase();
            assert!(may_name_later_keys(name) && may_name_later_keys(&upper), "{name:?}");
            assert_eq!(classify(&upper), Keys::All, "{name:?}");
        }
        for name in [&b"SET"[..], b"GET", b"INCR", b"HSET", b"LPUSH", b"ZADD", b"PEXPIRE", b"HINCRBY", b"EXPIRE"] {
            let b = later_bit(name.len(), name[0], name[name.len() - 1]);
            assert_eq!(LATER_MASK[b / 64] & (1 << (b % 64)), 0, "{name:?} pays a comparison");
            assert!(!may_name_later_keys(name));
        }
        assert!(!may_name_later_keys(b"") && !may_name_later_keys(b"dele"));
        // The packed match holds exactly the short names of the list.
        let short = LATER.iter().filter(|n| n.len() <= 8).count();
        let packed = [
            DEL, UNLINK, MSET, MSETNX, RENAME, RENAMENX, COPY, SMOVE, LMOVE, BLMOVE, BITOP, SORT, LMPOP, BLMPOP, ZMPOP,
            BZMPOP, BLPOP, BRPOP, BZPOPMIN, BZPOPMAX, MIGRATE,
        ];
        assert_eq!(packed.len(), short);
        assert_eq!(LATER.iter().filter(|n| n.len() == 3).collect::<Vec<_>>(), [b"del"]);
        assert!(LATER.iter().filter(|n| n.len() <= 8).all(|n| packed.contains(&pack(n))));
    }
}
