//! `SETRATE` and `TRYSETRATE` of the rate limiter (`super::limiter`): Redisson's
//! `trySetRate` (3.38+) and `setRate(RateLimiterArgs)` / `updateRate` (4.4+), the settings
//! written to the hash and what becomes of the state.

use super::limiter::{apply_ttl, explained, ttl_plan, Config, Keys, Mode, INTERVAL, KEEP_ALIVE, RATE, TYPE};
use super::window;
use crate::core::access::{KeyUse, Need};
use crate::core::rate::store::RateStore;
use crate::core::sync::names::{limiter_permits, limiter_value};
use crate::core::{deadline, permit, IntBuf, LockError, Result};

/// The settings of `SETRATE`/`TRYSETRATE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub mode: Mode,
    pub rate: i64,
    pub interval: i64,
    /// 0: none.
    pub keep_alive: i64,
}

impl Settings {
    /// Redisson's checks (and the module's: a rate and an interval of at least 1).
    fn check(&self) -> Result<()> {
        if self.rate <= 0 {
            return Err(LockError::NotPositive("rate"));
        }
        if self.interval <= 0 {
            return Err(LockError::NotPositive("interval"));
        }
        if self.keep_alive != 0 && self.keep_alive < self.interval {
            return Err(LockError::KeepAliveShort);
        }
        Ok(())
    }

    fn fields(&self) -> [(&'static [u8], Vec<u8>); 4] {
        let n = |v: i64| v.to_string().into_bytes();
        [
            (RATE, n(self.rate)),
            (INTERVAL, n(self.interval)),
            (TYPE, self.mode.field().to_vec()),
            (KEEP_ALIVE, n(self.keep_alive)),
        ]
    }

    fn keep_alive_at<S: RateStore>(&self, s: &mut S) -> Result<Option<i64>> {
        Ok(if self.keep_alive > 0 { Some(deadline(s.now(), self.keep_alive)?) } else { None })
    }
}

/// `RATELIMITER.TRYSETRATE`: `trySetRate(type, rate, interval, keepAliveTime)` (3.38+).
/// `HSETNX` of `rate`, `interval`, `keepAliveTime`, `type`; true if `type` was set, when a
/// keep-alive also becomes the hash's TTL.
pub fn try_set_rate<S: RateStore>(s: &mut S, name: &[u8], set: &Settings) -> Result<bool> {
    set.check()?;
    let at = set.keep_alive_at(s)?;
    let [rate, interval, mode, keep_alive] = set.fields();
    let mut typed = false;
    // Redisson's order: rate, interval, keepAliveTime, type. The first read type-checks `name`.
    for (field, value) in [rate, interval, keep_alive, mode] {
        if s.hash_get(name, field)?.is_none() {
            s.hash_set(name, field, &value);
            typed |= field == TYPE;
        }
    }
    if let (true, Some(at)) = (typed, at) {
        s.pexpire_at(name, at);
    }
    Ok(typed)
}

/// `RATELIMITER.SETRATE`: `setRate(RateLimiterArgs)` / `updateRate` (Redisson 4.4+). With
/// `xx`, nothing unless `name` exists (false). Writes the four fields (a keep-alive becomes the
/// hash's TTL); a changed `type` deletes the overall and `client`'s state; without
/// `keep_state` the state of the new type is deleted; with it, the window is kept and the
/// value recomputed from it at `now` at the new rate, as Redisson's body recomputes it.
pub fn set_rate<S: RateStore>(
    s: &mut S,
    name: &[u8],
    set: &Settings,
    client: Option<&[u8]>,
    keep_state: bool,
    xx: bool,
    now: i64,
) -> Result<bool> {
    set.check()?;
    if xx && !s.exists(name) {
        return Ok(false);
    }
    let old_type = s.hash_get(name, TYPE)?;
    let changes_type = old_type.as_deref().is_some_and(|t| t != set.mode.field());
    let all = [limiter_value(name, None), client.map(|c| limiter_value(name, Some(c))).unwrap_or_default()];
    let grants = [limiter_permits(name, None), client.map(|c| limiter_permits(name, Some(c))).unwrap_or_default()];
    let mine = match (set.mode, client) {
        (Mode::Overall, _) => Some(Keys { value: all[0].clone(), permits: grants[0].clone() }),
        (Mode::PerClient, Some(_)) => Some(Keys { value: all[1].clone(), permits: grants[1].clone() }),
        (Mode::PerClient, None) => None,
    };
    permit(s, || {
        let mut v = vec![Need::Key(name.to_vec(), KeyUse::ReadWrite)];
        v.extend(all.iter().chain(&grants).filter(|k| !k.is_empty()).map(|k| Need::Key(k.clone(), KeyUse::ReadWrite)));
        v
    })?;
    let at = set.keep_alive_at(s)?;
    // Everything the kept state needs is read before the first write.
    let kept = match (&mine, changes_type || !keep_state) {
        (Some(keys), false) => {
            // Read (and type-checked) as Redisson's body reads it; the window decides the value.
            s.get(&keys.value)?;
            let window = window::read(s, &keys.permits, now, set.interval)?;
            Some((window, ttl_plan(s, name, &config_of(set))?))
        }
        _ => None,
    };
    for (field, value) in set.fields() {
        s.hash_set(name, field, &value);
    }
    if let Some(at) = at {
        s.pexpire_at(name, at);
    }
    if changes_type {
        for k in [&all[0], &all[1], &grants[0], &grants[1]].into_iter().filter(|k| !k.is_empty()) {
            s.del(k);
        }
        return Ok(true);
    }
    let (Some(keys), Some((mut window, ttl))) = (&mine, kept) else {
        if let Some(keys) = &mine {
            s.del(&keys.value);
            s.del(&keys.permits);
        }
        return Ok(true);
    };
    // Redisson's setRate(KEEPSTATE): the grants stay, what left the window goes, and the value
    // is the rate less what is live (whatever it was: a release not yet taken off is dropped,
    // as the body drops it).
    window.settle(s, &keys.permits);
    let v = explained(set.rate, &window);
    s.set(&keys.value, IntBuf::default().format(v));
    apply_ttl(s, name, keys, ttl);
    window.finish(s, &keys.permits);
    Ok(true)
}

fn config_of(set: &Settings) -> Config {
    Config { rate: set.rate, interval: set.interval, mode: set.mode, keep_alive: set.keep_alive }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
