//! The wake-up path's entry points, as the C callbacks under `src/ffi` see them: function
//! pointers its owner registers once at load (`register` in src/blocking/callbacks.rs). The
//! callbacks (keyspace and server events in `super::events`, the command filter in
//! `super::watch_filter`, `INFO` in `super::server`) call through them, so nothing under
//! `src/ffi` names the wake-up path: it calls down into ffi, never the other way round.
//! Until they are registered (unit tests), every entry point does nothing.

use std::cell::Cell;

use super::Ctx;

/// What the wake-up path does when Redis reports something that may free a lock.
#[derive(Clone, Copy)]
pub struct WakeUps {
    /// A key expired or was evicted (`expired`/`evicted` keyspace events).
    pub key_gone: fn(&Ctx, &[u8]),
    /// Keys went without per-key events (FLUSHALL, FLUSHDB, SWAPDB): serve every lock.
    pub flushed: fn(&Ctx),
    /// This server became a replica: release every parked client.
    pub demoted: fn(&Ctx),
    /// A command about to run names a key a lock with parked clients depends on (the command
    /// filter; any database): serve it after the command.
    pub name_changed: fn(&Ctx, &[u8]),
    /// `EXEC` runs commands filtered when queued: re-check every lock with parked clients.
    pub recheck_all: fn(&Ctx),
    /// The number of clients parked now, for `INFO lockmod`.
    pub parked_now: fn() -> usize,
}

thread_local! {
    // Redis loads the module and runs every callback on its main thread.
    static WAKE_UPS: Cell<Option<WakeUps>> = const { Cell::new(None) };
}

/// Registers the wake-up path's entry points (at load, before any callback can run).
pub fn register(w: WakeUps) {
    WAKE_UPS.with(|c| c.set(Some(w)));
}

/// The registered entry points, if any.
fn get() -> Option<WakeUps> {
    WAKE_UPS.with(Cell::get)
}

/// See [`WakeUps::key_gone`].
pub(super) fn key_gone(ctx: &Ctx, key: &[u8]) {
    if let Some(w) = get() {
        (w.key_gone)(ctx, key);
    }
}

/// See [`WakeUps::flushed`].
pub(super) fn flushed(ctx: &Ctx) {
    if let Some(w) = get() {
        (w.flushed)(ctx);
    }
}

/// See [`WakeUps::demoted`].
pub(super) fn demoted(ctx: &Ctx) {
    if let Some(w) = get() {
        (w.demoted)(ctx);
    }
}

/// See [`WakeUps::name_changed`].
pub(super) fn name_changed(ctx: &Ctx, name: &[u8]) {
    if let Some(w) = get() {
        (w.name_changed)(ctx, name);
    }
}

/// See [`WakeUps::recheck_all`].
pub(super) fn recheck_all(ctx: &Ctx) {
    if let Some(w) = get() {
        (w.recheck_all)(ctx);
    }
}

/// The number of clients parked now (0 before registration, or off the main thread).
pub(super) fn parked_now() -> usize {
    get().map_or(0, |w| (w.parked_now)())
}
