//! The rewrite itself: a call of a recognised Redisson script, checked against the caller's
//! ACL, becomes its native command in the filter's argument vector (see `super::strings`).
//! Any doubt leaves the call to Lua untouched.

use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::rewrite::{self, Env, A};
use super::stats::{self, Cause};
use super::strings::{Strings, OWN_CALL, READY, STRINGS};
use super::table::{self, ROWS};
use super::{acl, unknown};
use crate::core::config;
use crate::core::parse_i64;
use crate::ffi::filter::{can_name_client, server_flags, FilterCall, Form, Owned};
use crate::ffi::{log, StrRef};

/// The filter's part for `EVAL`, `EVAL_RO` and `EVALSHA` under `lockmod.redisson-scripts
/// native`: rewrites a call of a recognised script into its native command, and notes an
/// `EVAL` left to Redis, which may add to the script cache (`super::cache`).
pub fn rewrite(call: FilterCall, form: Form) {
    if !READY.load(Relaxed) {
        return;
    }
    // Not the module's own script runs ([`OWN_CALL`]): those must reach Lua.
    let left =
        if form == Form::EvalRo || OWN_CALL.load(Relaxed) { Left::Lua(None) } else { filter(call, form == Form::Eval) };
    if let (Left::Lua(row), false) = (left, form == Form::EvalSha) {
        super::learn::eval_left_to_redis(call, row);
    }
}

/// What the filter did with a call: rewrote it, or left it to Lua (with the row of its body,
/// `Some` once looked up: `Some(None)` for a body not in the table).
#[derive(Clone, Copy)]
enum Left {
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

fn filter(call: FilterCall, eval: bool) -> Left {
    let argc = call.argc();
    if argc < 4 {
        return Left::Lua(None);
    }
    let Some(raws) = call.args() else { return Left::Lua(None) };
    let Some(nk) = parse_i64(raws[2].bytes()).and_then(|n| usize::try_from(n).ok()).filter(|n| *n <= argc - 3) else {
        return Left::Lua(None);
    };
    let bytes: Vec<&[u8]> = raws.iter().map(|r| r.bytes()).collect();
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
    let lua = |cause: Cause| {
        stats::left_to_lua(cause);
        Left::Lua(Some(Some(row)))
    };
    let kind = ROWS[row].kind;
    if rewrite::native_of(kind).is_none() || !rewrite::runs_here(kind) {
        return lua(Cause::NotAccelerated);
    }
    // A script known not to be in this server's script cache: Redis answers the `EVALSHA`
    // with `NOSCRIPT`, and runs (and caches) the `EVAL`, as without the module. Not known
    // either way: rewritten, and the command asks the cache when it runs (`super::dispatch`).
    if !super::cache::tracked() {
        return lua(Cause::ScriptCache);
    }
    if super::cache::absent(row) {
        if eval {
            return lua(Cause::ScriptCache);
        }
        stats::noscript();
        return Left::Lua(Some(Some(row)));
    }
    if server_flags() & NOT_HERE != 0 {
        return lua(Cause::ServerState);
    }
    let cluster = server_flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER as u64 != 0;
    let env = Env { sharded: config::sharded(), cluster };
    let Some(plan) = rewrite::plan(kind, keys, argv, env) else { return lua(Cause::Arguments) };
    // Redis 7.0: the caller is unknown, so only while nobody is restricted (`all_users`).
    if !can_name_client() && !crate::acl::probe::every_user_unrestricted() {
        return lua(Cause::Acl);
    }
    let Some(strings) = STRINGS.get() else { return Left::Lua(Some(Some(row))) };
    // An `EVAL` is answered from its body if its script turns out not to be cached.
    if eval && !keep_body(strings, row, raws[1]) {
        return lua(Cause::ScriptCache);
    }
    let marker = if eval { &strings.eval_markers[row] } else { &strings.markers[row] };
    // The new arguments, each a reference Redis will own once inserted.
    let mut new: Vec<Owned> = Vec::with_capacity(plan.args.len() + 1);
    let mut complete = true;
    for a in std::iter::once(None).chain(plan.args.iter().map(Some)) {
        let s = match a {
            None => marker.as_ref().and_then(|m| Owned::hold(m.as_ref())),
            Some(A::Key(i)) => Owned::hold(raws[3 + i]),
            Some(A::Argv(i)) => Owned::hold(raws[3 + nk + i]),
            Some(A::Lit(l)) => strings.word(l).and_then(Owned::hold),
            Some(A::Own(b)) => Some(Owned::new(b)),
        };
        match s {
            Some(s) => new.push(s),
            None => complete = false,
        }
    }
    if !complete || !allowed(call, strings, &raws, &new, &acl::inner_commands(kind, keys, argv, env)) {
        return lua(Cause::Acl);
    }
    if !call.replace_all(new) {
        return Left::Lua(Some(Some(row)));
    }
    crate::ffi::command::rewrote_a_call();
    Left::Rewritten
}

/// Whether the calling user may run the script as sent, the native command, and every command
/// the script runs inside (see `super::acl`), checked by `crate::acl::script`.
fn allowed(call: FilterCall, strings: &Strings, raws: &[StrRef], native: &[Owned], inner: &[(&str, acl::On)]) -> bool {
    if !can_name_client() {
        return true;
    }
    // The names a script derives at run time, made for the check only.
    let own: Vec<Option<Owned>> =
        inner.iter().map(|(_, on)| if let acl::On::Own(b) = on { Some(Owned::new(b)) } else { None }).collect();
    let mut argvs: Vec<Vec<StrRef>> = vec![raws.to_vec(), native.iter().map(Owned::as_ref).collect()];
    for ((cmd, on), own) in inner.iter().zip(&own) {
        let Some(c) = strings.word(cmd.as_bytes()) else { return false };
        let target = match (on, own) {
            (acl::On::Key(i), _) => raws[3 + i],
            (acl::On::Own(_), Some(s)) => s.as_ref(),
            (acl::On::Own(_), None) => return false,
        };
        argvs.push(vec![c, target]);
    }
    crate::acl::script::allows(call, &argvs)
}

/// Keeps the first `EVAL` body seen for a row, to run a rewritten `EVAL` as Lua would (an
/// `EVALSHA` of it could say `NOSCRIPT`). False if no body is kept.
fn keep_body(strings: &Strings, row: usize, body: StrRef) -> bool {
    if strings.bodies[row].get().is_some() {
        return true;
    }
    let Some(h) = Owned::hold(body) else { return false };
    // Only the main thread gets here: a body set in between is the only way this fails, and
    // then the copy made here is freed.
    let _ = strings.bodies[row].set(h);
    true
}
