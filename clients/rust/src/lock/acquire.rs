//! A lock's acquire, as every library of this repository does it (docs/clients.md): sent once
//! (with `BLOCK` to wait in the server); a lost reply settled by asking the server
//! (crate::protocol), and a lost wait settled as not granted waited again for the time left;
//! a grant recorded in its holder and scheduled for the watchdog, and given back when no
//! replica acknowledged it.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Lock, Wait};
use crate::durations::{self, after, ms};
use crate::error::{Error, Result};
use crate::guard::LockGuard;
use crate::kinds;
use crate::lockref::LockRef;
use crate::transport::{CallError, Request};

/// A BLOCK grant cannot have happened earlier than this before its reply arrived (the reply
/// leaves the server at the grant): the local deadline is counted from then, or from the send
/// if that is later, so that it never falls after the server's expiry by more than this.
const GRANT_SLACK: Duration = Duration::from_millis(25);
/// New waits of one acquire after lost waits that the server settled as not granted (as the
/// Python and Node libraries).
const MAX_REWAITS: usize = 20;

/// When a wait ends (None: never, or too far for an `Instant`).
fn wait_deadline(wait: Wait) -> Option<Instant> {
    match wait {
        Wait::Forever => None,
        Wait::For(d) => durations::from_now(d),
    }
}

impl Lock {
    pub(super) async fn acquire_task(
        self,
        r: LockRef,
        wait: Wait,
        cancel: CancellationToken,
    ) -> Result<Option<LockGuard>> {
        let r = &r;
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
            Wait::For(d) => (Some(ms(d)), Some(d.saturating_add(core.command_timeout))),
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
                (Some(b), Some(_)) if b > 0 => Some(Duration::from_millis(b).saturating_add(core.command_timeout)),
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
        let now = Instant::now();
        let base = if block.is_some() { sent.max(now.checked_sub(GRANT_SLACK).unwrap_or(sent)) } else { sent };
        // The watchdog renews a hold taken without a lease, first one interval from now.
        let renew_at = self.lease.is_none().then(|| after(now, core.renew_interval)).flatten();
        let watchdog = if self.lease.is_none() { Some(renew_at.unwrap_or(now)) } else { None };
        let (period, _) = r.holder.granted(side, lease, watchdog, base);
        r.watch(&period);
        let guard = LockGuard::new(self.client.clone(), r.clone(), period, token);
        if let Err(e) = core.check_synced(r.kind.acquire, &r.name, synced) {
            // No replica has the grant: a failover could hand the lock to someone else. Given
            // back first (not waited for), as Redisson's handleNoSync.
            let _ = guard.return_grant().await;
            return Err(e);
        }
        Ok(Some(guard))
    }
}
