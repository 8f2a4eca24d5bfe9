//! The calls the filter rewrote, when they run: the native command through
//! `crate::redisson::exec`, or, when it cannot answer as the script would, the script itself.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::{free_string, hold, new_string, Strings, OWN_CALL, STRINGS, USED};
use crate::config;
use crate::ffi::{Args, Ctx, Handler, RawCtx, RawStr, OK};
use crate::redisson::exec::{self, Outcome};
use crate::redisson::rewrite::{self, Env};
use crate::redisson::table::ROWS;
use crate::redisson::{reverse, stats};

/// The dispatch of a call the filter rewrote (`argv[0]` one of its markers): runs it through
/// `crate::redisson::exec`, or the script itself. `None` for any other command.
///
/// # Safety
/// `ctx` must be a live command context and `argv` its live arguments.
pub unsafe fn dispatch_scripted(ctx: RawCtx, argv: &[RawStr], handler: Handler) -> Option<c_int> {
    if !USED.load(Relaxed) {
        return None;
    }
    let first = *argv.first()? as usize;
    let strings = STRINGS.get()?;
    let row = strings.markers.iter().position(|m| *m == first)?;
    let kind = ROWS[row].kind;
    let native = rewrite::native_of(kind)?;
    let c = Ctx(ctx);
    let args = Args::new(argv);
    match catch_unwind(AssertUnwindSafe(|| exec::run(&c, &args, kind, native, handler))) {
        Ok(Outcome::Reply(r)) => c.reply(&r),
        Ok(Outcome::Fallback) => {
            if catch_unwind(AssertUnwindSafe(|| unsafe { run_script(&c, strings, row, &args) })).is_err() {
                c.reply_error("ERR internal error in lockmod (see the server log)");
            }
        }
        Err(_) => c.reply_error("ERR internal error in lockmod (see the server log)"),
    }
    Some(OK)
}

/// Runs the script of `row` itself, with the KEYS and ARGV the call was made with, and
/// replies what it replies (in the client's protocol). Its writes replicate as the script's.
///
/// # Safety
/// `c` must be a live command context.
unsafe fn run_script(c: &Ctx, strings: &Strings, row: usize, args: &Args) {
    stats::fallback();
    let kind = ROWS[row].kind;
    let native: Vec<&[u8]> = (1..args.len()).map(|i| args.bytes(i)).collect();
    let env = Env { sharded: config::sharded() };
    let (Some((keys, argv)), Some(call), Some(reply_with), Some(free_reply)) = (
        reverse::script_call(kind, &native, env, Ctx::cached_ms()),
        opt!(RedisModule_Call),
        opt!(RedisModule_ReplyWithCallReply),
        opt!(RedisModule_FreeCallReply),
    ) else {
        return c.reply_error("ERR lockmod could not run the Redisson script");
    };
    let body = strings.bodies[row].load(Relaxed) as RawStr;
    let held = if body.is_null() { None } else { hold(body) };
    let (cmd, script) = match held {
        Some(h) => (c"EVAL", h),
        None => (c"EVALSHA", new_string(ROWS[row].sha.as_bytes())),
    };
    let mut v: Vec<RawStr> = vec![script, new_string(keys.len().to_string().as_bytes())];
    v.extend(keys.iter().chain(&argv).map(|b| new_string(b)));
    // SAFETY: live context; "v" consumes (RedisModuleString **, size_t) of live strings; "!"
    // replicates the script's effects, "0" replies in the client's protocol.
    OWN_CALL.store(true, Relaxed);
    let reply = unsafe { call(c.raw(), cmd.as_ptr(), c"!0v".as_ptr(), v.as_mut_ptr(), v.len()) };
    OWN_CALL.store(false, Relaxed);
    v.into_iter().for_each(free_string);
    if reply.is_null() {
        return c.reply_error("ERR lockmod could not run the Redisson script");
    }
    // SAFETY: a live call reply, freed once after it was copied to the client.
    unsafe {
        reply_with(c.raw(), reply);
        free_reply(reply);
    }
}
