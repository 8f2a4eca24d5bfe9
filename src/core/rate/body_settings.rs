//! Redisson's rate-limiter bodies that set a limiter up, run on the store exactly as their Lua
//! (see `super::bodies` for the rule): `RRateLimiter`'s `trySetRate`, `setRate` and
//! 4.4's `setOrUpdate`, `RedissonExpirable`'s expiry helpers over the five keys, and
//! `RGcra`'s three bodies (4.7+), which keep the rate in a hash and call `GCRA`.
//!
//! The bodies store ARGV as sent (`HSET`/`HSETNX` of the client's strings); only what a body
//! computes with is parsed, when it does.

use super::bodies::{count, fails, num, sum_left, ttl_plan, Answer, Expiry, Five, Why};
use super::gcra::{self, Gcra};
use super::limiter::{expire_state, Ttl, INTERVAL, KEEP_ALIVE, RATE, TYPE};
use crate::core::rate::store::RateStore;
use crate::core::{deadline, parse_i64, IntBuf, Reply};

/// Which `trySetRate` body: 3.17-3.36, 3.37 (a TTL for a new hash), 3.38+ (`keepAliveTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrySet {
    Classic,
    Ttl,
    KeepAlive,
}

/// Which `setRate` body: 3.17-3.22 (KEYS name, value, permits: the overall state's keys),
/// 3.22.1-3.36, 3.37 (a TTL), 3.38+ (`keepAliveTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetRate {
    Old,
    Classic,
    Ttl,
    KeepAlive,
}

/// `PEXPIRE name ttl` when `ttl > 0` (the bodies' `tonumber(ARGV[4]) > 0`), checked now.
fn expiry_of<S: RateStore>(s: &mut S, ttl: &[u8]) -> std::result::Result<Option<i64>, Why> {
    let ttl = num(ttl)?;
    if ttl <= 0 {
        return Ok(None);
    }
    deadline(s.now(), ttl).map(Some).map_err(|_| Why::Odd)
}

/// `HSETNX key f v` for each pair, in order: which ones were missing (and so are set).
fn hsetnx_all<S: RateStore>(s: &mut S, key: &[u8], pairs: &[(&[u8], &[u8])]) -> std::result::Result<Vec<bool>, Why> {
    let mut missing = Vec::with_capacity(pairs.len());
    for (f, _) in pairs {
        missing.push(fails(s.hash_get(key, f))?.is_none());
    }
    Ok(missing)
}

fn set_missing<S: RateStore>(s: &mut S, key: &[u8], pairs: &[(&[u8], &[u8])], missing: &[bool]) {
    for ((f, v), m) in pairs.iter().zip(missing) {
        if *m {
            s.hash_set(key, f, v);
        }
    }
}

/// `trySetRate`: `HSETNX` of `rate`, `interval` (3.38+: `keepAliveTime`) and `type`; 1 if
/// `type` was set, which with a TTL above 0 (3.37+) also sets the hash's TTL.
pub fn try_set_rate<S: RateStore>(s: &mut S, name: &[u8], argv: &[&[u8]], v: TrySet) -> Answer {
    let pairs: Vec<(&[u8], &[u8])> = match v {
        TrySet::KeepAlive => vec![(RATE, argv[0]), (INTERVAL, argv[1]), (KEEP_ALIVE, argv[3]), (TYPE, argv[2])],
        _ => vec![(RATE, argv[0]), (INTERVAL, argv[1]), (TYPE, argv[2])],
    };
    let missing = hsetnx_all(s, name, &pairs)?;
    let typed = missing[missing.len() - 1];
    let at = if typed && v != TrySet::Classic { expiry_of(s, argv[3])? } else { None };
    set_missing(s, name, &pairs, &missing);
    if let Some(at) = at {
        s.pexpire_at(name, at);
    }
    Ok(Reply::Int(i64::from(typed)))
}

/// `setRate`: `HSET` of the settings (3.38+: with `keepAliveTime`), the hash's TTL (3.37+,
/// above 0), then `DEL` of the state ARGV's type names (3.17-3.22: of `KEYS[2]`, `KEYS[3]`,
/// the overall state whatever the type). Nil.
pub fn set_rate<S: RateStore>(s: &mut S, keys: &[&[u8]], argv: &[&[u8]], v: SetRate) -> Answer {
    let name = keys[0];
    // The first `HSET` fails on another type, before anything is written.
    fails(s.hash_len(name))?;
    let (vk, pk) = match v {
        SetRate::Old => (keys[1], keys[2]),
        _ => Five::of(keys).ok_or(Why::Fails)?.state(argv[2] == b"1"),
    };
    let at = match v {
        SetRate::Ttl | SetRate::KeepAlive => expiry_of(s, argv[3])?,
        _ => None,
    };
    s.hash_set(name, RATE, argv[0]);
    s.hash_set(name, INTERVAL, argv[1]);
    s.hash_set(name, TYPE, argv[2]);
    if v == SetRate::KeepAlive {
        s.hash_set(name, KEEP_ALIVE, argv[3]);
    }
    if let Some(at) = at {
        s.pexpire_at(name, at);
    }
    s.del(vk);
    s.del(pk);
    Ok(Reply::Nil)
}

