//! Looking things up: a key without opening it (for keys a command only glances at), and
//! whether the server has a command of some name.

use std::ffi::CStr;
use std::os::raw::c_int;

use super::{Ctx, StrRef};
use redis_module::raw;

impl Ctx {
    /// Whether `name` exists in the selected database (`RM_KeyExists`): no key handle, so no
    /// "modified" signal to `WATCH` or client tracking when it is let go, and its access time
    /// is left alone. About half the cost of opening and closing the key.
    pub fn key_exists(&self, name: StrRef) -> bool {
        // SAFETY: live context and a live module string.
        unsafe { api!(RedisModule_KeyExists)(self.0, name.ptr) != 0 }
    }
}

/// Whether the server knows a command called `name` (its own, or another module's), by
/// `COMMAND INFO name`, which replies nil for an unknown one; None when `COMMAND` cannot be run
/// (renamed away). Used at load, where `RM_GetCommand` would only find this module's commands.
pub fn server_has_command(ctx: &Ctx, name: &CStr) -> Option<bool> {
    // SAFETY: live context; "cc" takes two NUL-terminated strings; the reply, and the element
    // borrowed from it, are read before it is freed here.
    unsafe {
        let reply = api!(RedisModule_Call)(ctx.0, c"COMMAND".as_ptr(), c"cc".as_ptr(), c"INFO".as_ptr(), name.as_ptr());
        if reply.is_null() {
            return None;
        }
        let array = raw::REDISMODULE_REPLY_ARRAY as c_int;
        let known = if api!(RedisModule_CallReplyType)(reply) == array && api!(RedisModule_CallReplyLength)(reply) == 1
        {
            let e = api!(RedisModule_CallReplyArrayElement)(reply, 0);
            Some(!e.is_null() && api!(RedisModule_CallReplyType)(e) == array)
        } else {
            None
        };
        api!(RedisModule_FreeCallReply)(reply);
        known
    }
}
