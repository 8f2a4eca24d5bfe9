//! What other clients' commands change: the read-hold index (`hold_index`), the names and
//! key shapes the command filter watches for it (`names`), how a command's name tells which
//! of its arguments it changes (`classify`), and the filter's part that puts them together
//! (`filter`).
//!
//! May import: ffi, core. Imported by effects (its writes keep the index current), server
//! (which hands `filter` to the command filter and reports the index in `INFO`).

pub mod classify;
pub mod filter;
pub mod hold_index;
pub mod names;

pub use names::active;
