//! [`RateLimiter`]: Redisson's `RRateLimiter` (`RATELIMITER.*`) on its layout, so a Redisson
//! client shares it by name: the hash `name` (`rate`, `interval`, `type`, `keepAliveTime`),
//! `{name}:value[:<client id>]` and `{name}:permits[:<client id>]`.
//!
//! Every command but `TRYSETRATE` carries `CLIENT <client id>`: a `PER_CLIENT` limiter uses that
//! client's window (an `OVERALL` one ignores it), as Redisson's bodies always get the instance's
//! per-client keys. The client id is the [`LockClient`]'s uuid, the one every owner name starts
//! with, as Redisson uses its instance id (`ServiceManager.getId()`) for both.
//!
//! Redisson sends its limiter's bodies with `evalWriteAsync` (`trySetRate` with
//! `evalWriteNoRetryAsync`), never the synced eval of its locks and semaphores, so no call here
//! waits for the replicas either. A change whose reply is lost is never sent again
//! ([`Error::StateUnknown`]); reads are asked again.

use std::sync::Arc;
use std::time::Duration;

use super::{check_name, check_open, positive, unanswered, wait_args, with_block};
use crate::client::{Core, LockClient};
use crate::detach::{detached, GiveBack};
use crate::durations::ms;
use crate::error::{Error, Result};
use crate::reply;
use crate::transport::{CallError, Request};

/// Redisson's `RateType`: one window for every client, or one per client id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateType {
    /// One window shared by every client (`type` `0`).
    Overall,
    /// One window per client id (`type` `1`): `{name}:value:<id>`, `{name}:permits:<id>`.
    PerClient,
}

impl RateType {
    fn arg(self) -> &'static str {
        match self {
            RateType::Overall => "OVERALL",
            RateType::PerClient => "PER_CLIENT",
        }
    }
}

/// A limiter's settings, as its hash holds them (Redisson's `RateLimiterConfig`, with the
/// keep-alive Redisson 3.38+ writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimiterConfig {
    /// One window, or one per client id.
    pub rate_type: RateType,
    /// Permits per window.
    pub rate: u64,
    /// The window.
    pub interval: Duration,
    /// How long the limiter's keys live after their last use (`None`: no expiry).
    pub keep_alive: Option<Duration>,
}

/// The options of [`RateLimiter::set_rate`] (Redisson's `RateLimiterArgs`):
/// `SetRate { keep_state: true, ..Default::default() }`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetRate {
    /// The limiter's keys expire this long after their last use (at least the interval).
    pub keep_alive: Option<Duration>,
    /// Keep the grants in the window: they count against the new rate (else the window starts
    /// afresh).
    pub keep_state: bool,
    /// Only if the limiter is set (Redisson's `updateRate`); `Ok(false)` when it is not.
    pub xx: bool,
}

/// Redisson's `RRateLimiter`: at most `rate` permits in any window of `interval`, for every
/// client ([`RateType::Overall`]) or per client id ([`RateType::PerClient`]). Cheap to clone.
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// # let locks = redis_lockmod_client::LockClient::new(redis::Client::open(url)?)?;
/// use std::time::Duration;
/// use redis_lockmod_client::RateType;
///
/// let limiter = locks.rate_limiter("emails");
/// limiter.try_set_rate(RateType::Overall, 3, Duration::from_secs(60), None).await?;
/// limiter.acquire(2).await?;                                   // waits in the server (BLOCK)
/// assert!(!limiter.try_acquire(2, Duration::ZERO).await?);     // 1 left this minute
/// assert_eq!(limiter.available_permits().await?, 1);
/// # limiter.release(2).await?;
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RateLimiter {
    client: LockClient,
    name: Arc<str>,
    client_id: Arc<str>,
}

impl LockClient {
    /// A rate limiter (Redisson's `RRateLimiter`); its client id is this client's uuid.
    pub fn rate_limiter(&self, name: &str) -> RateLimiter {
        RateLimiter { client: self.clone(), name: name.into(), client_id: self.id().into() }
    }
}

impl RateLimiter {
    fn core(&self) -> &Arc<Core> {
        self.client.core()
    }

    /// This limiter with another client id: the `PER_CLIENT` window it uses (a Redisson
    /// client's `getServiceManager().getId()` shares that client's window).
    pub fn with_client_id(mut self, id: &str) -> Self {
        self.client_id = id.into();
        self
    }

