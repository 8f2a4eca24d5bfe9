//! Looking a key up without opening it: for keys a command only glances at.

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
