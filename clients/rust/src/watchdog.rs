//! The watchdog: one task per client (started with its first hold). It renews every lock held
//! without a lease every `renew_interval` (`*.RENEW` with the watchdog lease, as Redisson), and
//! declares a lock lost when a renewal finds it gone or when its lease runs out on the
//! library's clock before it was renewed or released (a fixed lease that was too short, a
//! server unreachable for a whole lease). What it looks after, and when, is the client's
//! schedule (crate::schedule): no task per hold.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Core;
use crate::durations::{self, after, ms};
use crate::holder::Timing;
use crate::reply;
use crate::schedule::Watched;
use crate::transport::Request;

/// A failed renewal is tried again this soon (at most).
const RETRY: Duration = Duration::from_secs(1);

/// Follows `w`'s period (after a grant, a partial release, a renewal); starts the client's
/// watchdog task with its first hold.
pub(crate) fn watch(core: &Arc<Core>, w: Watched) {
    if core.schedule.update(w, &core.shutdown) {
        core.spawn(run(core.clone()));
    }
}

/// The watchdog task of a client: ends when the client shuts down.
async fn run(core: Arc<Core>) {
    loop {
        let now = Instant::now();
        for w in core.schedule.take_due(now) {
            look_at(&core, w, now);
        }
        let target = core.schedule.next_target(after(now, core.renew_interval));
        tokio::select! {
            _ = core.shutdown.cancelled() => break,
            _ = core.schedule.wake.notified() => {}
            _ = durations::sleep_until(target) => {}
        }
    }
    // Holds still there are not renewed any more: they free themselves at their lease's end.
    core.schedule.clear();
}

/// A period whose due moment came: lost if its deadline passed, renewed if its renewal is due.
fn look_at(core: &Arc<Core>, w: Watched, now: Instant) {
    let Timing { deadline, renew_at } = w.holder.timing();
    if !w.holder.is_current(&w.period) {
        core.schedule.remove(w.period.id);
    } else if deadline.is_some_and(|d| d <= now) {
        if w.lose(&core.schedule) {
            tracing::warn!("redis-lockmod: the lease of lock {} ran out before it was renewed or released", w.name);
        }
    } else if renew_at.is_some_and(|at| at <= now) {
        core.spawn(renew(core.clone(), w));
    } else {
        watch(core, w);
    }
}

/// One renewal (`*.RENEW` with the watchdog lease); then the period is scheduled again.
async fn renew(core: Arc<Core>, w: Watched) {
    let sent = Instant::now();
    let cmds = [w.kind.renew_cmd(&w.name, &w.holder.owner, ms(core.watchdog_lease))];
    let req =
        Request { key: &w.name, cmds: &cmds, timeout: Some(core.command_timeout), cancel: None, sync: core.sync() };
    match core.transport.call(req).await {
        Ok(rep) if rep.values.first().and_then(|v| reply::int(v).ok()) == Some(1) => {
            let next = after(Instant::now(), core.renew_interval).unwrap_or(sent);
            w.holder.renewed(&w.period, core.watchdog_lease, sent, next);
            if let Some(s) = rep.synced.filter(|s| s.acked == 0) {
                tracing::warn!(
                    "redis-lockmod: renewal of {}: none of {} replica(s) acknowledged it",
                    w.name,
                    s.expected
                );
            }
        }
        Ok(_) => {
            if w.lose(&core.schedule) {
                tracing::warn!(
                    "redis-lockmod: lock {} is no longer held by {} (a renewal found it gone)",
                    w.name,
                    w.holder.owner
                );
            }
            return;
        }
        Err(e) => {
            // The deadline declares the loss if the lease runs out meanwhile.
            tracing::warn!("redis-lockmod: renewing {} failed: {e:?}", w.name);
            let next = after(Instant::now(), core.renew_interval.min(RETRY)).unwrap_or(sent);
            w.holder.renew_again_at(&w.period, next);
        }
    }
    watch(&core, w);
}
