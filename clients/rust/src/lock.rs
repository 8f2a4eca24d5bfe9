//! The three kinds of lock: [`Lock`] (Redisson's `RLock`, and `RFencedLock` when fenced), the
//! fair lock (`RedissonFairLock`) and the two sides of a [`ReadWriteLock`] (`RReadWriteLock`).
//!
//! One lock object is one holder (one owner name, `<client uuid>:<n>`), as a thread is to
//! Redisson: acquiring it again re-enters it, and a clone is the same holder. Tasks that must
//! exclude each other take their own objects (`locks.lock(name)` is cheap).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{LockClient, FAIR_WAIT};
use crate::detach::detached;
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::holder::Holder;
use crate::kinds::{self, Kind};
use crate::lockref::{ms, LockRef};
use crate::reply;
use crate::transport::{CallError, Request};
use crate::watchdog;

/// A BLOCK grant cannot have happened earlier than this before its reply arrived (the reply
/// leaves the server at the grant): the local deadline is counted from then, or from the send
/// if that is later, so that it never falls after the server's expiry by more than this.
const GRANT_SLACK: Duration = Duration::from_millis(25);
/// New waits of one acquire after lost waits that the server settled as not granted (as the
/// Python and Node libraries).
const MAX_REWAITS: usize = 20;

/// When a wait ends (None: never).
fn wait_deadline(wait: Wait) -> Option<Instant> {
    match wait {
        Wait::Forever => None,
        Wait::For(d) => Some(Instant::now() + d),
    }
}

/// A distributed lock: reentrant ([`LockClient::lock`]), fair ([`LockClient::fair_lock`]), or
/// one side of a [`ReadWriteLock`]. Cheap to clone; a clone is the same holder.
///
/// ```
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
/// use redis_lockmod_client::LockClient;
///
/// let locks = LockClient::new(redis::Client::open(url)?)?;
/// let lock = locks.lock("orders");
/// let guard = lock.acquire().await?;       // waits in the server until granted
/// let again = lock.acquire().await?;       // the same holder re-enters it
/// assert_eq!(lock.hold_count().await?, 2);
/// again.unlock().await?;
/// guard.unlock().await?;
/// # locks.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Lock {
    client: LockClient,
    pub(crate) r: LockRef,
    lease: Option<Duration>,
    fenced: bool,
    wait: Duration,
}

/// A fair lock ([`LockClient::fair_lock`]): granted in arrival order. The same type as
/// [`Lock`]; the commands are `FAIRLOCK.*`.
pub type FairLock = Lock;

