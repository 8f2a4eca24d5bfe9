//! Every distinct body of Redisson's rate-limiter scripts (`RRateLimiter`, the
//! `RedissonExpirable` helpers it sends with its five keys, `RGcra`), releases 3.17.0 to
//! 4.7.0 and HEAD, by SHA1: what the module runs instead, or why it leaves the body to Lua
//! (docs/redisson-ratelimiter-scripts.md has the same list with each body's KEYS and ARGV).
//!
//! Only the SHA1s, the body lengths and our mapping live here; the bodies stay in Redisson
//! (the tests read them from `../shared/redisson-ratelimiter-scripts/`).
//! `crate::redisson::table::ROWS` holds these rows after the synchronizers'.

use crate::core::rate::bodies::{AcquireBody, Expiry, Recompute};
use crate::core::rate::body_settings::{SetRate, TrySet};

/// What a rate-limiter body does, as far as the native answer depends on it. The KEYS and
/// ARGV of each are in `super::rewrite`; the answers in `crate::core::rate::bodies` and
/// `crate::core::rate::body_settings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateKind {
    /// `tryAcquire(permits)`: the five keys, ARGV `permits now random`.
    Acquire(AcquireBody),
    /// `availablePermits()`: the five keys, ARGV `now`.
    Available,
    /// `release(permits)` (3.52+): the five keys, ARGV `permits`.
    Release,
    /// `trySetRate`: KEYS `name`, ARGV `rate interval type [ttl | keepAlive]`.
    TrySet(TrySet),
    /// `setRate`: KEYS `name value permits` (`Old`) or the five, ARGV `rate interval type
    /// [ttl | keepAlive]`.
    SetRate(SetRate),
    /// `setOrUpdate` (4.4+): the five keys, ARGV `rate interval type keepAlive now keepState
    /// requireExist`.
    SetOrUpdate,
    /// `RedissonExpirable.expireAsync`: the five keys, ARGV `ms param`.
    Expire,
    /// `expireAtAsync`: the five keys, ARGV `epoch_ms param`.
    ExpireAt,
    /// `clearExpireAsync`: the five keys.
    ClearExpire,
    /// `RGcra.trySetRate` (4.7+): KEYS `{name}:config`, ARGV `maxBurst rate period`.
    GcraTrySet,
    /// `RGcra.setRate`: KEYS `{name}:config name`, ARGV `maxBurst rate period`.
    GcraSet,
    /// `RGcra.tryAcquire`: KEYS `{name}:config name`, ARGV `tokens`; calls `GCRA`.
    GcraAcquire,
}

impl RateKind {
    /// How many KEYS the body is sent with.
    pub fn keys(self) -> usize {
        match self {
            RateKind::TrySet(_) | RateKind::GcraTrySet => 1,
            RateKind::GcraSet | RateKind::GcraAcquire => 2,
            RateKind::SetRate(SetRate::Old) => 3,
            _ => 5,
        }
    }

    /// How many ARGV the body is sent with.
    pub fn argv(self) -> usize {
        match self {
            RateKind::Acquire(_) | RateKind::TrySet(TrySet::Classic) | RateKind::GcraTrySet | RateKind::GcraSet => 3,
            RateKind::SetRate(SetRate::Old | SetRate::Classic) => 3,
            RateKind::Available | RateKind::Release | RateKind::GcraAcquire => 1,
            RateKind::TrySet(_) | RateKind::SetRate(_) => 4,
            RateKind::SetOrUpdate => 7,
            RateKind::Expire | RateKind::ExpireAt => 2,
            RateKind::ClearExpire => 0,
        }
    }

