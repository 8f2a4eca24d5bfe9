//! The rewrite itself: a call of a recognised Redisson script, checked against the caller's
//! ACL, becomes its native command in the filter's argument vector (see `super`). Any doubt
//! leaves the call to Lua untouched.

use std::os::raw::c_int;
use std::ptr::null_mut;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::permission::acl_allows;
use super::{free_string, hold, new_string, word, Fctx, Strings, DETACHED, OWN_CALL, READY, STRINGS, USED};
use crate::core::config;
use crate::core::parse_i64;
use crate::ffi::{log, str_bytes, RawCtx, RawStr};
use crate::redisson::rewrite::{self, Env, A};
use crate::redisson::table::{self, ROWS};
use crate::redisson::{acl, stats, unknown};

/// Which script call the filter sees.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::ffi) enum Form {
    EvalSha,
    Eval,
    /// `EVAL_RO`: never rewritten (Redisson's lock scripts write), but it caches its body.
    EvalRo,
}

/// The filter's part for `EVAL`, `EVAL_RO` and `EVALSHA` under `lockmod.redisson-scripts
/// native`: rewrites a call of a recognised script into its native command, and notes an
/// `EVAL` left to Redis, which may add to the script cache (`crate::redisson::cache`).
///
/// # Safety
/// `fctx` must be the live filter context of this call, with `argc` arguments.
pub(in crate::ffi) unsafe fn rewrite(fctx: Fctx, argc: c_int, form: Form) {
    if !READY.load(Relaxed) {
        return;
    }
    // Not the module's own script runs ([`OWN_CALL`]): those must reach Lua.
    let left = if form == Form::EvalRo || OWN_CALL.load(Relaxed) {
        Left::Lua(None)
    } else {
        // SAFETY: as this function's.
        unsafe { filter(fctx, argc, form == Form::Eval) }
    };
    if let (Left::Lua(row), false) = (left, form == Form::EvalSha) {
        // SAFETY: as this function's.
        unsafe { super::learn::eval_left_to_redis(fctx, argc, row) };
    }
}

/// What the filter did with a call: rewrote it, or left it to Lua (with the row of its body,
/// `Some` once looked up: `Some(None)` for a body not in the table).
#[derive(Clone, Copy)]
pub(super) enum Left {
    Rewritten,
    Lua(Option<Option<usize>>),
}

/// Context flags under which a recognised script is left to Lua: a replica (the script's
/// reads still work there, the native write command would be refused), a server loading, or
/// one over `maxmemory` (a script's first `deny-oom` write fails there with the script's OOM
/// error, even in an unlock, whose native command Redis would let run).
const NOT_HERE: u64 = (raw::REDISMODULE_CTX_FLAGS_SLAVE
    | raw::REDISMODULE_CTX_FLAGS_LOADING
    | raw::REDISMODULE_CTX_FLAGS_ASYNC_LOADING
    | raw::REDISMODULE_CTX_FLAGS_OOM) as u64;

