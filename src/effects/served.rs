//! Who serves the parked clients of a lock the store writes, and how a write reaches them: the
//! wake-up path (`crate::blocking`, above this module) keeps [`any_parked`] current and hands
//! its `changed` to [`on_change`] at load.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::ffi::Ctx;

/// Who serves a lock queued by a change.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ServedBy {
    /// The 0 ms pending timer: the change is a command of someone else, seen before it runs,
    /// or a write by the module's own upkeep.
    Timer,
    /// The writer itself, right after its writes, in the same call: a module command ends with
    /// `serve_now`, a grant is made by `serve`. No timer (Redis' timer costs more than the
    /// rest of a hand-off's bookkeeping together).
    Writer,
}

/// Whether any client is parked: every write of the module asks (a plain static, no
/// thread-local access).
static ANY_PARKED: AtomicBool = AtomicBool::new(false);

/// Whether any client is parked.
#[inline]
pub fn any_parked() -> bool {
    ANY_PARKED.load(Relaxed)
}

/// Some client is parked (or none any more): set by the wake-up path.
#[inline]
pub fn set_any_parked(on: bool) {
    ANY_PARKED.store(on, Relaxed);
}

/// What a change of `name` (in `db`, or a database the caller does not know) means for parked
/// clients: queue the lock to be served by the given server.
pub type Changed = fn(&Ctx, Option<i32>, &[u8], ServedBy);

thread_local! {
    // Redis runs every module command and callback on its main thread.
    static CHANGED: Cell<Option<Changed>> = const { Cell::new(None) };
}

/// Hands the store the wake-up path's `changed` (at load, before any command).
pub fn on_change(f: Changed) {
    CHANGED.with(|c| c.set(Some(f)));
}

/// `name` changed: tells the wake-up path, while any client is parked.
#[inline]
pub fn changed(ctx: &Ctx, db: Option<i32>, name: &[u8], by: ServedBy) {
    if any_parked() {
        if let Some(f) = CHANGED.with(Cell::get) {
            f(ctx, db, name, by);
        }
    }
}
