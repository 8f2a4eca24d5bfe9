//! Whether the module can follow ACL changes at all, and how much it remembers of them: what
//! both the per-user verdicts (`super::known`) and the all-users state (`super::all_users`)
//! depend on.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// False when `ACL` or `EXEC` is renamed (`rename-command`): the filter, which knows them by
/// name, would miss ACL changes, so nothing is remembered.
static TRACKED: AtomicBool = AtomicBool::new(true);

/// Called at load: whether ACL changes can be seen by the command filter.
pub fn set_tracked(tracked: bool) {
    TRACKED.store(tracked, Relaxed);
}

/// Whether ACL changes can be seen by the command filter.
pub fn tracked() -> bool {
    TRACKED.load(Relaxed)
}

/// Users (and clients with a queued ACL change) remembered at most: a server has a handful.
pub(crate) const MAX_REMEMBERED: usize = 64;
