//! The three kinds of lock: [`Lock`] (Redisson's `RLock`, and `RFencedLock` when fenced), the
//! fair lock (`RedissonFairLock`) and the two sides of a [`ReadWriteLock`] (`RReadWriteLock`).
//!
//! The guard is the hold, as in `tokio::sync`: every acquire takes a new owner name
//! (`<client uuid>:<n>`), so tasks that share one lock object (clones, an `Arc`) exclude each
//! other. Redisson's reentrance, one owner for many acquires as a thread is to Redisson, is a
//! choice: [`Lock::reentrant`] (or [`Lock::with_owner`]) makes a lock object one holder.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{LockClient, FAIR_WAIT};
use crate::detach::detached;
use crate::durations::{self, ms};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holder::Holder;
use crate::kinds::{self, Kind};
use crate::lockref::LockRef;
use crate::reply;

mod acquire;

/// A distributed lock (Redisson's `RLock`, [`LockClient::lock`]), a fair one
/// ([`LockClient::fair_lock`]), or one side of a [`ReadWriteLock`]. Cheap to clone.
///
/// The guard is the hold: each acquire takes the lock under a new owner name, so tasks sharing
/// one `Lock` (clones, an `Arc<Lock>`) exclude each other, as with `Arc<tokio::sync::Mutex>`.
/// Redisson's reentrance (one owner that may take the lock again while it holds it) is
/// [`reentrant`](Lock::reentrant).
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// use std::sync::Arc;
/// use std::time::Duration;
/// use redis_lockmod_client::LockClient;
///
/// let locks = LockClient::new(redis::Client::open(url)?)?;
/// let lock = Arc::new(locks.lock("orders"));
/// let guard = lock.acquire().await?;                   // waits in the server until granted
/// let other = tokio::spawn({
///     let lock = lock.clone();
///     async move { lock.try_acquire(Duration::ZERO).await.map(|g| g.is_some()) }
/// });
/// assert!(!other.await??, "another task sharing the lock is refused");
/// guard.unlock().await?;
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    client: LockClient,
    name: Arc<str>,
    kind: &'static Kind,
    /// The one holder of a reentrant lock object; `None`: a new one per acquire.
    holder: Option<Arc<Holder>>,
    lease: Option<Duration>,
    fenced: bool,
    wait: Duration,
}

/// A fair lock ([`LockClient::fair_lock`]): granted in arrival order. The same type as
/// [`Lock`]; the commands are `FAIRLOCK.*`.
pub type FairLock = Lock;

/// Redisson's `RReadWriteLock`: a read side shared with other readers and an exclusive write
/// side, on one name. Each acquire is its own holder (a writer excludes every reader, those of
/// its own task too, as tokio's `RwLock`); [`reentrant`](ReadWriteLock::reentrant) makes the
/// two sides one holder, as Redisson's (a writer may also read, and its last write release
/// downgrades it to a read hold).
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    /// The lock of these two sides (the blocking API's).
    pub(crate) fn from_sides(read: Lock, write: Lock) -> ReadWriteLock {
        ReadWriteLock { read, write }
    }

    /// Both sides as one holder, Redisson's: every acquire of either side (of this object and
    /// its clones) is under one owner name, so it re-enters what that owner holds; a writer may
    /// also read, and its last write release leaves its read holds (a downgrade).
    pub fn reentrant(self) -> Self {
        let holder = Arc::new(Holder::new(self.read.client.core().next_owner()));
        ReadWriteLock {
            read: Lock { holder: Some(holder.clone()), ..self.read },
            write: Lock { holder: Some(holder), ..self.write },
        }
    }

    /// The read side.
    pub fn read(&self) -> Lock {
        self.read.clone()
    }

    /// The write side (fencing tokens available: [`Lock::fenced`]).
    pub fn write(&self) -> Lock {
        self.write.clone()
    }

    /// Both sides with this fixed lease ([`Lock::with_lease`]).
    pub fn with_lease(self, lease: Duration) -> Self {
        ReadWriteLock { read: self.read.with_lease(lease), write: self.write.with_lease(lease) }
    }
}