    /// The commands the body runs inside Lua, each with the index of the KEYS entry it runs
    /// on, for the filter's ACL check (`crate::redisson::acl`). Both states' keys are listed,
    /// whichever the limiter's type picks.
    pub fn inner_commands(self) -> Vec<(&'static str, usize)> {
        let on = |cmds: &[&'static str], keys: &[usize]| -> Vec<(&'static str, usize)> {
            keys.iter().flat_map(|k| cmds.iter().map(move |c| (*c, *k))).collect()
        };
        let (values, grants) = ([1, 2], [3, 4]);
        let mut v = match self {
            RateKind::Acquire(_) => {
                let mut v = on(&["hget", "pttl", "pexpire"], &[0]);
                v.extend(on(&["get", "set", "decrby", "pexpire"], &values));
                v.extend(on(&["zrangebyscore", "zremrangebyscore", "zrange", "zcard", "zadd", "pexpire"], &grants));
                v
            }
            RateKind::Available => {
                let mut v = on(&["hget"], &[0]);
                v.extend(on(&["get", "set"], &values));
                v.extend(on(&["zrangebyscore", "zremrangebyscore"], &grants));
                v
            }
            RateKind::Release => {
                let mut v = on(&["hget", "pttl", "pexpire"], &[0]);
                v.extend(on(&["get", "set", "pexpire"], &values));
                v.extend(on(&["pexpire"], &grants));
                v
            }
            RateKind::TrySet(_) => on(&["hsetnx", "pexpire"], &[0]),
            RateKind::SetRate(SetRate::Old) => {
                let mut v = on(&["hset"], &[0]);
                v.extend(on(&["del"], &[1, 2]));
                v
            }
            RateKind::SetRate(_) => {
                let mut v = on(&["hset", "pexpire"], &[0]);
                v.extend(on(&["del"], &[1, 2, 3, 4]));
                v
            }
            RateKind::SetOrUpdate => {
                let mut v = on(&["exists", "hget", "hset", "pexpire", "pttl"], &[0]);
                v.extend(on(&["del", "get", "set", "pexpire"], &values));
                v.extend(on(&["del", "zremrangebyscore", "zrange", "pexpire"], &grants));
                v
            }
            RateKind::Expire => on(&["pexpire"], &[0, 1, 2, 3, 4]),
            RateKind::ExpireAt => on(&["pexpireat"], &[0, 1, 2, 3, 4]),
            RateKind::ClearExpire => on(&["persist"], &[0, 1, 2, 3, 4]),
            RateKind::GcraTrySet => on(&["hsetnx"], &[0]),
            RateKind::GcraSet => {
                let mut v = on(&["hset"], &[0]);
                v.push(("del", 1));
                v
            }
            RateKind::GcraAcquire => vec![("hget", 0), ("gcra", 1)],
        };
        v.dedup();
        v
    }

    /// The bodies that call `GCRA`'s configuration or `GCRA` itself: run natively only where
    /// the module's `GCRA` is the server's (`super::rewrite::gcra_is_ours`).
    pub fn gcra(self) -> bool {
        matches!(self, RateKind::GcraTrySet | RateKind::GcraSet | RateKind::GcraAcquire)
    }
}

/// One body: its SHA1, byte length, what runs for it, Redisson's class and method, the
/// releases that send it. Every body has a native answer (in the states it can be exact).
pub struct RateRow {
    pub sha: &'static str,
    pub len: usize,
    pub kind: RateKind,
    pub method: &'static str,
    pub releases: &'static str,
}

const fn row(sha: &'static str, len: usize, kind: RateKind, method: &'static str, releases: &'static str) -> RateRow {
    RateRow { sha, len, kind, method, releases }
}

const fn acquire(recompute: Recompute, expiry: Expiry) -> RateKind {
    RateKind::Acquire(AcquireBody { recompute, expiry })
}

use Expiry::{HashTtl, KeepAlive, Untouched};
use RateKind::*;
use Recompute::{Sum, Zcard};

