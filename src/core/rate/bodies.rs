//! Redisson's rate-limiter bodies run on the store, each exactly as its Lua runs: the same
//! reads, the same writes in the same order, the same reply, Redisson's numbers included
//! (not the native commands' fixes: `core::rate::limiter` keeps the window's own model, these
//! keep the body's). `RRateLimiter`'s `tryAcquire`, `availablePermits` and `release` are
//! here; its settings, the expiry helpers and `RGcra` in `super::body_settings`.
//!
//! Every function reads and checks everything first and writes only once the whole answer
//! is known, so where the body would fail part-way (a Lua error after a write), or reads a
//! value its own way, nothing is written and [`Why`] says the body must run itself:
//!
//! - [`Why::Fails`]: the body raises an error (its assert, `WRONGTYPE`, a malformed member,
//!   the nil score of an empty window's refusal) whose text only the Lua gives;
//! - [`Why::Odd`]: a value the module does not read as the Lua does (a number not in Redis'
//!   canonical form, `" 3"`, `2.5`, or one past ±`LUA_SAFE`, where Lua's doubles and the
//!   server's formatting of them part from integers).
//!
//! Times: `now` is the body's ARGV (the Java client's clock), as the Lua uses it for the
//! window; TTLs are set on the server's clock ([`crate::core::Store::now`]), as its `PEXPIRE` does.
//! Parked native clients are not looked at: the Lua does not know them.

use super::limiter::{expire_state, Ttl, INTERVAL, KEEP_ALIVE, RATE, TYPE};
use super::window::{next_up, pack, sum};
use crate::core::numbers::{lua_safe_int, LUA_SAFE};
use crate::core::rate::store::RateStore;
use crate::core::{deadline, IntBuf, Reply, Result};

/// Why a body must run as Lua (nothing was written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The body fails with an error of its own.
    Fails,
    /// The body reads a value the module does not read the same way.
    Odd,
}

/// A body's answer: its reply (its writes made), or why the Lua must give it.
pub type Answer = std::result::Result<Reply, Why>;

/// The KEYS of every `RRateLimiter` body: `name`, `{name}:value`, `{name}:value:<id>`,
/// `{name}:permits`, `{name}:permits:<id>`.
#[derive(Clone, Copy, Debug)]
pub struct Five<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    pub client_value: &'a [u8],
    pub permits: &'a [u8],
    pub client_permits: &'a [u8],
}

impl<'a> Five<'a> {
    /// From KEYS as sent (five of them).
    pub fn of(keys: &[&'a [u8]]) -> Option<Five<'a>> {
        match *keys {
            [name, value, client_value, permits, client_permits] => {
                Some(Five { name, value, client_value, permits, client_permits })
            }
            _ => None,
        }
    }

    /// The value and grant keys a body uses: the client's when `type` is `'1'`.
    pub fn state(&self, per_client: bool) -> (&'a [u8], &'a [u8]) {
        if per_client {
            (self.client_value, self.client_permits)
        } else {
            (self.value, self.permits)
        }
    }
}

/// How a `tryAcquire` body recomputes a value that its expired grants would lift above the
/// rate: 3.17-3.34 from the number of grants left (`rate - ZCARD`), 3.35+ from their permits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recompute {
    Zcard,
    Sum,
}

/// What a body does about TTLs after its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Nothing (3.17.0-3.17.2, and `availablePermits`).
    Untouched,
    /// The value and grants take the hash's TTL (3.17.3-3.37).
    HashTtl,
    /// With `keepAliveTime` above 0, all three keys live that long; else as `HashTtl` (3.38+).
    KeepAlive,
}

/// Which `tryAcquire` body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireBody {
    pub recompute: Recompute,
    pub expiry: Expiry,
}

pub(super) fn fails<T>(r: Result<T>) -> std::result::Result<T, Why> {
    r.map_err(|_| Why::Fails)
}

/// A number the body reads with `tonumber`, when the module reads it alike.
pub(super) fn num(b: &[u8]) -> std::result::Result<i64, Why> {
    lua_safe_int(b).ok_or(Why::Odd)
}

/// A count a body computes, when the Lua's double and the written text agree with it.
pub(super) fn count(v: i128) -> std::result::Result<i64, Why> {
    i64::try_from(v).ok().filter(|v| (-LUA_SAFE..=LUA_SAFE).contains(v)).ok_or(Why::Odd)
}

