//! [`LockGuard`]: one hold of a lock. `guard.unlock().await` releases it and reports the
//! outcome; a guard dropped without it is released in the background.

use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::holder::Period;
use crate::lockref::{ms, LockRef};
use crate::reply;

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
/// releases.
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

    /// The owner name it is held under (`<client uuid>:<n>`).
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

    /// Releases this hold. `Err(LockLost)` if the lock was lost while held (nothing is sent:
    /// the loss released it). If the outcome cannot be learned (the server unreachable for the
    /// client's `resolve_timeout`), [`Error::StateUnknown`]: the hold is not renewed any more
    /// and frees itself within its lease. Dropping this future does not stop the release: the
    /// same latched request is sent again in the background (answered, not applied twice).
    pub async fn unlock(mut self) -> Result<Unlocked> {
        self.done = true;
        let unlock = match Unlock::new(self.r.clone(), self.period.clone()) {
            Ok(u) => u,
            Err(e) => return Err(e),
        };
        let mut resume = Resume(Some(unlock.clone()));
        let out = unlock.send().await;
        resume.0 = None;
        out
    }
}

impl LockGuard {
    /// Gives back a grant no replica acknowledged: an unlock with a new `LATCH` id for this one
    /// hold, not waited for.
    pub(crate) async fn give_back(mut self) -> Result<Unlocked> {
        self.done = true;
        let mut unlock = Unlock::new(self.r.clone(), self.period.clone())?;
        unlock.sync = None;
        unlock.send().await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let r = self.r.clone();
        let period = self.period.clone();
        r.core.clone().spawn(async move {
            let name = r.name.clone();
            match release(r, period).await {
                Ok(_) => {}
                Err(Error::LockLost { .. }) => {
                    tracing::warn!("redis-lockmod: lock {name} was lost before its guard was dropped")
                }
                Err(e) => tracing::warn!("redis-lockmod: releasing the dropped guard of {name} failed: {e}"),
            }
        });
    }
}

/// An unlock ready to go: its latched request is made once, so that a copy sent again is
/// answered by the latch instead of releasing a second hold.
#[derive(Clone)]
struct Unlock {
    r: LockRef,
    period: Arc<Period>,
    cmd: redis::Cmd,
    before: i64,
    /// Wait for the replicas (not when giving back a grant none of them had).
    sync: Option<std::time::Duration>,
}

/// Sends the same unlock again in the background if the future that sent it is dropped first.
struct Resume(Option<Unlock>);

impl Drop for Resume {
    fn drop(&mut self) {
        if let Some(u) = self.0.take() {
            let core = u.r.core.clone();
            core.spawn(async move {
                let name = u.r.name.clone();
                if let Err(e) = u.send().await {
                    tracing::warn!("redis-lockmod: the interrupted unlock of {name}: {e}");
                }
            });
        }
    }
}

impl Unlock {
    fn new(r: LockRef, period: Arc<Period>) -> Result<Unlock> {
        let holder = &r.holder;
        if period.lost.is_cancelled() || holder.period().map(|p| p.id) != Some(period.id) {
            return Err(Error::lost(&r.name));
        }
        let before = holder.count(r.kind.side);
        let cmd =
            r.kind.unlock_cmd(&r.name, &holder.owner, ms(holder.lease()), &r.core.next_request_id(), ms(r.core.latch));
        let sync = r.sync();
        Ok(Unlock { r, period, cmd, before, sync })
    }

    async fn send(self) -> Result<Unlocked> {
        let Unlock { r, period, cmd, before, sync } = self;
        let holder = &r.holder;
        let side = r.kind.side;
        let sent = Instant::now();
        match r.target().release(cmd, sync, before).await {
            Ok((redis::Value::Nil, _)) => {
                holder.lose(&period);
                Err(Error::lost(&r.name))
            }
            Ok((v, synced)) => {
                holder.released(side, sent);
                let last = reply::int(&v)? == 1;
                r.core.check_synced(r.kind.unlock, &r.name, synced)?;
                Ok(if last { Unlocked::Last } else { Unlocked::HoldsLeft })
            }
            Err(e) => {
                // Whatever happened, stop renewing this hold: if it is still there, its lease
                // frees it. The next acquire reads the count back first.
                holder.released(side, sent);
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
