//! Which arguments of a command may name a key it changes, told by the command's name alone:
//! what the command filter asks ([`classify`], [`may_name_later_keys`]) once a key matters.
//! Pure: a few bit and byte tests over the name.

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
