//! What each of the module's timers does when it fires. Each runs work the module starts on
//! its own, outside any client's command, so each first asks the write gate
//! ([`paused::gate`]) and leaves its work waiting while the server forbids writes.

use super::paused::{self, Gate};
use std::ffi::CStr;

use super::registry::with;
use super::serve::serve;
use super::waiter::{LockId, TimerData};
use super::{fair, give_back, poll, reclaim};
use crate::ffi::timers::Timer;
use crate::ffi::Ctx;

impl Timer for TimerData {
    fn latency_event(&self) -> &'static CStr {
        match self {
            TimerData::FairCancels => c"lockmod-fair-cancels",
            TimerData::FairTick => c"lockmod-fair-tick",
            TimerData::Poll => c"lockmod-poll",
            TimerData::Reclaim { .. } | TimerData::ReclaimFind => c"lockmod-reclaim",
            TimerData::GiveBack => c"lockmod-give-back",
            _ => c"lockmod-timer",
        }
    }

    fn fire(self, ctx: &Ctx) {
        on_timer(ctx, self);
    }
}

/// A timer armed with `data` fired.
fn on_timer(ctx: &Ctx, data: TimerData) {
    // The timer fired: forget it. A lock whose lease ended joins `pending`, where it waits if
    // the module may not write now.
    match &data {
        TimerData::Pending => {
            with(|r| r.pending_timer = None);
        }
        TimerData::Expiry { db, key } => {
            with(|r| {
                let id = (*db, key.clone());
                r.expiry_timers.remove(&id);
                if !r.pending.contains(&id) {
                    r.pending.push(id);
                }
            });
        }
        TimerData::FairTick => {
            with(|r| r.fair_tick = None);
        }
        TimerData::FairCancels => {}
        TimerData::Poll => poll::fired(),
        TimerData::Resume => paused::polled(),
        TimerData::Reclaim { db, key } => reclaim::fired(&(*db, key.clone())),
        TimerData::ReclaimFind => reclaim::find::fired(),
        TimerData::GiveBack => give_back::fired(),
    }
    match paused::gate(ctx) {
        Gate::Open => {}
        Gate::Later => return,
        Gate::Never => {
            with(|r| r.pending.clear());
            fair::waiters::forget_cancels();
            poll::clear();
            reclaim::clear();
            reclaim::find::clear();
            give_back::clear();
            return;
        }
    }
    match data {
        TimerData::Pending | TimerData::Expiry { .. } => serve_pending(ctx),
        TimerData::FairTick => fair::waiters::tick(ctx),
        TimerData::FairCancels => fair::waiters::run_cancels(ctx),
        TimerData::Poll => poll::tick(ctx, serve),
        TimerData::Reclaim { .. } => reclaim::run_due(ctx, serve),
        TimerData::ReclaimFind => reclaim::find::tick(ctx),
        TimerData::GiveBack => give_back::run(ctx),
        // Keep-alive first: a parked fair waiter's deadline may have passed during the pause,
        // and serving its lock would purge it.
        TimerData::Resume => {
            fair::waiters::tick_now(ctx);
            fair::waiters::run_cancels(ctx);
            give_back::run(ctx);
            serve_pending(ctx);
            reclaim::run_due(ctx, serve);
            reclaim::find::resume(ctx);
            poll::resume(ctx);
        }
    }
}

/// Serves every lock in `pending`.
fn serve_pending(ctx: &Ctx) {
    let due: Vec<LockId> = with(|r| std::mem::take(&mut r.pending)).unwrap_or_default();
    for id in due {
        if ctx.select_db(id.0) {
            serve(ctx, &id);
        }
    }
}