    /// The id of this client's window of a `PER_CLIENT` limiter (default: the client's uuid).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The limiter's name (its hash's key).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn check(&self) -> Result<()> {
        check_name(&self.name)?;
        if self.client_id.is_empty() {
            return Err(Error::InvalidArgument("a client id is a non-empty string".into()));
        }
        Ok(())
    }

    /// `name`'s command with `CLIENT <id>` after `args`.
    fn cmd(&self, command: &str, args: impl redis::ToRedisArgs) -> redis::Cmd {
        redis::cmd(command).arg(&*self.name).arg(args).arg("CLIENT").arg(&*self.client_id).clone()
    }

    /// A change: sent once, a lost reply is [`Error::StateUnknown`]; no replica wait.
    async fn once(&self, c: redis::Cmd) -> Result<redis::Value> {
        self.check()?;
        self.core().transport.once(&self.name, c, self.core().command_timeout).await
    }

    /// Redisson's `trySetRate`: sets the rate if the limiter has none yet; true if it was set.
    /// `keep_alive`: the limiter's keys expire that long after their last use (at least
    /// `interval`).
    pub async fn try_set_rate(
        &self,
        rate_type: RateType,
        rate: u64,
        interval: Duration,
        keep_alive: Option<Duration>,
    ) -> Result<bool> {
        let mut c = redis::cmd("RATELIMITER.TRYSETRATE");
        c.arg(&*self.name).arg(settings(rate_type, rate, interval, keep_alive)?);
        Ok(reply::int(&self.once(c).await?)? == 1)
    }

    /// Redisson's `setRate(RateLimiterArgs)`: sets the rate whatever it was; the window starts
    /// afresh unless [`SetRate::keep_state`]. With [`SetRate::xx`] only if the limiter is set
    /// (Redisson's `updateRate`): `Ok(false)` when it is not.
    pub async fn set_rate(&self, rate_type: RateType, rate: u64, interval: Duration, options: SetRate) -> Result<bool> {
        let mut args = settings(rate_type, rate, interval, options.keep_alive)?;
        if options.keep_state {
            args.push("KEEPSTATE".into());
        }
        if options.xx {
            args.push("XX".into());
        }
        Ok(reply::int(&self.once(self.cmd("RATELIMITER.SETRATE", args)).await?)? == 1)
    }

    /// Takes `permits`, waiting in the server (`BLOCK 0`, in arrival order) until they fit in
    /// the window: Redisson's `acquire`.
    pub async fn acquire(&self, permits: u64) -> Result<()> {
        while !self.take(permits, None).await? {}
        Ok(())
    }

    /// Takes `permits`, waiting in the server at most `timeout` (zero: tries once, Redisson's
    /// `tryAcquire(permits)`; longer than the server can express, `Duration::MAX`: no limit);
    /// false if they did not fit by then. Dropping this future ends the wait in the server
    /// (`CLIENT UNBLOCK`); permits granted in that instant are given back before the client's
    /// next request on the limiter.
    pub async fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<bool> {
        self.take(permits, Some(timeout)).await
    }

    async fn take(&self, permits: u64, timeout: Option<Duration>) -> Result<bool> {
        check_open(&self.name, self.core())?;
        self.check()?;
        positive(permits, "permits")?;
        let limiter = self.clone();
        let grant = detached(self.core(), &self.name, move |cancel| async move {
            let core = limiter.core().clone();
            let (block, t) = wait_args(&core, timeout);
            let cmds = [with_block(limiter.cmd("RATELIMITER.ACQUIRE", permits), block)];
            let req = Request { key: &limiter.name, cmds: &cmds, timeout: t, cancel: Some(&cancel), sync: None };
            match core.transport.call(req).await {
                // Nil: granted. An integer: the wait the window asks for (not granted).
                Ok(r) => match r.values.first() {
                    Some(redis::Value::Nil) => Ok(Some(Grant { limiter, permits })),
                    Some(v) => reply::int(v).map(|_| None),
                    None => Ok(None),
                },
                Err(CallError::Failed(e)) => Err(e),
                Err(CallError::Lost(l)) => Err(unanswered("RATELIMITER.ACQUIRE", &limiter.name, &cancel, l.cause)),
            }
        })
        .await?;
        Ok(grant.is_some())
    }

    /// Redisson's `release`: gives `permits` back to the window (taken off its newest grants;
    /// never above the rate); returns the permits available after it.
    pub async fn release(&self, permits: u64) -> Result<i64> {
        let c = self.cmd("RATELIMITER.RELEASE", positive(permits, "permits")?);
        reply::int(&self.once(c).await?)
    }

    /// The permits that fit in the window now (0 to the rate).
    pub async fn available_permits(&self) -> Result<i64> {
        self.check()?;
        let c = self.cmd("RATELIMITER.AVAILABLE", &[] as &[&str]);
        reply::int(&self.core().transport.read(&self.name, c, self.core().command_timeout).await?)
    }

    /// The limiter's settings, or `None` when it has none.
    pub async fn get_config(&self) -> Result<Option<RateLimiterConfig>> {
        self.check()?;
        let c = redis::cmd("HGETALL").arg(&*self.name).clone();
        let v = self.core().transport.read(&self.name, c, self.core().command_timeout).await?;
        parse_config(&self.name, &reply::pairs(&v)?)
    }
}