#[rustfmt::skip]
pub const ROWS: &[RateRow] = &[
    // -- RedissonRateLimiter --------------------------------------------------------------------
    row("885213617b048a7030de9bae0c125407047d6c55", 1683, acquire(Zcard, Untouched), "RedissonRateLimiter.tryAcquireAsync", "3.17.0-3.17.2"),
    row("f65fa99baa7d5568e00f123d0e62332001e4e223", 1843, acquire(Zcard, HashTtl), "RedissonRateLimiter.tryAcquireAsync", "3.17.3-3.34.1"),
    row("71bab5abd65f60b576de6705d631e9c801e0039a", 1991, acquire(Sum, HashTtl), "RedissonRateLimiter.tryAcquireAsync", "3.35.0-3.37.0"),
    row("861d9229367b5aa9889ee26c5c31be7baeba2153", 2281, acquire(Sum, KeepAlive), "RedissonRateLimiter.tryAcquireAsync", "3.38.0-HEAD"),
    row("1378f96e73a4251ef63dadab589a062f8276a044", 964, Available, "RedissonRateLimiter.availablePermitsAsync", "3.17.0-HEAD"),
    row("48387f4f898d4f1f8e94c9b80e7595bf60377aa8", 152, TrySet(TrySet::Classic), "RedissonRateLimiter.trySetRateAsync", "3.17.0-3.36.0"),
    row("1cfc7f9107dceaffbd9f59faf1d3c1fdd9bb6a50", 257, TrySet(TrySet::Ttl), "RedissonRateLimiter.trySetRateAsync(.., timeToLive)", "3.37.0"),
    row("38980404d0f647f699e5bd8082405d06ec0fef92", 313, TrySet(TrySet::KeepAlive), "RedissonRateLimiter.trySetRateAsync(.., keepAliveTime)", "3.38.0-HEAD"),
    row("1db1ef670b93b8aba37c488f766d7d98237be338", 175, SetRate(SetRate::Old), "RedissonRateLimiter.setRateAsync", "3.17.0-3.22.0"),
    row("3b36b933c336c9878af42ecd69842a6894620765", 312, SetRate(SetRate::Classic), "RedissonRateLimiter.setRateAsync", "3.22.1-3.36.0"),
    row("8cd39500fc82d5e2690ac00bc3fea8d78aaf4a01", 388, SetRate(SetRate::Ttl), "RedissonRateLimiter.setRateAsync(.., timeToLive)", "3.37.0"),
    row("b9a51abe1d8fd1227eae314fe8c68c8134e64e8f", 442, SetRate(SetRate::KeepAlive), "RedissonRateLimiter.setRateAsync(.., keepAliveTime)", "3.38.0-HEAD"),
    row("fbec405e63ce6ca39accbc290ded190da3cad1cf", 1164, Release, "RedissonRateLimiter.releaseAsync", "3.52.0-HEAD"),
    row("0844c63db47ac57bbfaab27f78cc104218d081cf", 1751, SetOrUpdate, "RedissonRateLimiter.setOrUpdateAsync", "4.4.0-HEAD"),
    // -- RedissonExpirable, sent with the limiter's five keys ---------------------------------
    row("3fd750e0b43af99dbd223e5523718f18cded3664", 271, Expire, "RedissonExpirable.expireAsync", "3.17.0-HEAD"),
    row("71dee1cdc1c23a6aa34dd4a3bbfb2b6dfb3f72cb", 275, ExpireAt, "RedissonExpirable.expireAtAsync", "3.17.0-HEAD"),
    row("3e87b23af056c9bbfa98cb959044b3cb917003b9", 157, ClearExpire, "RedissonExpirable.clearExpireAsync", "3.17.0-HEAD"),
    // -- RedissonGcra ---------------------------------------------------------------------------
    row("31e2744ec67810e2a7dd71e4b68f8fd337e35cc0", 154, GcraTrySet, "RedissonGcra.trySetRateAsync", "4.7.0-HEAD"),
    row("704cc2c3dc85448aea11a1e79dedc4148fd79935", 112, GcraSet, "RedissonGcra.setRateAsync", "4.7.0-HEAD"),
    row("6a25e0dd97bfb4d135e9094e13c3a7cb05a4274a", 419, GcraAcquire, "RedissonGcra.tryAcquireAsync", "4.7.0-HEAD"),
];
