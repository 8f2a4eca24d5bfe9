//! The command filter's part that sees other clients' changes to what the read-hold index
//! depends on. `super::server`'s filter calls it only while `crate::watch` has something to
//! look for (the index has entries, or names are watched), so otherwise the module costs other
//! traffic one flag test. An index no read unlock used for a while is dropped (see
//! `crate::hold_index::IDLE_MS`), and with it this part's cost.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use redis_module::raw;

use super::str_bytes;
use crate::watch::{self, Keys};

/// Commands looked at so far.
static SEEN: AtomicU64 = AtomicU64::new(0);

/// A command (named `cmd`, with `argc` arguments) is about to run or be queued: drop the index
/// entries and serve the parked locks its key arguments may change.
pub(super) fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx, argc: c_int, cmd: &[u8]) {
    let arg = |i: c_int| -> &[u8] {
        // SAFETY: `fctx` is live for this call, its argument strings owned by the client;
        // `i` < `argc`.
        let s = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i) };
        if s.is_null() {
            &[]
        } else {
            str_bytes(s)
        }
    };
    // Now and then, an index nobody uses goes (and with it this part's cost).
    let n = SEEN.load(Relaxed).wrapping_add(1);
    SEEN.store(n, Relaxed);
    if n.is_multiple_of(1024) {
        crate::hold_index::expire_idle(super::Ctx::now_ms());
        if !watch::active() {
            return;
        }
    }
    let last = match watch::classify(cmd) {
        Keys::Ignore => return,
        Keys::Exec => return on_exec(),
        Keys::First => 1.min(argc - 1),
        Keys::All => argc - 1,
    };
    for i in 1..=last {
        let name = arg(i);
        if watch::is_watched(name) || (watch::indexed() && watch::looks_like_timeout_key(name)) {
            on_hit(name);
        }
    }
}

/// A command about to run names `name`, which a lock with parked clients or an index entry
/// depends on: drop the entry now (the command runs before anything could read it again) and
/// serve the lock from a 0 ms timer, after the command.
fn on_hit(name: &[u8]) {
    crate::hold_index::changed(name);
    if let Some(ctx) = super::events::module_ctx() {
        super::wake_ups::name_changed(&ctx, name);
    }
}

/// `EXEC` runs commands filtered when they were queued, perhaps before what they change was
/// watched: drop the whole index and re-check every lock with parked clients, after it.
pub(super) fn on_exec() {
    crate::hold_index::clear();
    if let Some(ctx) = super::events::module_ctx() {
        super::wake_ups::recheck_all(&ctx);
    }
}
