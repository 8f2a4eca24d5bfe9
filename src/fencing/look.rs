//! Whether the command filter looks at commands for fencing (`ffi::filter::fencing`): while
//! counters move (`core::lock::era::moving`), or while a script that names a counter runs
//! ([`arm`], until a 0 ms timer after it: `super::touch`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::core::lock::era;
use crate::ffi::filter::set_fencing;

/// A script named a counter: the filter looks at its commands until the timer.
static ARMED: AtomicBool = AtomicBool::new(false);

/// Whether a script's commands are looked at.
pub fn armed() -> bool {
    ARMED.load(Relaxed)
}

/// Starts looking at a script's commands; false if it already was.
pub fn arm() -> bool {
    let first = !ARMED.swap(true, Relaxed);
    refresh();
    first
}

/// Stops looking at a script's commands.
pub fn disarm() {
    ARMED.store(false, Relaxed);
    refresh();
}

/// The filter looks while counters move or a script that names one runs.
pub fn refresh() {
    set_fencing(era::moving() || armed());
}
