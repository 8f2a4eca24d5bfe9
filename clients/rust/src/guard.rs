//! [`LockGuard`]: one hold of a lock. `guard.unlock().await` releases it and reports the
//! outcome; a guard dropped without it is released in the background.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::client::LockClient;
use crate::detach::GiveBack;
use crate::durations::ms;
use crate::error::{Error, Result};
use crate::holder::Period;
use crate::lockref::LockRef;
use crate::settle;
use crate::{names, reply};

/// What an unlock did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlocked {
    /// That was this holder's last hold on this side of the lock: the lock is free (unless the
    /// holder also holds the other side of a read-write lock).
    Last,
    /// The holder still holds it (reentrant holds remain); the lease was set again.
    HoldsLeft,
}

/// One hold of a lock, returned by a grant.
///
/// Release it with [`unlock`](LockGuard::unlock), which reports the outcome: a lock lost while
/// held is [`Error::LockLost`], so the code learns that what it protected may have been changed
/// by someone else. A guard dropped without `unlock` (an early return, `?`, a panic) is
/// released in the background: `Drop` never blocks, it hands the release to a task of the
/// client. That costs a little: the lock stays held until that task's unlock reaches the
/// server (one round trip after the drop, plus the task's scheduling), nobody learns whether
/// it was lost (a failure is only logged, with `tracing`), and if the runtime shuts down first
/// the release is never sent: the lock then frees itself at the end of its lease (the watchdog
/// stops with the runtime). [`LockClient::close`](crate::LockClient::close) waits for those
/// releases. The client's next request on the lock waits for that release first.
///
/// A guard is `Send + Sync + 'static`: it can move into a spawned task (it keeps the client
/// alive), as tokio's `OwnedMutexGuard`.
#[must_use = "dropping a guard releases the lock at once (in the background)"]
#[derive(Debug)]
pub struct LockGuard {
    /// Keeps the client (and so the watchdog) alive while the hold is.
    _client: LockClient,
    r: LockRef,
    period: Arc<Period>,
    token: Option<u64>,
    done: bool,
}

impl LockGuard {
    pub(crate) fn new(client: LockClient, r: LockRef, period: Arc<Period>, token: Option<u64>) -> LockGuard {
        LockGuard { _client: client, r, period, token, done: false }
    }

    /// The fencing token of this grant (fenced locks: [`Lock::fenced`](crate::Lock::fenced)). Pass it with every
    /// write to the protected resource, which refuses tokens below the highest it has seen.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The name of the lock this guard holds.
    pub fn name(&self) -> &str {
        &self.r.name
    }

    /// The owner name it is held under (`<client uuid>:<n>`): a new one per acquire, unless
    /// the lock was made [`reentrant`](crate::Lock::reentrant) or given an owner.
    pub fn owner(&self) -> &str {
        &self.r.holder.owner
    }

    /// Whether the lock was lost while held (a renewal found it gone, the lease ran out, a
    /// force unlock).
    pub fn is_lost(&self) -> bool {
        self.period.lost.is_cancelled()
    }

    /// A future that completes when the lock is lost while held (never, if it is released
    /// first): `select!` on it to stop work the lock no longer protects.
    pub fn lost(&self) -> WaitForCancellationFutureOwned {
        self.period.lost.clone().cancelled_owned()
    }

    /// A token cancelled when the lock is lost while held, to hand to code that takes a
    /// `CancellationToken` (as Node's `AbortSignal`). Cancelling it yourself affects nothing else.
    pub fn lost_token(&self) -> CancellationToken {
        self.period.lost.child_token()
    }

    /// The holds of this guard's owner on its side of the lock, from the server (`*.HOLDS`):
    /// 1 while this guard holds it (more when a reentrant owner holds it again), 0 once it was
    /// lost.
    pub async fn hold_count(&self) -> Result<i64> {
        let r = &self.r;
        let v =
            r.core.transport.read(&r.name, r.kind.holds_cmd(&r.name, &r.holder.owner), r.core.command_timeout).await?;
        r.kind.parse_holds(&v)
    }

    /// Releases this hold. `Err(LockLost)` if the lock was lost while held (nothing is sent:
    /// the loss released it). If the outcome cannot be learned (the server unreachable for the
    /// client's `resolve_timeout`), [`Error::StateUnknown`]: the hold is not renewed any more
    /// and frees itself within its lease. Dropping this future does not stop the release: the
    /// same latched request is sent again in the background (answered, not applied twice),
    /// before the client's next request on the lock.
    pub async fn unlock(mut self) -> Result<Unlocked> {
        self.done = true;
        let unlock = Unlock::new(self.r.clone(), self.period.clone())?;
        let mut resume = Resume(Some(unlock.clone()));
        let out = unlock.send().await;
        resume.0 = None;
        out
    }

