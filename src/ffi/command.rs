//! Command registration and dispatch: the `extern "C"` trampoline Redis calls, and the
//! `catch_unwind` that keeps a panic from ever unwinding into Redis.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use super::{Args, Ctx, RawCtx, RawStr, OK};
use crate::core::{LockError, Reply};

/// The shape of every command handler: parse `args`, run, and return the reply.
pub type Handler = fn(&Ctx, &Args) -> Result<Reply, LockError>;

/// Defines an `extern "C"` trampoline for a [`Handler`], for [`create_command`].
#[macro_export]
macro_rules! command_fn {
    ($handler:path) => {{
        extern "C" fn trampoline(
            ctx: $crate::ffi::RawCtx,
            argv: *mut $crate::ffi::RawStr,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            // SAFETY: Redis calls a command function with a live context and `argc` arguments.
            unsafe { $crate::ffi::dispatch(ctx, argv, argc, $handler) }
        }
        trampoline as $crate::ffi::CommandFn
    }};
}

pub type CommandFn = extern "C" fn(RawCtx, *mut RawStr, c_int) -> c_int;

/// Runs a handler and writes its reply. A panic becomes an error reply, never a crash.
///
/// # Safety
/// `ctx` must be a live command context and `argv` must hold `argc` live module strings, as
/// Redis guarantees when it calls a command function.
#[inline]
pub unsafe fn dispatch(ctx: RawCtx, argv: *mut RawStr, argc: c_int, handler: Handler) -> c_int {
    let argv: &[RawStr] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        // SAFETY: Redis passes `argc` valid string pointers in `argv`, alive for this call.
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    let ctx = Ctx(ctx);
    let args = Args::new(argv);
    // A call the command filter rewrote into this command (a Redisson script's).
    if REWROTE.load(Relaxed) {
        if let Some(rewritten) = rewritten_hook() {
            if rewritten(&ctx, &args, handler) {
                return OK;
            }
        }
    }
    let result = catch_unwind(AssertUnwindSafe(|| handler(&ctx, &args)));
    match result {
        Ok(Ok(reply)) => ctx.reply(&reply),
        Ok(Err(LockError::Blocked)) => {}
        Ok(Err(e)) => ctx.reply_error(&e.to_string()),
        Err(_) => ctx.reply_error("ERR internal error in lockmod (see the server log)"),
    }
    OK
}

/// Runs a call the command filter rewrote, if `args` is one: true if it did (and replied).
pub type RewrittenFn = fn(&Ctx, &Args, Handler) -> bool;

/// Set once the filter rewrote a call: until then no command looks for one.
static REWROTE: AtomicBool = AtomicBool::new(false);
static REWRITTEN: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Hands [`dispatch`] the function that runs a rewritten call (`crate::redisson`), at load.
pub fn on_rewritten(f: RewrittenFn) {
    REWRITTEN.store(f as *mut (), Relaxed);
}

/// The filter rewrote a call: from now on every command asks the [`on_rewritten`] function.
pub fn rewrote_a_call() {
    REWROTE.store(true, Relaxed);
}

fn rewritten_hook() -> Option<RewrittenFn> {
    let p = REWRITTEN.load(Relaxed);
    // SAFETY: set only by `on_rewritten`, from a function pointer of type `RewrittenFn`.
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut (), RewrittenFn>(p) })
}

/// Registers `name` with `RedisModule_CreateCommand`. Returns false if Redis refused it.
pub fn create_command(
    ctx: &redis_module::Context,
    name: &CStr,
    f: CommandFn,
    flags: &CStr,
    first: c_int,
    last: c_int,
    step: c_int,
) -> bool {
    // SAFETY: `ctx` is the OnLoad context; the strings are NUL-terminated and copied by Redis.
    unsafe { api!(RedisModule_CreateCommand)(ctx.ctx, name.as_ptr(), Some(f), flags.as_ptr(), first, last, step) == OK }
}
