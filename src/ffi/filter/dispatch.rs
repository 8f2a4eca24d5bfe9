//! The calls the filter rewrote, when they run: the native command through
//! `crate::redisson::exec`, or, when it cannot answer as the script would, the script itself.

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::{free_string, hold, new_string, Strings, OWN_CALL, STRINGS, USED};
use crate::core::config;
use crate::ffi::{Args, Ctx, Handler, RawCtx, RawStr, OK};
use crate::redisson::exec::{self, Outcome};
use crate::redisson::rewrite::{self, Env};
use crate::redisson::table::ROWS;
use crate::redisson::{cache, reverse, stats};

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
    let i = strings.lookup.binary_search_by_key(&first, |(m, _, _)| *m).ok()?;
    let (_, row, eval) = strings.lookup[i];
    let kind = ROWS[row].kind;
    let native = rewrite::native_of(kind)?;
    let c = Ctx(ctx);
    let args = Args::new(argv);
    let failed = || c.reply_error("ERR internal error in lockmod (see the server log)");
    // Not known to be in the script cache (a flush or an eviction may have run since the
    // filter saw the call): asked now. Not there, or not known: the call runs as sent, so an
    // `EVALSHA` gets Redis' own `NOSCRIPT` and an `EVAL` caches its body.
    let cached = cache::present(row)
        || catch_unwind(AssertUnwindSafe(|| crate::ffi::script_cache::holds(&c, row))).ok().flatten() == Some(true);
    if !cached {
        if catch_unwind(AssertUnwindSafe(|| unsafe { run_script(&c, strings, row, eval, &args) })).is_err() {
            failed();
        }
        return Some(OK);
    }
    match catch_unwind(AssertUnwindSafe(|| exec::run(&c, &args, kind, native, handler))) {
        Ok(Outcome::Reply(r)) => c.reply(&r),
        Ok(Outcome::Fallback) => {
            if catch_unwind(AssertUnwindSafe(|| unsafe { run_script(&c, strings, row, eval, &args) })).is_err() {
                failed();
            }
        }
        Err(_) => failed(),
    }
    Some(OK)
}

/// Runs the script of `row` itself as the client sent it (`EVAL` of the body if `eval`, else
/// `EVALSHA`), with the KEYS and ARGV the call was made with, and replies what it replies (in
/// the client's protocol). Its writes replicate as the script's.
///
/// # Safety
/// `c` must be a live command context.
unsafe fn run_script(c: &Ctx, strings: &Strings, row: usize, eval: bool, args: &Args) {
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
    let held = if eval && !body.is_null() { hold(body) } else { None };
    let (cmd, script) = match held {
        Some(h) => (c"EVAL", h),
        None if eval => return c.reply_error("ERR lockmod could not run the Redisson script"),
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
    // SAFETY: a live call reply.
    let noscript = unsafe { api!(RedisModule_CallReplyType)(reply) } == raw::REDISMODULE_REPLY_ERROR as c_int
        && unsafe { reply_text(reply) }.starts_with(b"NOSCRIPT");
    if noscript {
        stats::noscript();
    } else {
        stats::fallback();
    }
    // SAFETY: a live call reply, freed once after it was copied to the client.
    unsafe {
        reply_with(c.raw(), reply);
        free_reply(reply);
    }
}

/// The text of a call reply (an error's message).
///
/// # Safety
/// `reply` must be a live call reply; the text is borrowed from it.
unsafe fn reply_text<'a>(reply: *mut raw::RedisModuleCallReply) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: a live reply; Redis writes the length.
    let p = unsafe { api!(RedisModule_CallReplyStringPtr)(reply, &mut len) };
    if p.is_null() {
        return &[];
    }
    // SAFETY: `len` bytes at `p`, alive as long as the reply.
    unsafe { std::slice::from_raw_parts(p as *const u8, len) }
}