/// The limiter's settings as the bodies read them (`rate`, `interval`, `type`), unparsed:
/// each body parses what it uses, when it uses it.
pub(super) struct Limiter {
    pub rate: Vec<u8>,
    pub interval: Vec<u8>,
    pub per_client: bool,
}

/// `HGET` of the three fields and the body's assert on them.
pub(super) fn limiter<S: RateStore>(s: &mut S, name: &[u8]) -> std::result::Result<Limiter, Why> {
    let rate = fails(s.hash_get(name, RATE))?;
    let interval = fails(s.hash_get(name, INTERVAL))?;
    let mode = fails(s.hash_get(name, TYPE))?;
    match (rate, interval, mode) {
        (Some(rate), Some(interval), Some(mode)) => Ok(Limiter { rate, interval, per_client: mode == b"1" }),
        _ => Err(Why::Fails),
    }
}

/// The TTLs a body leaves, read before its writes (it reads them after: nothing it writes
/// changes them).
pub(super) fn ttl_plan<S: RateStore>(s: &mut S, name: &[u8], e: Expiry) -> std::result::Result<Ttl, Why> {
    if e == Expiry::Untouched {
        return Ok(Ttl::None);
    }
    if e == Expiry::KeepAlive {
        if let Some(k) = fails(s.hash_get(name, KEEP_ALIVE))? {
            let k = num(&k)?;
            if k > 0 {
                return deadline(s.now(), k).map(Ttl::KeepAlive).map_err(|_| Why::Odd);
            }
        }
    }
    let ttl = s.pttl(name);
    Ok(if ttl > 0 { Ttl::Hash(s.now() + ttl) } else { Ttl::None })
}

/// `ZADD z score member` as Redis runs it: a member already there with that score changes
/// nothing (no event, nothing replicated).
pub(super) fn zadd<S: RateStore>(s: &mut S, z: &[u8], member: &[u8], score: f64) {
    if s.zset_score(z, member).ok().flatten() != Some(score) {
        s.zset_add(z, member, score);
    }
}

/// The permits of the members a `ZREMRANGEBYSCORE z 0 thr` leaves (scored below 0 or above
/// `thr`), each member read as the Lua's loop reads it (`Fails` on a malformed one).
pub(super) fn sum_left<S: RateStore>(s: &mut S, z: &[u8], thr: i64) -> std::result::Result<i128, Why> {
    if thr < 0 {
        return Ok(fails(sum(s, z, f64::NEG_INFINITY, f64::INFINITY))?.0);
    }
    // -0.0 is within `0 ..= thr` for Redis as for IEEE; the largest negative double is not.
    let below = fails(sum(s, z, f64::NEG_INFINITY, -f64::from_bits(1)))?.0;
    Ok(below + fails(sum(s, z, next_up(thr as f64), f64::INFINITY))?.0)
}

/// The lowest score of `z` within `min ..= max`.
fn first_in<S: RateStore>(s: &mut S, z: &[u8], min: f64, max: f64) -> std::result::Result<Option<f64>, Why> {
    let mut first = None;
    fails(s.zset_scan(z, min, max, &mut |_, score| {
        first = Some(score);
        false
    }))?;
    Ok(first)
}

/// The lowest score in `z` (`ZRANGE z 0 0 WITHSCORES`), once `0 ..= removed` is gone.
fn lowest<S: RateStore>(s: &mut S, z: &[u8], removed: Option<i64>) -> std::result::Result<Option<f64>, Why> {
    let Some(thr) = removed else { return first_in(s, z, f64::NEG_INFINITY, f64::INFINITY) };
    match first_in(s, z, f64::NEG_INFINITY, -f64::from_bits(1))? {
        Some(t) => Ok(Some(t)),
        None => first_in(s, z, next_up(thr as f64), f64::INFINITY),
    }
}