impl LockClient {
    fn new_lock(&self, name: &str, kind: &'static Kind) -> Lock {
        Lock {
            client: self.clone(),
            name: name.into(),
            kind,
            holder: None,
            lease: None,
            fenced: false,
            wait: FAIR_WAIT,
        }
    }

    /// A lock (Redisson's `RLock`); each acquire is a holder of its own
    /// ([`Lock::reentrant`] for Redisson's reentrance).
    pub fn lock(&self, name: &str) -> Lock {
        self.new_lock(name, &kinds::REENTRANT)
    }

    /// A fair lock (Redisson's `RedissonFairLock`): granted in arrival order; each acquire is a
    /// holder of its own.
    pub fn fair_lock(&self, name: &str) -> FairLock {
        self.new_lock(name, &kinds::FAIR)
    }

    /// A read-write lock (Redisson's `RReadWriteLock`); each acquire of either side is a holder
    /// of its own ([`ReadWriteLock::reentrant`]: the two sides one holder, as Redisson's).
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock { read: self.new_lock(name, &kinds::READ), write: self.new_lock(name, &kinds::WRITE) }
    }
}

/// How long an acquire waits.
#[derive(Debug, Clone, Copy)]
enum Wait {
    Forever,
    For(Duration),
}

impl Lock {
    /// Every grant of this lock object frees itself `lease` after it unless released; no
    /// watchdog renews it. Without a lease (the default) the watchdog keeps the lock while it
    /// is held.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Every grant takes the next fencing token of the lock name's counter
    /// ([`LockGuard::token`]): Redisson's `RFencedLock`. Not for a read lock (its acquire then
    /// fails with [`Error::InvalidArgument`]).
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// The fair lock's wait (Redisson's `threadWaitTime`, 5 minutes): how long a queued waiter
    /// that polls may go silent before it loses its place. Waits parked with `BLOCK` are kept
    /// alive by the server; use the same value as every Redisson client of the lock.
    pub fn with_fair_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Redisson's reentrance, chosen: this object (and its clones) becomes one holder, one
    /// owner name (`<client uuid>:<n>`) for every acquire, as a thread is to Redisson. Acquiring
    /// it while it holds the lock re-enters it at once (a hold count, each hold a guard of its
    /// own); so tasks sharing it do **not** exclude each other: give each task its own.
    pub fn reentrant(mut self) -> Self {
        self.holder = Some(Arc::new(Holder::new(self.client.core().next_owner())));
        self
    }

    /// This object as the one holder `owner` (to share a hold with another process or a
    /// Redisson thread that uses that name): reentrant, as [`reentrant`](Lock::reentrant).
    pub fn with_owner(mut self, owner: &str) -> Self {
        self.holder = Some(Arc::new(Holder::new(owner.to_string())));
        self
    }

    /// The lock's name (its key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner name of a reentrant lock object (`<client uuid>:<n>`, or the one given);
    /// `None` for a lock whose every acquire takes a new one (see [`LockGuard::owner`]).
    pub fn owner(&self) -> Option<&str> {
        self.holder.as_ref().map(|h| h.owner.as_str())
    }

    /// The client this lock was made from.
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// Takes the lock (a reentrant lock object: or re-enters it), waiting in the server without
    /// limit (`BLOCK 0`). Dropping this future ends the wait in the server; a grant that raced
    /// the drop is given back before the client's next request on the lock.
    pub async fn acquire(&self) -> Result<LockGuard> {
        loop {
            if let Some(g) = self.acquire_with(Wait::Forever).await? {
                return Ok(g);
            }
        }
    }

