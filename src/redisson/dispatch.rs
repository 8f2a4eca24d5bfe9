//! The calls the filter rewrote, when they run: the native command through `super::exec`, or,
//! when it cannot answer as the script would, the script itself. `crate::ffi::command` asks
//! [`run_rewritten`] (handed to it at load) before each command, once a call was rewritten.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;

use super::exec::{self, Outcome};
use super::rewrite::{self, Env};
use super::stats::{self, Cause};
use super::strings::{Strings, OWN_CALL, STRINGS};
use super::table::ROWS;
use super::{cache, cache_probe, reverse};
use crate::core::config;
use crate::ffi::filter::Owned;
use crate::ffi::{Args, Ctx, Handler};

/// The dispatch of a call the filter rewrote (`argv[0]` one of its markers): runs it through
/// `super::exec`, or the script itself. False (nothing done) for any other command.
pub fn run_rewritten(c: &Ctx, args: &Args, handler: Handler) -> bool {
    let Some(first) = args.raw(0).map(|s| s.id()) else { return false };
    let Some(strings) = STRINGS.get() else { return false };
    let Ok(i) = strings.lookup.binary_search_by_key(&first, |(m, _, _)| *m) else { return false };
    let (_, row, eval) = strings.lookup[i];
    let kind = ROWS[row].kind;
    let Some(native) = rewrite::native_of(kind) else { return false };
    let failed = || c.reply_error("ERR internal error in lockmod (see the server log)");
    // Not known to be in the script cache (a flush or an eviction may have run since the
    // filter saw the call): asked now. Not there, or not known: the call runs as sent, so an
    // `EVALSHA` gets Redis' own `NOSCRIPT` and an `EVAL` caches its body.
    let cached = cache::present(row)
        || catch_unwind(AssertUnwindSafe(|| cache_probe::holds(c, row))).ok().flatten() == Some(true);
    if !cached {
        let run = || run_script(c, strings, row, eval, args, Cause::ScriptCache);
        if catch_unwind(AssertUnwindSafe(run)).is_err() {
            failed();
        }
        return true;
    }
    match catch_unwind(AssertUnwindSafe(|| exec::run(c, args, kind, native, handler))) {
        Ok(Outcome::Reply(r)) => c.reply(&r),
        Ok(Outcome::Fallback(cause)) => {
            if catch_unwind(AssertUnwindSafe(|| run_script(c, strings, row, eval, args, cause))).is_err() {
                failed();
            }
        }
        Err(_) => failed(),
    }
    true
}

/// Runs the script of `row` itself as the client sent it (`EVAL` of the body if `eval`, else
/// `EVALSHA`), with the KEYS and ARGV the call was made with, and replies what it replies (in
/// the client's protocol). Its writes replicate as the script's.
fn run_script(c: &Ctx, strings: &Strings, row: usize, eval: bool, args: &Args, cause: Cause) {
    const FAILED: &str = "ERR lockmod could not run the Redisson script";
    let kind = ROWS[row].kind;
    let native: Vec<&[u8]> = (1..args.len()).map(|i| args.bytes(i)).collect();
    let env = Env { sharded: config::sharded(), cluster: false };
    let Some((keys, argv)) = reverse::script_call(kind, &native, env, Ctx::cached_ms()) else {
        return c.reply_error(FAILED);
    };
    if !Ctx::can_call_scripts() {
        return c.reply_error(FAILED);
    }
    let held = if eval { strings.bodies[row].get().and_then(|b| Owned::hold(b.as_ref())) } else { None };
    let (cmd, script) = match held {
        Some(h) => (c"EVAL", h),
        None if eval => return c.reply_error(FAILED),
        None => (c"EVALSHA", Owned::new(ROWS[row].sha.as_bytes())),
    };
    let mut v: Vec<Owned> = vec![script, Owned::new(keys.len().to_string().as_bytes())];
    v.extend(keys.iter().chain(&argv).map(|b| Owned::new(b)));
    OWN_CALL.store(true, Relaxed);
    let reply = c.call_replicated(cmd, &v);
    OWN_CALL.store(false, Relaxed);
    drop(v);
    let Some(reply) = reply else { return c.reply_error(FAILED) };
    if reply.is_error() && reply.text().starts_with(b"NOSCRIPT") {
        stats::noscript();
    } else {
        stats::fallback(cause);
    }
    c.reply_with_call_reply(&reply);
}