/// `OVERALL|PER_CLIENT rate interval [KEEPALIVE ms]`, checked as Redisson checks them.
fn settings(rate_type: RateType, rate: u64, interval: Duration, keep_alive: Option<Duration>) -> Result<Vec<String>> {
    let interval = positive(ms(interval), "interval (in ms)")?;
    let mut args = vec![rate_type.arg().to_string(), positive(rate, "rate")?.to_string(), interval.to_string()];
    match keep_alive.map(ms) {
        None | Some(0) => {}
        Some(k) if k < interval => {
            return Err(Error::InvalidArgument("keep_alive must be at least the interval (Redisson's rule)".into()))
        }
        Some(k) => args.extend(["KEEPALIVE".to_string(), k.to_string()]),
    }
    Ok(args)
}

/// The limiter's hash as its settings; `None` without `rate`, `interval` and `type`.
fn parse_config(name: &str, fields: &[(String, String)]) -> Result<Option<RateLimiterConfig>> {
    let get = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    let (Some(rate), Some(interval), Some(kind)) = (get("rate"), get("interval"), get("type")) else {
        return Ok(None);
    };
    let bad = |f: &str, v: &str| {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::Parse,
            "unexpected rate limiter field",
            format!("{name}: field {f} is {v:?}"),
        )))
    };
    let number = |f: &str, v: &str| v.parse::<u64>().map_err(|_| bad(f, v));
    let rate_type = match kind {
        "0" => RateType::Overall,
        "1" => RateType::PerClient,
        other => return Err(bad("type", other)),
    };
    let keep_alive = match get("keepAliveTime") {
        Some(v) => number("keepAliveTime", v)?,
        None => 0,
    };
    Ok(Some(RateLimiterConfig {
        rate_type,
        rate: number("rate", rate)?,
        interval: Duration::from_millis(number("interval", interval)?),
        keep_alive: (keep_alive > 0).then(|| Duration::from_millis(keep_alive)),
    }))
}

/// Permits an acquire was granted. The caller keeps them; one it never received (its future
/// was dropped: the grant raced the cancellation) gives them back, as a settle of the limiter.
struct Grant {
    limiter: RateLimiter,
    permits: u64,
}

impl GiveBack for Grant {
    async fn give_back(self) {
        let Grant { limiter, permits: n } = self;
        tracing::info!(
            "redis-lockmod: {n} permit(s) of {} granted to a cancelled acquire: giving them back",
            limiter.name
        );
        if let Err(e) = limiter.release(n).await {
            tracing::warn!("redis-lockmod: giving back {n} permit(s) of {}: {e}", limiter.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn settings_are_checked_as_redisson_checks_them() {
        let s = Duration::from_secs;
        assert_eq!(settings(RateType::PerClient, 5, s(1), None).unwrap(), ["PER_CLIENT", "5", "1000"]);
        assert_eq!(settings(RateType::Overall, 5, s(1), Some(Duration::ZERO)).unwrap(), ["OVERALL", "5", "1000"]);
        assert_eq!(settings(RateType::Overall, 5, s(1), Some(s(2))).unwrap(), ["OVERALL", "5", "1000", "KEEPALIVE", "2000"]);
        for bad in [settings(RateType::Overall, 0, s(1), None),
                    settings(RateType::Overall, 5, Duration::from_micros(999), None),
                    settings(RateType::Overall, 5, s(2), Some(s(1)))] {
            assert!(matches!(bad, Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn a_config_is_read_from_redissons_hash() {
        let f = |v: &[(&str, &str)]| v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        let got = parse_config("n", &f(&[("rate", "10"), ("interval", "1000"), ("keepAliveTime", "0"), ("type", "1")]));
        let want = RateLimiterConfig {
            rate_type: RateType::PerClient,
            rate: 10,
            interval: Duration::from_secs(1),
            keep_alive: None,
        };
        assert_eq!(got.ok(), Some(Some(want)));
        let old = parse_config("n", &f(&[("rate", "3"), ("interval", "50"), ("type", "0")])).ok().flatten();
        assert_eq!(old.map(|c| (c.rate_type, c.keep_alive)), Some((RateType::Overall, None)), "before 3.38");
        assert_eq!(parse_config("n", &[]).ok(), Some(None), "not set");
        assert!(parse_config("n", &f(&[("rate", "3"), ("interval", "50"), ("type", "2")])).is_err());
        assert!(parse_config("n", &f(&[("rate", "x"), ("interval", "50"), ("type", "0")])).is_err());
    }
}
