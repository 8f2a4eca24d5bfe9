//! The rate limiter (Redisson's `RRateLimiter`): a sliding window of grants, on Redisson's keys.
//!
//! | key                                  | type   | meaning                                     |
//! |--------------------------------------|--------|---------------------------------------------|
//! | `name`                               | hash   | `rate`, `interval` (ms), `type` (`0` OVERALL, `1` PER_CLIENT), `keepAliveTime` (ms, 0: none) |
//! | `{name}:value[:<client id>]`         | string | permits available now                       |
//! | `{name}:permits[:<client id>]`       | zset   | the grants (`core::rate_window`)            |
//!
//! **The model.** The zset is the truth: a limiter of `rate` per `interval` may grant `p` at
//! `now` while the live grants hold at most `rate - p`. The value is kept at
//! `max(0, rate - S)`, `S` the permits of every member, so Redisson's bodies, which add the
//! expired grants to it, read the same count. A release takes its permits off the newest
//! grants ([`release`]): given back once, never again when they expire (Redisson 7329, 7342).
//! A value above `max(0, rate - S)` is a release made by Redisson's own body (which leaves the
//! zset alone): the next call here takes that excess off the newest grants the same way, so
//! the credit is neither lost nor counted twice. A value below it (an older body's
//! `rate - ZCARD`, a hand-written value, an empty zset) is recomputed from the window.
//! In the states Redisson's clients make by acquiring alone ([`Look::ordinary`]), every
//! answer here is the Lua's.
//!
//! Every function reads and checks everything (types, fields, members it must read, ACL,
//! deadlines) before its first write. Time: `now` is the window's clock (the server's, `NOW`,
//! or a Redisson body's ARGV); TTLs are set on the server's clock ([`super::Store::now`]), as
//! the bodies' `PEXPIRE` does.

use super::access::{KeyUse, Need};
pub use super::rate_settings::{set_rate, try_set_rate, Settings};
pub use super::rate_window::Grant;
use super::rate_window::{self, Window, MAX_PERMITS};
use super::store::RateStore;
use super::sync_names::{limiter_permits, limiter_value};
use super::{deadline, parse_i64, permit, IntBuf, LockError, Result};

/// The hash fields, as Redisson names them.
pub const RATE: &[u8] = b"rate";
pub const INTERVAL: &[u8] = b"interval";
pub const TYPE: &[u8] = b"type";
pub const KEEP_ALIVE: &[u8] = b"keepAliveTime";

/// `RateType`: one window for everyone, or one per Redisson client (instance id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Overall,
    PerClient,
}

impl Mode {
    /// The `type` field's value: the enum's ordinal.
    pub fn field(self) -> &'static [u8] {
        match self {
            Mode::Overall => b"0",
            Mode::PerClient => b"1",
        }
    }
}

/// A limiter's settings, as its hash holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub rate: i64,
    pub interval: i64,
    pub mode: Mode,
    /// 0 (or absent): none; the keys then follow the hash's own TTL.
    pub keep_alive: i64,
}

/// Reads `name`'s settings: `NotInitialized` without `rate`, `interval` and `type` (as
/// Redisson's assert), `BadLimiterField` for a field the module cannot read.
pub fn config<S: RateStore>(s: &mut S, name: &[u8]) -> Result<Config> {
    let (rate, interval, mode) = (s.hash_get(name, RATE)?, s.hash_get(name, INTERVAL)?, s.hash_get(name, TYPE)?);
    let (Some(rate), Some(interval), Some(mode)) = (rate, interval, mode) else {
        return Err(LockError::NotInitialized);
    };
    let rate = parse_i64(&rate).ok_or(LockError::BadLimiterField("rate"))?;
    let interval = parse_i64(&interval).filter(|&i| i > 0).ok_or(LockError::BadLimiterField("interval"))?;
    let mode = match mode.as_slice() {
        b"0" => Mode::Overall,
        b"1" => Mode::PerClient,
        _ => return Err(LockError::BadLimiterField("type")),
    };
    let keep_alive = match s.hash_get(name, KEEP_ALIVE)? {
        None => 0,
        Some(v) => parse_i64(&v).ok_or(LockError::BadLimiterField("keepAliveTime"))?.max(0),
    };
    Ok(Config { rate, interval, mode, keep_alive })
}