/// # Safety
/// `fctx` must be the live filter context of this call.
unsafe fn filter(fctx: Fctx, argc: c_int, eval: bool) -> Left {
    // SAFETY (whole function): `fctx` is live; its argument strings are owned by the client
    // and stay alive until we replace or delete them.
    let argc = argc.max(0) as usize;
    if argc < 4 {
        return Left::Lua(None);
    }
    let raws: Vec<RawStr> =
        (0..argc).map(|i| unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i as c_int) }).collect();
    if raws.iter().any(|r| r.is_null()) {
        return Left::Lua(None);
    }
    let Some(nk) = parse_i64(str_bytes(raws[2])).and_then(|n| usize::try_from(n).ok()).filter(|n| *n <= argc - 3)
    else {
        return Left::Lua(None);
    };
    let bytes: Vec<&[u8]> = raws.iter().map(|r| str_bytes(*r)).collect();
    let (keys, argv) = (&bytes[3..3 + nk], &bytes[3 + nk..]);
    let found = if eval { table::by_body(bytes[1]) } else { table::by_sha(bytes[1]) };
    let Some(row) = found else {
        if unknown::looks_like_redisson(keys, argv) && stats::unknown() {
            let sha = if eval {
                sha1_smol::Sha1::from(bytes[1]).digest().to_string()
            } else {
                String::from_utf8_lossy(bytes[1]).into()
            };
            log(c"notice", &format!("lockmod: a Redisson-like script not in lockmod's table ran as Lua: {sha}"));
        }
        return Left::Lua(Some(None));
    };
    let lua = |counted: fn()| {
        counted();
        Left::Lua(Some(Some(row)))
    };
    let kind = ROWS[row].kind;
    if rewrite::native_of(kind).is_none() {
        return lua(stats::left_to_lua);
    }
    // A script known not to be in this server's script cache: Redis answers the `EVALSHA`
    // with `NOSCRIPT`, and runs (and caches) the `EVAL`, as without the module. Not known
    // either way: rewritten, and the command asks the cache when it runs (`super::dispatch`).
    if !crate::redisson::cache::tracked() {
        return lua(stats::left_to_lua);
    }
    if crate::redisson::cache::absent(row) {
        return lua(if eval { stats::left_to_lua } else { stats::noscript });
    }
    // SAFETY: a NULL context is allowed: only the server-wide flags are reported.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(null_mut()) } as u64;
    if flags & NOT_HERE != 0 {
        return lua(stats::left_to_lua);
    }
    let env = Env { sharded: config::sharded() };
    let Some(plan) = rewrite::plan(kind, keys, argv, env) else { return lua(stats::left_to_lua) };
    // Redis 7.0: the caller is unknown, so only while nobody is restricted (`all_users`).
    if opt!(RedisModule_CommandFilterGetClientId).is_none()
        && !crate::ffi::filter_probe::every_user_unrestricted(DETACHED.load(Relaxed) as RawCtx)
    {
        return lua(stats::left_to_lua);
    }
    let Some(strings) = STRINGS.get() else { return Left::Lua(Some(Some(row))) };
    // An `EVAL` is answered from its body if its script turns out not to be cached.
    if eval && !keep_body(strings, row, raws[1]) {
        return lua(stats::left_to_lua);
    }
    let marker = if eval { strings.eval_markers[row] } else { strings.markers[row] } as RawStr;
    // The new arguments, each a reference Redis will own once inserted.
    let mut new: Vec<RawStr> = Vec::with_capacity(plan.args.len() + 1);
    let mut complete = true;
    for a in std::iter::once(None).chain(plan.args.iter().map(Some)) {
        let s = match a {
            None => hold(marker),
            Some(A::Key(i)) => hold(raws[3 + i]),
            Some(A::Argv(i)) => hold(raws[3 + nk + i]),
            Some(A::Lit(l)) => word(strings, l).and_then(hold),
            Some(A::Own(b)) => Some(new_string(b)),
        };
        match s {
            Some(s) => new.push(s),
            None => complete = false,
        }
    }
    let allowed = complete && {
        let inner = acl::inner_commands(kind, keys, argv, env);
        unsafe { acl_allows(fctx, strings, &raws, &new, &inner) }
    };
    if !allowed {
        new.into_iter().for_each(free_string);
        return lua(stats::left_to_lua);
    }
    let (Some(replace), Some(delete), Some(insert)) = (
        opt!(RedisModule_CommandFilterArgReplace),
        opt!(RedisModule_CommandFilterArgDelete),
        opt!(RedisModule_CommandFilterArgInsert),
    ) else {
        new.into_iter().for_each(free_string);
        return Left::Lua(Some(Some(row)));
    };
    let mut new = new.into_iter();
    if let Some(first) = new.next() {
        unsafe { replace(fctx, 0, first) };
    }
    // From the end: each delete is then O(1).
    for i in (1..argc).rev() {
        unsafe { delete(fctx, i as c_int) };
    }
    for (j, s) in new.enumerate() {
        unsafe { insert(fctx, (1 + j) as c_int, s) };
    }
    USED.store(true, Relaxed);
    Left::Rewritten
}

/// Keeps the first `EVAL` body seen for a row, to run a rewritten `EVAL` as Lua would (an
/// `EVALSHA` of it could say `NOSCRIPT`). False if no body is kept.
fn keep_body(strings: &Strings, row: usize, body: RawStr) -> bool {
    if strings.bodies[row].load(Relaxed) != 0 {
        return true;
    }
    let Some(h) = hold(body) else { return false };
    if strings.bodies[row].compare_exchange(0, h as usize, Relaxed, Relaxed).is_err() {
        free_string(h);
    }
    true
}