/// `setOrUpdate` (4.4+; ARGV rate, interval, type, keepAlive, now, keepState, requireExist):
/// 0 without the hash when it must exist; else the four settings, the keep-alive as the
/// hash's TTL, and: a changed type deletes all four state keys; `keepState` `0` deletes the
/// new type's; otherwise the expired grants go and the value is `max(0, rate - permits left)`
/// with 3.38's TTLs. 1.
pub fn set_or_update<S: RateStore>(s: &mut S, k: &Five, argv: &[&[u8]]) -> Answer {
    if argv[6] == b"1" && !s.exists(k.name) {
        return Ok(Reply::Int(0));
    }
    let (vk, pk) = k.state(argv[2] == b"1");
    let old = fails(s.hash_get(k.name, TYPE))?;
    let at = expiry_of(s, argv[3])?;
    let changed = old.is_some_and(|t| t != argv[2]);
    // The kept state: read (and its keys type-checked) before the settings are written.
    let kept = if changed || argv[5] == b"0" {
        None
    } else {
        let (rate, interval, now) = (num(argv[0])?, num(argv[1])?, num(argv[4])?);
        fails(s.get(vk))?;
        let thr = now - interval;
        fails(s.zset_len(pk))?;
        // `if newValue < 0 then newValue = 0`: the sign is all a large count decides.
        let left = count((i128::from(rate) - sum_left(s, pk, thr)?).max(0))?;
        let ttl = match at {
            Some(at) => Ttl::KeepAlive(at),
            None => ttl_plan(s, k.name, Expiry::HashTtl)?,
        };
        Some((thr, left, ttl))
    };
    for (f, v) in [(RATE, argv[0]), (INTERVAL, argv[1]), (TYPE, argv[2]), (KEEP_ALIVE, argv[3])] {
        s.hash_set(k.name, f, v);
    }
    if let Some(at) = at {
        s.pexpire_at(k.name, at);
    }
    let Some((thr, left, ttl)) = kept else {
        let gone: &[&[u8]] = if changed { &[k.value, k.client_value, k.permits, k.client_permits] } else { &[vk, pk] };
        for key in gone {
            s.del(key);
        }
        return Ok(Reply::Int(1));
    };
    s.zset_rem_range(pk, 0.0, thr as f64);
    s.set(vk, IntBuf::default().format(left));
    expire_state(s, k.name, vk, pk, ttl);
    Ok(Reply::Int(1))
}

/// What a `RedissonExpirable` helper runs on each key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpireOp {
    /// `PEXPIRE key ms [cond]`.
    After(i64),
    /// `PEXPIREAT key ms [cond]`.
    At(i64),
    /// `PERSIST key`.
    Persist,
}

/// The condition of `PEXPIRE`/`PEXPIREAT` (`NX`, `XX`, `GT`, `LT`, or none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Cond {
    /// ARGV[2] of the helpers: `''` or an option, as `PEXPIRE` reads it (any case).
    pub fn parse(b: &[u8]) -> Option<Cond> {
        Some(match b.to_ascii_uppercase().as_slice() {
            b"" => Cond::Always,
            b"NX" => Cond::Nx,
            b"XX" => Cond::Xx,
            b"GT" => Cond::Gt,
            b"LT" => Cond::Lt,
            _ => return None,
        })
    }

    /// Whether Redis sets `when` on a key whose expiry is `current` (None: none).
    fn allows(self, current: Option<i64>, when: i64) -> bool {
        match (self, current) {
            (Cond::Always, _) => true,
            (Cond::Nx, c) => c.is_none(),
            (Cond::Xx, c) => c.is_some(),
            // No expiry counts as infinite: never lower, always higher.
            (Cond::Gt, c) => c.is_some_and(|c| when > c),
            (Cond::Lt, c) => c.is_none_or(|c| when < c),
        }
    }
}

