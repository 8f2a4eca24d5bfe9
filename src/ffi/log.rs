//! The server's log, and the guard that turns a callback's panic into a log line.

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};

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

/// Runs `f`, turning a panic into a log line: no panic may unwind into Redis.
pub(super) fn guarded<T>(what: &str, fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        log(c"warning", &format!("lockmod: internal error in {what}"));
        fallback
    })
}