/// The value and grant keys of one state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    pub value: Vec<u8>,
    pub permits: Vec<u8>,
}

/// The state a caller uses: the overall one, or its client's (`ClientRequired` without one).
pub fn keys(name: &[u8], mode: Mode, client: Option<&[u8]>) -> Result<Keys> {
    let client = match mode {
        Mode::Overall => None,
        Mode::PerClient => Some(client.ok_or(LockError::ClientRequired)?),
    };
    Ok(Keys { value: limiter_value(name, client), permits: limiter_permits(name, client) })
}

/// The value key of the state `client` uses on `name`: whom its parked clients queue on.
pub fn state_key<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>) -> Result<Vec<u8>> {
    let c = config(s, name)?;
    Ok(keys(name, c.mode, client)?.value)
}

/// A permit count: 1 to 2^32-1 (a grant's member holds 4 bytes).
pub fn check_permits(permits: i64) -> Result<u32> {
    if (1..=MAX_PERMITS).contains(&permits) {
        Ok(permits as u32)
    } else {
        Err(LockError::PermitsRange)
    }
}

/// One state as the keyspace has it at `now`, nothing written.
#[derive(Clone, Debug)]
pub struct Look {
    pub config: Config,
    pub keys: Keys,
    /// The value key (None: absent).
    pub value: Option<i64>,
    pub window: Window,
}

impl Look {
    /// What the value holds beyond `max(0, rate - S)`: permits given back by Redisson's
    /// release body and not yet taken off the window (below 0: a value lower than the window
    /// explains). 0 when the value is absent.
    pub fn excess(&self) -> i128 {
        let base = (i128::from(self.config.rate) - self.window.total).max(0);
        self.value.map_or(0, |v| i128::from(v) - base)
    }

    /// The excess taken off the newest live grants by the next write.
    pub fn folded(&self) -> i128 {
        self.excess().clamp(0, self.window.live().max(0))
    }

    /// Live permits once the excess is taken off.
    pub fn live(&self) -> i128 {
        (self.window.live() - self.folded()).max(0)
    }

    /// Permits available now: never below 0, never above the rate.
    pub fn available(&self) -> i64 {
        (i128::from(self.config.rate) - self.live()).clamp(0, i128::from(i64::MAX)) as i64
    }

    /// A state Redisson's clients make by acquiring alone: a value that is exactly `rate - S`
    /// (`S` at most the rate), or no value and no grant (a new window). Here every body since
    /// 3.17 answers what this module answers (the count, a grant, the wait), and only the
    /// members differ (the module folds a millisecond's grants).
    pub fn ordinary(&self) -> bool {
        let fits = self.window.total <= i128::from(self.config.rate);
        match self.value {
            Some(_) => self.excess() == 0 && fits,
            None => self.window.total == 0 && self.window.expired_members == 0,
        }
    }
}

/// What a state's commands need the caller's ACL to allow: the limiter and both keys.
fn needs(name: &[u8], keys: &Keys, how: KeyUse) -> Vec<Need> {
    vec![Need::Key(name.to_vec(), how), Need::Key(keys.value.clone(), how), Need::Key(keys.permits.clone(), how)]
}

