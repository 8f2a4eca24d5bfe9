//! The server's log.

use std::ffi::CStr;

use redis_module::raw;

/// Logs through the server's log, which is where operators look.
pub fn log(level: &CStr, message: &str) {
    let Ok(msg) = std::ffi::CString::new(message.replace('\0', " ")) else { return };
    // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
    if let Some(f) = unsafe { raw::RedisModule_Log } {
        // SAFETY: a null context is allowed by RM_Log; the strings are NUL-terminated.
        unsafe { f(std::ptr::null_mut(), level.as_ptr(), c"%s".as_ptr(), msg.as_ptr()) };
    }
}