/// Redisson's `RReadWriteLock`: a read side shared with other readers and an exclusive write
/// side, on one name, for one holder (a writer may also read, and its last write release
/// downgrades it to a read hold).
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
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
    fn new_lock(&self, name: &str, kind: &'static Kind, holder: Option<Arc<Holder>>) -> Lock {
        let core = self.core().clone();
        let holder = holder.unwrap_or_else(|| Arc::new(Holder::new(core.next_owner())));
        Lock {
            client: self.clone(),
            r: LockRef { core, name: name.into(), kind, holder },
            lease: None,
            fenced: false,
            wait: FAIR_WAIT,
        }
    }

    /// A reentrant lock (Redisson's `RLock`): a new holder.
    pub fn lock(&self, name: &str) -> Lock {
        self.new_lock(name, &kinds::REENTRANT, None)
    }

    /// A fair lock (Redisson's `RedissonFairLock`): granted in arrival order; a new holder.
    pub fn fair_lock(&self, name: &str) -> FairLock {
        self.new_lock(name, &kinds::FAIR, None)
    }

    /// A read-write lock (Redisson's `RReadWriteLock`): its two sides share one new holder.
    pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
        let read = self.new_lock(name, &kinds::READ, None);
        let write = self.new_lock(name, &kinds::WRITE, Some(read.r.holder.clone()));
        ReadWriteLock { read, write }
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

    /// This object with another owner name (e.g. to re-enter a hold across objects, or to
    /// match one another process uses). A new holder: holds of the old name are not its own.
    pub fn with_owner(mut self, owner: &str) -> Self {
        self.r.holder = Arc::new(Holder::new(owner.to_string()));
        self
    }

    /// The lock's name (its key).
    pub fn name(&self) -> &str {
        &self.r.name
    }

    /// The owner name this object holds under: `<client uuid>:<n>`.
    pub fn owner(&self) -> &str {
        &self.r.holder.owner
    }

    /// The client this lock was made from.
    pub fn client(&self) -> &LockClient {
        &self.client
    }

    /// Takes (or re-enters) the lock, waiting in the server without limit (`BLOCK 0`).
    pub async fn acquire(&self) -> Result<LockGuard> {
        loop {
            if let Some(g) = self.acquire_with(Wait::Forever).await? {
                return Ok(g);
            }
        }
    }

    /// Takes (or re-enters) the lock, waiting in the server at most `timeout`; `Ok(None)` if it
    /// was not granted by then. `Duration::ZERO` tries once (a fair lock then queues nothing:
    /// Redisson's `tryLock()`).
    pub async fn try_acquire(&self, timeout: Duration) -> Result<Option<LockGuard>> {
        self.acquire_with(Wait::For(timeout)).await
    }

    fn check(&self) -> Result<()> {
        if self.r.name.is_empty() {
            return Err(Error::InvalidArgument("a lock name is a non-empty string".into()));
        }
        if self.fenced && !self.r.kind.fenceable {
            return Err(Error::InvalidArgument(format!("{} takes no fencing token", self.r.kind.acquire)));
        }
        if self.lease.is_some_and(|l| ms(l) == 0) || ms(self.wait) == 0 {
            return Err(Error::InvalidArgument("a lease and a fair wait are at least 1 ms".into()));
        }
        if self.r.core.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    async fn acquire_with(&self, wait: Wait) -> Result<Option<LockGuard>> {
        self.check()?;
        let lock = self.clone();
        detached(&self.r.core, move |cancel| async move { lock.acquire_task(wait, cancel).await }).await
    }

    async fn acquire_task(self, wait: Wait, cancel: tokio_util::sync::CancellationToken) -> Result<Option<LockGuard>> {
        let r = &self.r;
        let core = &r.core;
        let side = r.kind.side;
        if r.holder.pending_unlock() {
            // An earlier release ended without an outcome: start from the server's count.
            let (holds, _) = r.target().holds(false, "an earlier unlock's outcome is unknown").await?;
            r.holder.synced(side, holds);
        }
        let before = r.holder.count(side);
        let (block, timeout) = match wait {
            Wait::Forever => (Some(0), None),
            Wait::For(d) if ms(d) == 0 => (None, Some(core.command_timeout)),
            Wait::For(d) => (Some(ms(d)), Some(d + core.command_timeout)),
        };
        let lease = self.lease.unwrap_or(core.watchdog_lease);
        let give_up = wait_deadline(wait);
        let mut rewaits = 0;
        let (granted, token, synced, block, sent) = loop {
            let block = match (block, give_up) {
                // A request sent again waits only what is left of the caller's wait.
                (Some(b), Some(end)) if b > 0 => Some(ms(end.saturating_duration_since(Instant::now())).max(1)),
                _ => block,
            };
            let timeout = match (block, timeout) {
                (Some(b), Some(_)) if b > 0 => Some(Duration::from_millis(b) + core.command_timeout),
                _ => timeout,
            };
            let cmd = r.kind.acquire_cmd(&r.name, &r.holder.owner, ms(lease), ms(self.wait), block, self.fenced);
            let cmds = [cmd];
            let sent = Instant::now();
            let req = Request { key: &r.name, cmds: &cmds, timeout, cancel: Some(&cancel), sync: r.sync() };
            match core.transport.call(req).await {
                Ok(rep) => {
                    let (g, t) =
                        kinds::parse_acquire(rep.values.first().unwrap_or(&redis::Value::Int(0)), self.fenced)?;
                    break (g, t, rep.synced, block, sent);
                }
                Err(CallError::Failed(e)) => return Err(e),
                Err(CallError::Lost(lost)) => {
                    let (g, t) = r.target().settle_acquire(&lost, self.fenced, before).await?;
                    if g {
                        break (g, t, None, block, sent);
                    }
                    // A wait (BLOCK) lost (a failover, a broken connection) and settled as not
                    // granted is a new wait for what is left of its time, as in every library
                    // (docs/clients.md, "Sentinel"). Never a blind re-send: the barrier went
                    // first (best effort), and the owner's hold count said not granted.
                    let time_left = give_up.is_none_or(|end| Instant::now() < end);
                    if block.is_some() && time_left && !cancel.is_cancelled() && rewaits < MAX_REWAITS {
                        rewaits += 1;
                        tracing::warn!(
                            "redis-lockmod: {} {} for {}: its wait was lost and not granted: waiting again",
                            r.kind.acquire,
                            r.name,
                            r.holder.owner
                        );
                        continue;
                    }
                    let detail = format!("{} reply lost ({}); settled: not granted", r.kind.acquire, lost.cause);
                    return Err(Error::Redis(redis::RedisError::from((redis::ErrorKind::Io, "reply lost", detail))));
                }
            }
        };
        if !granted {
            return Ok(None);
        }
        let base = if block.is_some() { sent.max(Instant::now() - GRANT_SLACK) } else { sent };
        let (period, new) = r.holder.granted(side, lease, self.lease.is_none(), base);
        if new {
            core.spawn(watchdog::watch(r.clone(), period.clone()));
        }
        let guard = LockGuard::new(self.client.clone(), r.clone(), period, token);
        if let Err(e) = core.check_synced(r.kind.acquire, &r.name, synced) {
            // No replica has the grant: a failover could hand the lock to someone else. Given
            // back first (not waited for), as Redisson's handleNoSync.
            let _ = guard.give_back().await;
            return Err(e);
        }
        Ok(Some(guard))
    }

    /// This holder's hold count on this lock, from the server (`*.HOLDS`; Redisson's
    /// `getHoldCount`).
    pub async fn hold_count(&self) -> Result<i64> {
        let v = self
            .r
            .core
            .transport
            .read(&self.r.name, self.r.kind.holds_cmd(&self.r.name, &self.r.holder.owner), self.r.core.command_timeout)
            .await?;
        self.r.kind.parse_holds(&v)
    }

    /// Whether this holder holds it (Redisson's `isHeldByCurrentThread`).
    pub async fn is_held(&self) -> Result<bool> {
        Ok(self.hold_count().await? > 0)
    }

    /// Whether anyone holds it (a read or write side: in its mode).
    pub async fn is_locked(&self) -> Result<bool> {
        let v = self
            .r
            .core
            .transport
            .read(&self.r.name, self.r.kind.locked_cmd(&self.r.name), self.r.core.command_timeout)
            .await?;
        self.r.kind.parse_locked(&v)
    }

    /// The lock's remaining lease in ms (`PTTL`): -2 when free, -1 when it has no expiry.
    pub async fn remaining_ms(&self) -> Result<i64> {
        let v = self
            .r
            .core
            .transport
            .read(&self.r.name, redis::cmd("PTTL").arg(&*self.r.name).clone(), self.r.core.command_timeout)
            .await?;
        reply::int(&v)
    }

    /// Frees the lock whoever holds it (a read or write side: if in its mode); true if it was
    /// held. Guards of this holder then report [`Error::LockLost`].
    pub async fn force_unlock(&self) -> Result<bool> {
        let v = self
            .r
            .core
            .transport
            .once_synced(&self.r.name, self.r.kind.force_cmd(&self.r.name), self.r.core.command_timeout, self.r.sync())
            .await?;
        let freed = reply::int(&v.0)? == 1;
        if freed {
            if let Some(p) = self.r.holder.period() {
                self.r.holder.lose(&p);
            }
        }
        self.r.core.check_synced(self.r.kind.force, &self.r.name, v.1)?;
        Ok(freed)
    }
}
