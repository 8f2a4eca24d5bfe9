//! WATCH and client-side caching: a key is signalled as modified only when it changed.
//!
//! Redis signals every key a module opened for writing when the module closes it, whether or
//! not anything was written (`moduleCloseKey` in module.c, 7.0 to 8.x and Valkey alike). A
//! refused acquire or an unlock by a non-holder would then abort a `WATCH`ed transaction on the
//! lock and send RESP3 invalidations to every client caching it. So the module opts out at load
//! (`REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED`, Redis 6.0+) and `ffi::Key` signals on
//! close only the handles a write changed: one signal per key and command, as before.

use redis_module::raw;

use super::RawCtx;

/// Turns off Redis' implicit signal on closing a key opened for writing. The module has no
/// other module option to keep (no data types), so the options are set, not merged.
pub fn opt_out(ctx: &redis_module::Context) {
    let options = raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED as std::os::raw::c_int;
    // SAFETY: the OnLoad context; the call only stores the flags in the module's record.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx.ctx, options) };
}

/// Signals the key behind the open handle `key` as modified (`WATCH`, client tracking), in
/// `db`, the database it was opened in.
pub(super) fn signal(ctx: RawCtx, key: *mut raw::RedisModuleKey, db: i32) {
    // SAFETY: `ctx` is the live context the handle was opened with and `key` the open handle;
    // the name Redis returns is the handle's own, alive until the handle is closed (after this
    // call). `RM_SignalModifiedKey` reads the name and never keeps or changes it.
    unsafe {
        let name = api!(RedisModule_GetKeyNameFromModuleKey)(key);
        if name.is_null() {
            return;
        }
        // RM_SignalModifiedKey works in the context's selected database: the handle's, unless
        // a caller switched since opening it (no caller does; this keeps it right if one does).
        let current = api!(RedisModule_GetSelectedDb)(ctx);
        if current != db && api!(RedisModule_SelectDb)(ctx, db) != super::OK {
            return;
        }
        api!(RedisModule_SignalModifiedKey)(ctx, name as *mut raw::RedisModuleString);
        if current != db {
            api!(RedisModule_SelectDb)(ctx, current);
        }
    }
}