/// `expire`, `expireAt` and `clearExpire` of `RedissonExpirable` over the limiter's keys: each
/// key's `PEXPIRE`/`PEXPIREAT` or `PERSIST`; 1 if any key was changed, else 0. A time
/// already past makes Redis delete the key, with an event that differs by server (`del` on
/// Redis, `expired` on Valkey 8+): such a call is left to the Lua (`Odd`).
pub fn expire_keys<S: RateStore>(s: &mut S, keys: &[&[u8]], op: ExpireOp, cond: Cond) -> Answer {
    let now = s.now();
    // Each key's new expiry (None: PERSIST), decided before anything is written.
    let mut plan: Vec<(&[u8], Option<i64>)> = Vec::with_capacity(keys.len());
    for key in keys {
        if !s.exists(key) {
            continue;
        }
        let current = match s.pttl(key) {
            t if t < 0 => None,
            t => Some(now + t),
        };
        let when = match op {
            ExpireOp::Persist if current.is_some() => None,
            ExpireOp::Persist => continue,
            ExpireOp::After(ms) => Some(now + ms),
            ExpireOp::At(at) => Some(at),
        };
        match when {
            Some(w) if !cond.allows(current, w) => continue,
            Some(w) if w <= now => return Err(Why::Odd),
            _ => plan.push((key, when)),
        }
    }
    for (key, when) in &plan {
        match when {
            Some(at) => s.pexpire_at(key, *at),
            None => {
                s.persist(key);
            }
        }
    }
    Ok(Reply::Int(i64::from(!plan.is_empty())))
}

/// The `RGcra` config hash's fields.
const MAX_BURST: &[u8] = b"maxBurst";
const PERIOD: &[u8] = b"period";

/// `RGcra.trySetRate` (4.7+): `HSETNX` of `maxBurst`, `rate`, `period`; 1 if `period` was set.
pub fn gcra_try_set<S: RateStore>(s: &mut S, config: &[u8], argv: &[&[u8]]) -> Answer {
    let pairs: [(&[u8], &[u8]); 3] = [(MAX_BURST, argv[0]), (RATE, argv[1]), (PERIOD, argv[2])];
    let missing = hsetnx_all(s, config, &pairs)?;
    set_missing(s, config, &pairs, &missing);
    Ok(Reply::Int(i64::from(missing[2])))
}

/// `RGcra.setRate` (4.7+): one `HSET` of the three fields, `DEL` of the limiter's TAT. Nil.
pub fn gcra_set<S: RateStore>(s: &mut S, config: &[u8], key: &[u8], argv: &[&[u8]]) -> Answer {
    fails(s.hash_len(config))?;
    s.hash_set_many(config, &[(MAX_BURST, argv[0]), (RATE, argv[1]), (PERIOD, argv[2])]);
    s.del(key);
    Ok(Reply::Nil)
}

/// A period as `BigDecimal.toPlainString` writes it (`1`, `0.25`), read as the server reads
/// a float; other forms are left to the Lua (and the server's own parsing).
fn plain_decimal(b: &[u8]) -> Option<f64> {
    let (int, frac) = match b.iter().position(|&c| c == b'.') {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    let digits = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    (digits(int) && frac.is_none_or(digits)).then(|| std::str::from_utf8(b).ok()?.parse().ok())?
}

/// `RGcra.tryAcquire` (4.7+): `GCRA key maxBurst rate period [TOKENS n]` with the settings
/// of the hash `config` (its assert when one is missing), `TOKENS` only when `tokens` is not
/// 1: the module's `GCRA`, with its reply. Any `GCRA` error is the Lua's (`Fails`).
pub fn gcra_acquire<S: RateStore>(s: &mut S, config: &[u8], key: &[u8], tokens: &[u8]) -> Answer {
    let mut field = |f: &[u8]| fails(s.hash_get(config, f))?.ok_or(Why::Fails);
    let (burst, rate, period) = (field(MAX_BURST)?, field(RATE)?, field(PERIOD)?);
    // `tonumber(ARGV[1]) == 1`: only "1" is 1 in Redis' canonical form.
    let tokens = if tokens == b"1" { None } else { Some(parse_i64(tokens).ok_or(Why::Odd).map(|_| tokens)?) };
    let limit = fails(Gcra::max_burst(&burst))?;
    let tokens_per_period = fails(Gcra::count(&rate))?;
    let period = fails(Gcra::period(Some(plain_decimal(&period).ok_or(Why::Odd)?)))?;
    let tokens = match tokens {
        None => 1,
        Some(t) => fails(Gcra::count(t))?,
    };
    let verdict = fails(gcra::request(s, key, &Gcra { limit, tokens_per_period, period, tokens }))?;
    Ok(verdict.reply())
}
