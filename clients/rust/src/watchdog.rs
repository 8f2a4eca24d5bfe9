//! The watchdog: one task per holding period. It renews a lock held without a lease every
//! `renew_interval` (`*.RENEW` with the watchdog lease, as Redisson), and declares the lock lost
//! when a renewal finds it gone or when its lease runs out on the library's clock before it was
//! renewed or released (a fixed lease that was too short, a server unreachable for a whole
//! lease). It ends with the period, or when the client shuts down.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::holder::Period;
use crate::lockref::{ms, LockRef};
use crate::reply;
use crate::transport::Request;

/// A failed renewal is tried again this soon (at most).
const RETRY: Duration = Duration::from_secs(1);

pub(crate) async fn watch(r: LockRef, period: Arc<Period>) {
    let core = r.core.clone();
    let holder = r.holder.clone();
    let mut next_renew = Instant::now() + core.renew_interval;
    loop {
        let (deadline, watchdog) = holder.schedule();
        let until_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = period.ended.cancelled() => return,
            _ = core.shutdown.cancelled() => return,
            _ = holder.wake.notified() => continue,
            _ = until_deadline => {
                if holder.lose(&period) {
                    tracing::warn!("redis-lockmod: the lease of lock {} ran out before it was renewed or released", r.name);
                }
                return;
            }
            _ = tokio::time::sleep_until(next_renew), if watchdog => {
                let sent = Instant::now();
                let cmds = [r.kind.renew_cmd(&r.name, &holder.owner, ms(core.watchdog_lease))];
                let req = Request { key: &r.name, cmds: &cmds, timeout: Some(core.command_timeout), cancel: None, sync: r.sync() };
                match core.transport.call(req).await {
                    Ok(rep) if rep.values.first().and_then(|v| reply::int(v).ok()) == Some(1) => {
                        holder.renewed(&period, core.watchdog_lease, sent);
                        if let Some(s) = rep.synced.filter(|s| s.acked == 0) {
                            tracing::warn!("redis-lockmod: renewal of {}: none of {} replica(s) acknowledged it", r.name, s.expected);
                        }
                        next_renew = sent + core.renew_interval;
                    }
                    Ok(_) => {
                        if holder.lose(&period) {
                            tracing::warn!("redis-lockmod: lock {} is no longer held by {} (a renewal found it gone)", r.name, holder.owner);
                        }
                        return;
                    }
                    Err(e) => {
                        // The deadline declares the loss if the lease runs out meanwhile.
                        tracing::warn!("redis-lockmod: renewing {} failed: {e:?}", r.name);
                        next_renew = Instant::now() + core.renew_interval.min(RETRY);
                    }
                }
            }
        }
    }
}
