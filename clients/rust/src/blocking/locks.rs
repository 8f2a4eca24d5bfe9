//! The blocking locks: each call of [`crate::Lock`] run to completion.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::runtime::Rt;
use crate::error::Result;
use crate::guard::Unlocked;

/// A blocking [`crate::Lock`] (reentrant, fair, or one side of a read-write lock).
#[derive(Clone)]
pub struct Lock {
    inner: crate::Lock,
    rt: Arc<Rt>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Lock").field("name", &self.inner.name()).field("owner", &self.inner.owner()).finish()
    }
}

impl Lock {
    pub(crate) fn new(inner: crate::Lock, rt: Arc<Rt>) -> Lock {
        Lock { inner, rt }
    }

    /// [`crate::Lock::with_lease`].
    pub fn with_lease(self, lease: Duration) -> Self {
        Lock { inner: self.inner.with_lease(lease), rt: self.rt }
    }

    /// [`crate::Lock::fenced`].
    pub fn fenced(self) -> Self {
        Lock { inner: self.inner.fenced(), rt: self.rt }
    }

    /// [`crate::Lock::with_fair_wait`].
    pub fn with_fair_wait(self, wait: Duration) -> Self {
        Lock { inner: self.inner.with_fair_wait(wait), rt: self.rt }
    }

    /// [`crate::Lock::reentrant`]: Redisson's reentrance, one owner for every acquire of this
    /// object (threads sharing it do not exclude each other).
    pub fn reentrant(self) -> Self {
        Lock { inner: self.inner.reentrant(), rt: self.rt }
    }

    /// [`crate::Lock::with_owner`].
    pub fn with_owner(self, owner: &str) -> Self {
        Lock { inner: self.inner.with_owner(owner), rt: self.rt }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// [`crate::Lock::owner`]: a reentrant object's owner name, else `None`.
    pub fn owner(&self) -> Option<&str> {
        self.inner.owner()
    }

    /// Takes the lock (a reentrant object: or re-enters it), waiting in the server without
    /// limit. Threads sharing a lock object (an `Arc<Lock>`, clones) exclude each other.
    pub fn acquire(&self) -> Result<LockGuard> {
        let g = self.rt.block_on(self.inner.acquire())??;
        Ok(LockGuard { inner: Some(g), rt: self.rt.clone() })
    }

    /// Takes the lock (a reentrant object: or re-enters it), waiting at most `timeout` (zero:
    /// tries once; `Duration::MAX`: no limit).
    pub fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        let g = self.rt.block_on(self.inner.try_acquire(timeout))??;
        Ok(g.map(|g| LockGuard { inner: Some(g), rt: self.rt.clone() }))
    }

    /// [`crate::Lock::hold_count`].
    pub fn hold_count(&self) -> Result<i64> {
        self.rt.block_on(self.inner.hold_count())?
    }

    /// [`crate::Lock::is_held`].
    pub fn is_held(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_held())?
    }

    /// [`crate::Lock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())?
    }

    /// [`crate::Lock::remaining_ms`].
    pub fn remaining_ms(&self) -> Result<i64> {
        self.rt.block_on(self.inner.remaining_ms())?
    }

    /// [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())?
    }
}

/// A blocking [`crate::ReadWriteLock`].
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(inner: crate::ReadWriteLock, rt: Arc<Rt>) -> ReadWriteLock {
        ReadWriteLock { read: Lock::new(inner.read(), rt.clone()), write: Lock::new(inner.write(), rt) }
    }

    /// [`crate::ReadWriteLock::reentrant`]: both sides one holder, as Redisson's.
    pub fn reentrant(self) -> Self {
        let rt = self.read.rt.clone();
        let inner = crate::ReadWriteLock::from_sides(self.read.inner, self.write.inner).reentrant();
        ReadWriteLock::new(inner, rt)
    }

    /// The read side.
    pub fn read(&self) -> Lock {
        self.read.clone()
    }

    /// The write side.
    pub fn write(&self) -> Lock {
        self.write.clone()
    }
}

/// A blocking [`crate::LockGuard`]: dropped without [`unlock`](LockGuard::unlock), it is
/// released in the background, on the client's runtime (the drop does not wait).
#[must_use = "dropping a guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct LockGuard {
    inner: Option<crate::LockGuard>,
    rt: Arc<Rt>,
}

impl LockGuard {
    fn guard(&self) -> &crate::LockGuard {
        self.inner.as_ref().unwrap_or_else(|| unreachable!("taken only by unlock, which consumes the guard"))
    }

    /// The fencing token of this grant ([`crate::LockGuard::token`]).
    pub fn token(&self) -> Option<u64> {
        self.guard().token()
    }

    /// The owner name it is held under ([`crate::LockGuard::owner`]).
    pub fn owner(&self) -> &str {
        self.guard().owner()
    }

    /// [`crate::LockGuard::hold_count`].
    pub fn hold_count(&self) -> Result<i64> {
        self.rt.block_on(self.guard().hold_count())?
    }

    /// Whether the lock was lost while held.
    pub fn is_lost(&self) -> bool {
        self.guard().is_lost()
    }

    /// A token cancelled when the lock is lost while held ([`crate::LockGuard::lost_token`]).
    pub fn lost_token(&self) -> CancellationToken {
        self.guard().lost_token()
    }

    /// Releases this hold ([`crate::LockGuard::unlock`]).
    pub fn unlock(mut self) -> Result<Unlocked> {
        match self.inner.take() {
            Some(g) => self.rt.block_on(g.unlock())?,
            None => unreachable!("a guard is unlocked once"),
        }
    }
}
