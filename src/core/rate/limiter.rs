//! The rate limiter (Redisson's `RRateLimiter`): a sliding window of grants, on Redisson's keys.
//!
//! | key                                  | type   | meaning                                     |
//! |--------------------------------------|--------|---------------------------------------------|
//! | `name`                               | hash   | `rate`, `interval` (ms), `type` (`0` OVERALL, `1` PER_CLIENT), `keepAliveTime` (ms, 0: none) |
//! | `{name}:value[:<client id>]`         | string | permits available now                       |
//! | `{name}:permits[:<client id>]`       | zset   | the grants (`core::rate::window`)            |
//!
//! **The model.** The zset is the truth: a limiter of `rate` per `interval` grants `p` at `now`
//! only while the live grants hold at most `rate - p`, whatever the value says. Nothing else
//! can be trusted: the keyspace cannot tell a value raised by Redisson's release body from one
//! left over from a higher rate (a `setRate` for another client, or before a restart), so a
//! value the window does not explain is recomputed from the window, as Redisson's own
//! `setRate(KEEPSTATE)` and recompute do. A release given here ([`release`]) takes its permits
//! off the newest grants, so it is in the window, once.
//!
//! The value is written as [`Look::explained`]: what is available, less the permits of the
//! expired grants still in the zset (a call removes at most `STEP` of them; the rest go in
//! later calls). Redisson's bodies add the expired grants they find to the value before using
//! it, so they read exactly what is available.
//!
//! Every function reads and checks everything (types, fields, members it must read, ACL,
//! deadlines) before its first write. Time: `now` is the window's clock (the server's, `NOW`,
//! or a Redisson body's ARGV); TTLs are set on the server's clock ([`crate::core::Store::now`]), as
//! the bodies' `PEXPIRE` does.

pub use super::settings::{set_rate, try_set_rate, Settings};
use super::window::{self, Window, MAX_PERMITS};
use crate::core::access::{KeyUse, Need};
use crate::core::rate::store::RateStore;
use crate::core::sync::names::{limiter_permits, limiter_value};
use crate::core::{deadline, parse_i64, permit, IntBuf, LockError, Result};

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
/// Redisson's assert), `BadLimiterField` for a field the module cannot read: a `rate` or an
/// `interval` that is not an integer of at least 1 (Redisson's `trySetRate` and `setRate`
/// refuse both; its `tryAcquire` fails on a rate below 1), a `type` other than `0` or `1`, a
/// `keepAliveTime` that is not an integer (Redisson's `tonumber(...) > 0` fails on it; a
/// negative one means none, for Redisson as here).
pub fn config<S: RateStore>(s: &mut S, name: &[u8]) -> Result<Config> {
    // Each field parsed where the store holds it: (present, parsed), the mode as 0 or 1.
    let mut got = [(false, None::<i64>); 4];
    s.hash_get4(name, [RATE, INTERVAL, TYPE, KEEP_ALIVE], &mut |i, v| {
        got[i] = (true, if i == 2 { mode_of(v) } else { parse_i64(v) });
    })?;
    let [(true, rate), (true, interval), (true, mode), (has_keep_alive, keep_alive)] = got else {
        return Err(LockError::NotInitialized);
    };
    let positive = |n: Option<i64>, field| n.filter(|&n| n > 0).ok_or(LockError::BadLimiterField(field));
    let rate = positive(rate, "rate")?;
    let interval = positive(interval, "interval")?;
    let mode = match mode {
        Some(0) => Mode::Overall,
        Some(_) => Mode::PerClient,
        None => return Err(LockError::BadLimiterField("type")),
    };
    let keep_alive = match (has_keep_alive, keep_alive) {
        (false, _) => 0,
        (true, v) => v.ok_or(LockError::BadLimiterField("keepAliveTime"))?.max(0),
    };
    Ok(Config { rate, interval, mode, keep_alive })
}