    /// Takes the lock (a reentrant lock object: or re-enters it), waiting in the server at most
    /// `timeout`; `Ok(None)` if it was not granted by then. `Duration::ZERO` tries once (a fair
    /// lock then queues nothing: Redisson's `tryLock()`); a timeout longer than the server can
    /// express (2^62 ms, `Duration::MAX`) waits without limit.
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        let wait = if durations::unlimited(timeout) { Wait::Forever } else { Wait::For(timeout) };
        self.acquire_with(wait).await
    }

    fn check(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidArgument("a lock name is a non-empty string".into()));
        }
        if self.fenced && !self.kind.fenceable {
            return Err(Error::InvalidArgument(format!("{} takes no fencing token", self.kind.acquire)));
        }
        if self.lease.is_some_and(|l| ms(l) == 0) || ms(self.wait) == 0 {
            return Err(Error::InvalidArgument("a lease and a fair wait are at least 1 ms".into()));
        }
        if self.client.core().shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The holder of the next acquire: this object's, or a new one.
    fn lock_ref(&self) -> LockRef {
        let core = self.client.core().clone();
        let holder = self.holder.clone().unwrap_or_else(|| Arc::new(Holder::new(core.next_owner())));
        LockRef { core, name: self.name.clone(), kind: self.kind, holder }
    }

    /// The holder of a reentrant lock object, or the error that says there is none.
    fn own_holder(&self) -> Result<&Arc<Holder>> {
        self.holder.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "lock {:?} has no owner of its own (each acquire takes a new one): ask its guard \
                 (LockGuard::hold_count), or make it reentrant()",
                &*self.name
            ))
        })
    }

    async fn acquire_with(&self, wait: Wait) -> Result<Option<LockGuard>> {
        self.check()?;
        let lock = self.clone();
        let r = self.lock_ref();
        let core = r.core.clone();
        detached(&core, &self.name, move |cancel| async move { lock.acquire_task(r, wait, cancel).await }).await
    }

    /// The hold count of this reentrant lock object's owner, from the server (`*.HOLDS`;
    /// Redisson's `getHoldCount`). A lock whose every acquire takes a new owner has none of its
    /// own: [`Error::InvalidArgument`] (ask a guard: [`LockGuard::hold_count`]).
    pub async fn hold_count(&self) -> Result<i64> {
        let holder = self.own_holder()?;
        let core = self.client.core();
        let v = core
            .transport
            .read(&self.name, self.kind.holds_cmd(&self.name, &holder.owner), core.command_timeout)
            .await?;
        self.kind.parse_holds(&v)
    }

    /// Whether this reentrant lock object's owner holds it (Redisson's
    /// `isHeldByCurrentThread`); as [`hold_count`](Lock::hold_count).
    pub async fn is_held(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// Whether anyone holds it (a read or write side: in its mode).
    pub async fn is_locked(&self) -> Result<bool> {
        let core = self.client.core();
        let v = core.transport.read(&self.name, self.kind.locked_cmd(&self.name), core.command_timeout).await?;
        self.kind.parse_locked(&v)
    }

    /// The lock's remaining lease in ms (`PTTL`): -2 when free, -1 when it has no expiry.
    pub async fn remaining_ms(&self) -> Result<i64> {
        let core = self.client.core();
        let v =
            core.transport.read(&self.name, redis::cmd("PTTL").arg(&*self.name).clone(), core.command_timeout).await?;
        reply::int(&v)
    }

    /// Frees the lock whoever holds it (a read or write side: if in its mode); true if it was
    /// held. Guards of this client on the holds it freed then report [`Error::LockLost`].
    pub async fn force_unlock(&self) -> Result<bool> {
        let core = self.client.core();
        let v = core
            .transport
            .once_synced(&self.name, self.kind.force_cmd(&self.name), core.command_timeout, core.sync())
            .await?;
        let freed = reply::int(&v.0)? == 1;
        if freed {
            let side = self.kind.side;
            core.schedule.lose_all(&self.name, |h| side == kinds::Side::Main || h.count(side) > 0);
        }
        core.check_synced(self.kind.force, &self.name, v.1)?;
        Ok(freed)
    }
}
