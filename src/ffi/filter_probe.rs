//! The timer that finds out, outside the command filter, whether every ACL user may run every
//! command and touch every key and channel (`crate::all_users`): what the Redisson script
//! filter needs to know where it cannot name the calling client (Redis 7.0). A filter must
//! not call into Redis; a timer's callback may.

use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use super::{Ctx, RawCtx};
use crate::acl::all_users;

/// True while every user is known to be unrestricted. While that is unknown: false (the
/// script runs as Lua) and the timer armed, once, with `detached` (a context of this module
/// without a client, which is all `RM_CreateTimer` reads).
pub fn every_user_unrestricted(detached: RawCtx) -> bool {
    match all_users::known() {
        Some(open) => open,
        None => {
            if all_users::should_arm() {
                arm(detached);
            }
            false
        }
    }
}

/// Arms the 0 ms timer (it runs once the event loop turns: after the commands read with this
/// one, and at load, after the server has loaded its ACL users).
pub fn arm(detached: RawCtx) {
    if detached.is_null() {
        return all_users::disarmed();
    }
    // SAFETY: a live module context; the callback has the signature Redis expects and takes
    // no data. Redis refuses to unload the module while the timer is armed.
    unsafe { api!(RedisModule_CreateTimer)(detached, 0, Some(on_probe), std::ptr::null_mut()) };
}

extern "C" fn on_probe(ctx: RawCtx, _data: *mut c_void) {
    let ctx = Ctx(ctx);
    if catch_unwind(AssertUnwindSafe(|| all_users::learn(&ctx))).is_err() {
        all_users::disarmed();
    }
}
