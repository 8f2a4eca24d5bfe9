//! The blocking rate limiter: each call of [`crate::RateLimiter`] run to completion.

use std::sync::Arc;
use std::time::Duration;

use super::runtime::Rt;
use crate::error::Result;
use crate::sync::{RateLimiterConfig, RateType, SetRate};

/// A blocking [`crate::RateLimiter`].
#[derive(Clone, Debug)]
pub struct RateLimiter {
    inner: crate::RateLimiter,
    rt: Arc<Rt>,
}

impl RateLimiter {
    pub(crate) fn new(inner: crate::RateLimiter, rt: Arc<Rt>) -> RateLimiter {
        RateLimiter { inner, rt }
    }

    /// [`crate::RateLimiter::with_client_id`].
    pub fn with_client_id(self, id: &str) -> Self {
        RateLimiter { inner: self.inner.with_client_id(id), rt: self.rt }
    }

    /// [`crate::RateLimiter::client_id`].
    pub fn client_id(&self) -> &str {
        self.inner.client_id()
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// [`crate::RateLimiter::try_set_rate`].
    pub fn try_set_rate(
        &self,
        rate_type: RateType,
        rate: u64,
        interval: Duration,
        keep_alive: Option<Duration>,
    ) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_rate(rate_type, rate, interval, keep_alive))?
    }

    /// [`crate::RateLimiter::set_rate`].
    pub fn set_rate(&self, rate_type: RateType, rate: u64, interval: Duration, options: SetRate) -> Result<bool> {
        self.rt.block_on(self.inner.set_rate(rate_type, rate, interval, options))?
    }

    /// [`crate::RateLimiter::acquire`].
    pub fn acquire(&self, permits: u64) -> Result<()> {
        self.rt.block_on(self.inner.acquire(permits))?
    }

    /// [`crate::RateLimiter::try_acquire`].
    pub fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<bool> {
        self.rt.block_on(self.inner.try_acquire(permits, timeout))?
    }

    /// [`crate::RateLimiter::release`].
    pub fn release(&self, permits: u64) -> Result<i64> {
        self.rt.block_on(self.inner.release(permits))?
    }

    /// [`crate::RateLimiter::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits())?
    }

    /// [`crate::RateLimiter::get_config`].
    pub fn get_config(&self) -> Result<Option<RateLimiterConfig>> {
        self.rt.block_on(self.inner.get_config())?
    }
}
