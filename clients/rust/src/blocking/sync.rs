//! The blocking synchronizers: each call of [`crate::Semaphore`],
//! [`crate::PermitExpirableSemaphore`] and [`crate::CountDownLatch`] run to completion.

use std::sync::Arc;
use std::time::Duration;

use super::runtime::Rt;
use crate::error::Result;

/// A blocking [`crate::Semaphore`].
#[derive(Clone, Debug)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Arc<Rt>,
}

impl Semaphore {
    pub(crate) fn new(inner: crate::Semaphore, rt: Arc<Rt>) -> Semaphore {
        Semaphore { inner, rt }
    }

    /// [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u64, lease: Option<Duration>) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits, lease))?
    }

    /// [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u64) -> Result<SemaphoreGuard> {
        let g = self.rt.block_on(self.inner.acquire(permits))??;
        Ok(SemaphoreGuard { inner: Some(g), rt: self.rt.clone() })
    }

    /// [`crate::Semaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<Option<SemaphoreGuard>> {
        let g = self.rt.block_on(self.inner.try_acquire(permits, timeout))??;
        Ok(g.map(|g| SemaphoreGuard { inner: Some(g), rt: self.rt.clone() }))
    }

    /// [`crate::Semaphore::release`].
    pub fn release(&self, permits: u64) -> Result<i64> {
        self.rt.block_on(self.inner.release(permits))?
    }

    /// [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, delta: i64) -> Result<()> {
        self.rt.block_on(self.inner.add_permits(delta))?
    }

    /// [`crate::Semaphore::drain_permits`].
    pub fn drain_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.drain_permits())?
    }

    /// [`crate::Semaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits())?
    }
}

/// A blocking [`crate::SemaphoreGuard`].
#[must_use = "dropping the guard gives the permits back at once (in the background)"]
#[derive(Debug)]
pub struct SemaphoreGuard {
    inner: Option<crate::SemaphoreGuard>,
    rt: Arc<Rt>,
}

impl SemaphoreGuard {
    /// [`crate::SemaphoreGuard::release`].
    pub fn release(mut self) -> Result<i64> {
        match self.inner.take() {
            Some(g) => self.rt.block_on(g.release())?,
            None => unreachable!("a guard is released once"),
        }
    }

    /// [`crate::SemaphoreGuard::forget`].
    pub fn forget(mut self) {
        if let Some(g) = self.inner.take() {
            g.forget();
        }
    }
}

/// A blocking [`crate::PermitExpirableSemaphore`].
#[derive(Clone, Debug)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    rt: Arc<Rt>,
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(inner: crate::PermitExpirableSemaphore, rt: Arc<Rt>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore { inner, rt }
    }

    /// [`crate::PermitExpirableSemaphore::with_lease`].
    pub fn with_lease(self, lease: Duration) -> Self {
        PermitExpirableSemaphore { inner: self.inner.with_lease(lease), rt: self.rt }
    }

    /// [`crate::PermitExpirableSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))?
    }

    /// [`crate::PermitExpirableSemaphore::acquire`].
    pub fn acquire(&self, permits: u64) -> Result<PermitGuard> {
        let g = self.rt.block_on(self.inner.acquire(permits))??;
        Ok(PermitGuard { inner: Some(g), rt: self.rt.clone() })
    }

    /// [`crate::PermitExpirableSemaphore::try_acquire`].
    pub fn try_acquire(&self, permits: u64, timeout: Duration) -> Result<Option<PermitGuard>> {
        let g = self.rt.block_on(self.inner.try_acquire(permits, timeout))??;
        Ok(g.map(|g| PermitGuard { inner: Some(g), rt: self.rt.clone() }))
    }

    /// [`crate::PermitExpirableSemaphore::release`].
    pub fn release(&self, ids: &[String]) -> Result<()> {
        self.rt.block_on(self.inner.release(ids))?
    }

    /// [`crate::PermitExpirableSemaphore::available_permits`].
    pub fn available_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits())?
    }
}

/// A blocking [`crate::PermitGuard`].
#[must_use = "dropping the guard gives the permits back at once (in the background)"]
#[derive(Debug)]
pub struct PermitGuard {
    inner: Option<crate::PermitGuard>,
    rt: Arc<Rt>,
}

impl PermitGuard {
    /// The permits' ids.
    pub fn ids(&self) -> &[String] {
        self.inner.as_ref().map(|g| g.ids()).unwrap_or(&[])
    }

    /// [`crate::PermitGuard::release`].
    pub fn release(mut self) -> Result<()> {
        match self.inner.take() {
            Some(g) => self.rt.block_on(g.release())?,
            None => unreachable!("a guard is released once"),
        }
    }
}

/// A blocking [`crate::CountDownLatch`].
#[derive(Clone, Debug)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    rt: Arc<Rt>,
}

impl CountDownLatch {
    pub(crate) fn new(inner: crate::CountDownLatch, rt: Arc<Rt>) -> CountDownLatch {
        CountDownLatch { inner, rt }
    }

    /// [`crate::CountDownLatch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_count(count))?
    }

    /// [`crate::CountDownLatch::count_down`].
    pub fn count_down(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count_down())?
    }

    /// [`crate::CountDownLatch::count`].
    pub fn count(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count())?
    }

    /// [`crate::CountDownLatch::wait`].
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        self.rt.block_on(self.inner.wait(timeout))?
    }
}