/// Reads the state `client` uses on `name` at `now`, after checking the caller may use its
/// keys `how` and, as Redisson's assert does before anything else, that `permits` (if given)
/// do not exceed the rate.
pub fn look_as<S: RateStore>(
    s: &mut S,
    name: &[u8],
    client: Option<&[u8]>,
    now: i64,
    how: KeyUse,
    permits: Option<i64>,
) -> Result<Look> {
    let config = config(s, name)?;
    if permits.is_some_and(|p| p > config.rate) {
        return Err(LockError::ExceedsRate);
    }
    let keys = keys(name, config.mode, client)?;
    permit(s, || needs(name, &keys, how))?;
    let value = s.get_int(&keys.value)?;
    let window = rate_window::scan(s, &keys.permits, now, config.interval)?;
    Ok(Look { config, keys, value, window })
}

/// [`look_as`] for reading only (`SYNC.INFO`, a parked client's timeout).
pub fn look<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, now: i64) -> Result<Look> {
    look_as(s, name, client, now, KeyUse::Read, None)
}

/// The TTLs every call leaves, as Redisson's bodies since 3.38: with `keepAliveTime`, all three
/// keys live that long from now; else the value and the grants follow the hash's own TTL.
#[derive(Clone, Copy)]
pub(super) enum Ttl {
    KeepAlive(i64),
    Hash(i64),
    None,
}

/// Computed (and checked) before the first write.
pub(super) fn ttl_plan<S: RateStore>(s: &mut S, name: &[u8], c: &Config) -> Result<Ttl> {
    if c.keep_alive > 0 {
        return Ok(Ttl::KeepAlive(deadline(s.now(), c.keep_alive)?));
    }
    let ttl = s.pttl(name);
    Ok(if ttl > 0 { Ttl::Hash(s.now() + ttl) } else { Ttl::None })
}

pub(super) fn apply_ttl<S: RateStore>(s: &mut S, name: &[u8], keys: &Keys, ttl: Ttl) {
    expire_state(s, name, &keys.value, &keys.permits, ttl);
}

/// [`apply_ttl`] on a state's two keys given as they are (`PEXPIRE` of the hash, then the
/// value, then the grants, Redisson's order).
pub(super) fn expire_state<S: RateStore>(s: &mut S, name: &[u8], value: &[u8], permits: &[u8], ttl: Ttl) {
    match ttl {
        Ttl::KeepAlive(at) => {
            s.pexpire_at(name, at);
            s.pexpire_at(value, at);
            s.pexpire_at(permits, at);
        }
        Ttl::Hash(at) => {
            s.pexpire_at(value, at);
            s.pexpire_at(permits, at);
        }
        Ttl::None => {}
    }
}

/// Removes the expired grants and takes the excess off the newest; writes the value when
/// `write_value` and it changed. The live permits left.
fn settle<S: RateStore>(s: &mut S, l: &Look, write_value: bool) -> Result<i128> {
    rate_window::drop_expired(s, &l.keys.permits, &l.window);
    let folded = rate_window::take_newest(s, &l.keys.permits, l.folded())?;
    let live = (l.window.live() - folded).max(0);
    let available = l.available();
    if write_value && l.value != Some(available) {
        s.set(&l.keys.value, IntBuf::default().format(available));
    }
    Ok(live)
}

fn note<S: RateStore>(s: &mut S, l: &Look, live: i128) {
    s.note_total(&l.keys.permits, u64::try_from(live).unwrap_or(0));
}

/// Redisson's wait: `3 + interval - (now - oldest live grant)` ms, 0 with no live grant.
fn wait_ms(oldest: Option<f64>, now: i64, interval: i64) -> i64 {
    // Lua's number to integer reply: truncated toward 0 (and saturated here).
    oldest.map_or(0, |t| (3.0 + interval as f64 - (now as f64 - t)) as i64)
}

/// What an acquire did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    Granted,
    /// Refused: the ms to wait before trying again (Redisson's reply).
    Wait(i64),
}