/// `tryAcquire(permits)` (`permits` 0 to 2^32-1, `random` at most 255 bytes: the caller's
/// checks): nil when granted, else the wait `3 + interval - (now - lowest score)`.
///
/// With no value key the body grants without looking at the grants (`SET value rate`, then
/// the grant). Otherwise the permits of the grants scored `0 ..= now - interval` are added
/// back, and those grants removed, only when they hold some (a window of 0-permit grants
/// stays as it is); a value the expired grants would lift above the rate is recomputed by
/// [`Recompute`]. A refusal of a window left empty fails in the Lua (a nil score).
pub fn acquire<S: RateStore>(s: &mut S, k: &Five, body: AcquireBody, permits: i64, now: i64, random: &[u8]) -> Answer {
    let l = limiter(s, k.name)?;
    let (vk, pk) = k.state(l.per_client);
    let rate = num(&l.rate)?;
    if rate < permits {
        return Err(Why::Fails);
    }
    let member = pack(random, u32::try_from(permits).map_err(|_| Why::Odd)?);
    let ttl = ttl_plan(s, k.name, body.expiry)?;
    let value = fails(s.get(vk))?;
    // The grants' type: a `ZADD` or `ZRANGEBYSCORE` on another type fails after writes.
    fails(s.zset_len(pk))?;
    let Some(raw) = value else {
        s.set(vk, &l.rate);
        zadd(s, pk, &member, now as f64);
        // The value was just set to the rate, a canonical count: this cannot fail.
        let _ = s.decr_by(vk, permits);
        expire_state(s, k.name, vk, pk, ttl);
        return Ok(Reply::Nil);
    };
    let current = num(&raw)?;
    let interval = num(&l.interval)?;
    let thr = now - interval;
    let (released, gone) = fails(sum(s, pk, 0.0, thr as f64))?;
    count(released)?;
    let mut left = i128::from(current);
    if released > 0 {
        left = if left + released > i128::from(rate) {
            let used = match body.recompute {
                Recompute::Zcard => (fails(s.zset_len(pk))? - gone) as i128,
                Recompute::Sum => sum_left(s, pk, thr)?,
            };
            i128::from(rate) - used
        } else {
            left + released
        };
    }
    let left = count(left)?;
    let refused = left < permits;
    let wait = if refused {
        // Lua's arithmetic on doubles, in its order, then its integer reply (truncated).
        let first = lowest(s, pk, (released > 0).then_some(thr))?.ok_or(Why::Fails)?;
        Some(((3.0 + interval as f64) - (now as f64 - first)) as i64)
    } else {
        None
    };
    if released > 0 {
        s.zset_rem_range(pk, 0.0, thr as f64);
        s.set(vk, IntBuf::default().format(left));
    }
    if wait.is_none() {
        zadd(s, pk, &member, now as f64);
        // A canonical count at least `permits`: cannot fail.
        let _ = s.decr_by(vk, permits);
    }
    expire_state(s, k.name, vk, pk, ttl);
    Ok(wait.map_or(Reply::Nil, Reply::Int))
}

/// `availablePermits()`: without a value key, `SET value rate` and the hash's `rate` string
/// (a bulk reply); else the expired grants' permits added back with no cap (an integer), or
/// the value as it is (bulk) when they hold none. No TTL is touched (the `SET` drops one).
pub fn available<S: RateStore>(s: &mut S, k: &Five, now: i64) -> Answer {
    let l = limiter(s, k.name)?;
    let (vk, pk) = k.state(l.per_client);
    let Some(raw) = fails(s.get(vk))? else {
        s.set(vk, &l.rate);
        return Ok(Reply::Bulk(l.rate));
    };
    let thr = now - num(&l.interval)?;
    let (released, _) = fails(sum(s, pk, 0.0, thr as f64))?;
    if released == 0 {
        return Ok(Reply::Bulk(raw));
    }
    let v = count(i128::from(num(&raw)?) + released)?;
    s.zset_rem_range(pk, 0.0, thr as f64);
    s.set(vk, IntBuf::default().format(v));
    Ok(Reply::Int(v))
}

/// `release(permits)` (3.52+): the value (the rate when absent) plus `permits`, at most the
/// rate, written with `SET`; the grants are left alone. The TTLs of 3.38+'s acquire. Nil.
pub fn release<S: RateStore>(s: &mut S, k: &Five, permits: i64) -> Answer {
    let l = limiter(s, k.name)?;
    let (vk, pk) = k.state(l.per_client);
    let rate = num(&l.rate)?;
    let ttl = ttl_plan(s, k.name, Expiry::KeepAlive)?;
    let current = match fails(s.get(vk))? {
        None => rate,
        Some(raw) => num(&raw)?,
    };
    let v = count((i128::from(current) + i128::from(permits)).min(i128::from(rate)))?;
    s.set(vk, IntBuf::default().format(v));
    expire_state(s, k.name, vk, pk, ttl);
    Ok(Reply::Nil)
}

#[cfg(test)]
#[path = "bodies_tests.rs"]
mod tests;