/// The `type` field: `0` or `1` exactly, as Redisson writes it.
fn mode_of(v: &[u8]) -> Option<i64> {
    match v {
        b"0" => Some(0),
        b"1" => Some(1),
        _ => None,
    }
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

/// One state as the keyspace has it at `now`, with its window read (and its index taken: give
/// it back with [`Look::finish`]).
#[derive(Debug)]
pub struct Look {
    pub config: Config,
    pub keys: Keys,
    /// The value key (None: absent).
    pub value: Option<i64>,
    pub window: Window,
}

impl Look {
    /// Permits of the live grants.
    pub fn live(&self) -> i128 {
        self.window.live.max(0)
    }

    /// Permits available now: never below 0, never above the rate.
    pub fn available(&self) -> i64 {
        (i128::from(self.config.rate) - self.live()).clamp(0, i128::from(i64::MAX)) as i64
    }

    /// The value the window explains: [`Look::available`] less the expired permits still in
    /// the zset, which Redisson's bodies add back before they read it. Never below `-expired`
    /// (an over-committed window, a rate lowered below its grants, reads as 0, as Redisson's
    /// `setRate` floors it).
    pub fn explained(&self) -> i64 {
        explained(self.config.rate, &self.window)
    }

    /// Gives the window's index back to the store.
    pub fn finish<S: RateStore>(&mut self, s: &mut S) {
        self.window.finish(s, &self.keys.permits);
    }
}

/// [`Look::explained`] of `window` at `rate`.
pub(super) fn explained(rate: i64, window: &Window) -> i64 {
    let available = (i128::from(rate) - window.live.max(0)).max(0);
    (available - window.expired).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
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
    let window = window::read(s, &keys.permits, now, config.interval)?;
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

/// Removes what left the window (at most `STEP` members) and folds the newest millisecond
/// once it is past.
fn settle<S: RateStore>(s: &mut S, l: &mut Look, now: i64) -> Result<()> {
    l.window.settle(s, &l.keys.permits);
    l.window.fold(s, &l.keys.permits, now)
}

/// Writes the value the window explains, if the key holds another; the value it now holds.
fn write_value<S: RateStore>(s: &mut S, l: &Look) -> i64 {
    let v = l.explained();
    if l.value != Some(v) {
        s.set(&l.keys.value, IntBuf::default().format(v));
    }
    v
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
/// are available and nobody is parked ahead (`queued_ahead`): a member of `random` bytes scored
/// `now` is added and the value decremented. Else the wait.
pub fn acquire<S: RateStore>(
    s: &mut S,
    name: &[u8],
    client: Option<&[u8]>,
    permits: i64,
    now: i64,
    random: &[u8],
    queued_ahead: bool,
) -> Result<Acquire> {
    let p = check_permits(permits)?;
    let mut l = look_as(s, name, client, now, KeyUse::ReadWrite, Some(permits))?;
    let ttl = ttl_plan(s, name, &l.config)?;
    settle(s, &mut l, now)?;
    let value = write_value(s, &l);
    let out = if !queued_ahead && l.live() + i128::from(permits) <= i128::from(l.config.rate) {
        l.window.add_grant(s, &l.keys.permits, now, p, random);
        s.decr_known(&l.keys.value, value, permits)?;
        Acquire::Granted
    } else {
        let oldest = l.window.oldest_live(s, &l.keys.permits)?;
        Acquire::Wait(wait_ms(oldest, now, l.config.interval))
    };
    apply_ttl(s, name, &l.keys, ttl);
    l.finish(s);
    Ok(out)
}

/// `RATELIMITER.AVAILABLE name`: `availablePermits()` at `now`, with the TTLs an acquire
/// leaves (Redisson's body leaves the value key it writes without one).
pub fn available<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, now: i64) -> Result<i64> {
    let mut l = look_as(s, name, client, now, KeyUse::ReadWrite, None)?;
    let ttl = ttl_plan(s, name, &l.config)?;
    settle(s, &mut l, now)?;
    write_value(s, &l);
    apply_ttl(s, name, &l.keys, ttl);
    l.finish(s);
    Ok(l.available())
}

/// `RATELIMITER.RELEASE name permits`: `release(permits)`. Takes `permits` off the newest
/// live grants (as many as there are) and sets the value to what is then available, which it
/// returns: at most the rate, and never credited again when those grants expire.
pub fn release<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, permits: i64, now: i64) -> Result<i64> {
    check_permits(permits)?;
    let mut l = look_as(s, name, client, now, KeyUse::ReadWrite, None)?;
    let ttl = ttl_plan(s, name, &l.config)?;
    settle(s, &mut l, now)?;
    let live = l.live();
    l.window.take_newest(s, &l.keys.permits, i128::from(permits).min(live))?;
    // Redisson's release always writes the value with SET.
    s.set(&l.keys.value, IntBuf::default().format(l.explained()));
    apply_ttl(s, name, &l.keys, ttl);
    l.finish(s);
    Ok(l.available())
}

/// The wait a refused `permits` would be told at `now`, by reads alone (a parked client's
/// timeout): 0 when they are available.
pub fn wait<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, permits: i64, now: i64) -> Result<i64> {
    check_permits(permits)?;
    let mut l = look_as(s, name, client, now, KeyUse::Read, Some(permits))?;
    let out = if i128::from(permits) <= i128::from(l.available()) {
        0
    } else {
        wait_ms(l.window.oldest_live(s, &l.keys.permits)?, now, l.config.interval)
    };
    l.finish(s);
    Ok(out)
}

/// When (absolute ms on the window's clock) the oldest live grant leaves the window: the
/// moment a parked client may next be granted without anyone writing. None if nothing is live.
/// Reads the settings and one member: O(log N).
pub fn next_wake<S: RateStore>(s: &mut S, name: &[u8], client: Option<&[u8]>, now: i64) -> Result<Option<i64>> {
    let c = config(s, name)?;
    let keys = keys(name, c.mode, client)?;
    permit(s, || needs(name, &keys, KeyUse::Read))?;
    let oldest = window::oldest_live(s, &keys.permits, now.saturating_sub(c.interval))?;
    Ok(oldest.map(|t| (t.ceil() as i64).saturating_add(c.interval)))
}

#[cfg(test)]
#[path = "limiter_tests.rs"]
pub(crate) mod tests;