    /// Gives back a grant (one no replica acknowledged, or one nobody received): an unlock
    /// with a new `LATCH` id for this one hold, not synced.
    pub(crate) async fn return_grant(mut self) -> Result<Unlocked> {
        self.done = true;
        let mut unlock = Unlock::new(self.r.clone(), self.period.clone())?;
        unlock.sync = None;
        let mut resume = Resume(Some(unlock.clone()));
        let out = unlock.send().await;
        resume.0 = None;
        out
    }
}

/// A grant that nobody received (its acquire was cancelled): given back, as a settle.
impl GiveBack for LockGuard {
    async fn give_back(self) {
        let name = self.r.name.clone();
        tracing::info!("redis-lockmod: lock {name} granted to a cancelled acquire: giving it back");
        if let Err(e) = self.return_grant().await {
            tracing::warn!("redis-lockmod: giving back lock {name} granted to a cancelled acquire: {e}");
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let r = self.r.clone();
        let period = self.period.clone();
        // Before `drop` returns: the client's next request on the lock waits for the release.
        let settling = r.core.transport.settles.begin(&r.name);
        r.core.clone().spawn(settle::as_settle(async move {
            let _settling = settling;
            let name = r.name.clone();
            match release(r, period).await {
                Ok(_) => {}
                Err(Error::LockLost { .. }) => {
                    tracing::warn!("redis-lockmod: lock {name} was lost before its guard was dropped")
                }
                Err(e) => tracing::warn!("redis-lockmod: releasing the dropped guard of {name} failed: {e}"),
            }
        }));
    }
}

/// An unlock ready to go: its latched request is made once, so that a copy sent again is
/// answered by the latch instead of releasing a second hold.
#[derive(Clone)]
struct Unlock {
    r: LockRef,
    period: Arc<Period>,
    cmd: redis::Cmd,
    /// The latch's key; `None` once the request may have gone out before (its latch must
    /// outlive every copy, so it is not deleted).
    latch: Option<String>,
    before: i64,
    /// Wait for the replicas (not when giving back a grant none of them had).
    sync: Option<std::time::Duration>,
}

/// Sends the same unlock again in the background if the future that sent it is dropped first,
/// as a settle of the lock.
struct Resume(Option<Unlock>);

impl Drop for Resume {
    fn drop(&mut self) {
        if let Some(mut u) = self.0.take() {
            // The dropped send may still reach the server: the latch must stay.
            u.latch = None;
            let core = u.r.core.clone();
            let settling = core.transport.settles.begin(&u.r.name);
            core.spawn(settle::as_settle(async move {
                let _settling = settling;
                let name = u.r.name.clone();
                if let Err(e) = u.send().await {
                    tracing::warn!("redis-lockmod: the interrupted unlock of {name}: {e}");
                }
            }));
        }
    }
}

impl Unlock {
    fn new(r: LockRef, period: Arc<Period>) -> Result<Unlock> {
        let holder = &r.holder;
        if period.lost.is_cancelled() || !holder.is_current(&period) {
            return Err(Error::lost(&r.name));
        }
        let before = holder.count(r.kind.side);
        let id = r.core.next_request_id();
        let cmd = r.kind.unlock_cmd(&r.name, &holder.owner, ms(holder.lease()), &id, ms(r.core.latch));
        let latch = Some(names::unlock_latch_key(&r.name, &id));
        let sync = r.sync();
        Ok(Unlock { r, period, cmd, latch, before, sync })
    }

    async fn send(self) -> Result<Unlocked> {
        let Unlock { r, period, cmd, latch, before, sync } = self;
        let holder = &r.holder;
        let side = r.kind.side;
        let sent = Instant::now();
        let out = r.target().release(cmd, latch, sync, before).await;
        if let Ok((redis::Value::Nil, _)) = out {
            r.lose(&period);
            return Err(Error::lost(&r.name));
        }
        // Whatever happened, this hold is not renewed any more: if it is still there (the
        // outcome unknown), its lease frees it, and the next acquire reads the count back.
        if holder.released(side, sent) {
            r.core.schedule.remove(period.id);
        } else {
            r.watch(&period);
        }
        match out {
            Ok((v, synced)) => {
                let last = reply::int(&v)? == 1;
                r.core.check_synced(r.kind.unlock, &r.name, synced)?;
                Ok(if last { Unlocked::Last } else { Unlocked::HoldsLeft })
            }
            Err(e) => {
                if matches!(e, Error::StateUnknown { .. }) {
                    holder.set_pending_unlock();
                }
                Err(e)
            }
        }
    }
}

/// Gives back one hold of `period` (a dropped guard's).
pub(crate) async fn release(r: LockRef, period: Arc<Period>) -> Result<Unlocked> {
    Unlock::new(r, period)?.send().await
}
