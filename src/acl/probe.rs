//! The timer that finds out, outside the command filter, whether every ACL user may run every
//! command and touch every key and channel (`super::all_users`): what the Redisson script
//! filter needs to know where it cannot name the calling client (Redis 7.0). A filter must
//! not call into Redis; a timer's callback may.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::all_users;
use crate::ffi::filter::detached;
use crate::ffi::Ctx;

/// True while every user is known to be unrestricted. While that is unknown: false (the
/// script runs as Lua) and the timer armed, once.
pub fn every_user_unrestricted() -> bool {
    match all_users::known() {
        Some(open) => open,
        None => {
            if all_users::should_arm() {
                arm();
            }
            false
        }
    }
}

/// Arms the 0 ms timer (it runs once the event loop turns: after the commands read with this
/// one, and at load, after the server has loaded its ACL users), with the module's context
/// without a client (`ffi::filter::detached`, which is all `RM_CreateTimer` reads).
pub fn arm() {
    let Some(ctx) = detached() else { return all_users::disarmed() };
    ctx.create_plain_timer(0, on_probe);
}

fn on_probe(ctx: &Ctx) {
    if catch_unwind(AssertUnwindSafe(|| all_users::learn(ctx))).is_err() {
        all_users::disarmed();
    }
}