/// `RATELIMITER.ACQUIRE name permits`: `tryAcquire(permits)` at `now`. Grants when `permits`
/// are available and nobody is parked ahead (`queued_ahead`): the grant is added
/// ([`rate_window::add_grant`]) and the value decremented. Else the wait.
#[allow(clippy::too_many_arguments)]
pub fn acquire<S: RateStore>(
    s: &mut S,
    name: &[u8],
    client: Option<&[u8]>,
    permits: i64,
    now: i64,
    grant: Grant,
    queued_ahead: bool,
) -> Result<Acquire> {
    let p = check_permits(permits)?;
    let l = look_as(s, name, client, now, KeyUse::ReadWrite, Some(permits))?;
    let ttl = ttl_plan(s, name, &l.config)?;
    let live = settle(s, &l, true)?;
    let out = if !queued_ahead && live + i128::from(permits) <= i128::from(l.config.rate) {
        rate_window::add_grant(s, &l.keys.permits, now, p, grant)?;
        s.decr_by(&l.keys.value, permits)?;
        note(s, &l, live + i128::from(permits));
        Acquire::Granted
    } else {
        note(s, &l, live);
        let oldest = rate_window::oldest_live(s, &l.keys.permits, l.window.threshold)?;
        Acquire::Wait(wait_ms(oldest, now, l.config.interval))
    };
    apply_ttl(s, name, &l.keys, ttl);
    Ok(out)
}

/// `RATELIMITER.AVAILABLE name`: `availablePermits()` at `now`, with the TTLs an acquire
/// leaves (Redisson's body leaves the value key it writes without one).
pub fn available<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, now: i64) -> Result<i64> {
    let l = look_as(s, name, client, now, KeyUse::ReadWrite, None)?;
    let ttl = ttl_plan(s, name, &l.config)?;
    let live = settle(s, &l, true)?;
    note(s, &l, live);
    apply_ttl(s, name, &l.keys, ttl);
    Ok(l.available())
}

/// `RATELIMITER.RELEASE name permits`: `release(permits)`. Takes `permits` off the newest
/// live grants (as many as there are) and sets the value to what is then available, which it
/// returns: at most the rate, and never credited again when those grants expire.
pub fn release<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, permits: i64, now: i64) -> Result<i64> {
    check_permits(permits)?;
    let l = look_as(s, name, client, now, KeyUse::ReadWrite, None)?;
    let ttl = ttl_plan(s, name, &l.config)?;
    let live = settle(s, &l, false)?;
    let live = live - rate_window::take_newest(s, &l.keys.permits, i128::from(permits).min(live))?;
    let v = (i128::from(l.config.rate) - live).clamp(0, i128::from(i64::MAX)) as i64;
    // Redisson's release always writes the value with SET.
    s.set(&l.keys.value, IntBuf::default().format(v));
    note(s, &l, live);
    apply_ttl(s, name, &l.keys, ttl);
    Ok(v)
}

/// The wait a refused `permits` would be told at `now`, by reads alone (a parked client's
/// timeout): 0 when they are available.
pub fn wait<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, permits: i64, now: i64) -> Result<i64> {
    check_permits(permits)?;
    let l = look_as(s, name, client, now, KeyUse::Read, Some(permits))?;
    if i128::from(permits) <= i128::from(l.available()) {
        return Ok(0);
    }
    let oldest = rate_window::oldest_live(s, &l.keys.permits, l.window.threshold)?;
    Ok(wait_ms(oldest, now, l.config.interval))
}

/// When (absolute ms on the window's clock) the oldest live grant leaves the window: the
/// moment a parked client may next be granted without anyone writing. None if nothing is live.
pub fn next_wake<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, now: i64) -> Result<Option<i64>> {
    let l = look(s, name, client, now)?;
    let oldest = rate_window::oldest_live(s, &l.keys.permits, l.window.threshold)?;
    Ok(oldest.map(|t| (t.ceil() as i64).saturating_add(l.config.interval)))
}

#[cfg(test)]
#[path = "ratelimiter_tests.rs"]
pub(crate) mod tests;
