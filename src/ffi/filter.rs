//! The command filter's part that runs Redisson's lock scripts as native commands
//! (`lockmod.redisson-scripts native`, see `crate::redisson`), and the dispatch of the calls
//! it rewrote. The filter itself (one for the whole module) is `super::server`'s.
//!
//! The filter turns `EVALSHA sha n KEYS... ARGV...` (or `EVAL body ...`) of a recognised script
//! into `<native command> <arguments>` before Redis looks the command up, so the native
//! command's flags, key spec (cluster redirects), ACL and `INFO commandstats` apply. Its first
//! argument is one of the module's own strings, one per table row: a command recognises a
//! rewritten call, and its row, by pointer identity, which no client can forge.
//!
//! The API calls this file adds go through `opt!` (an `Option`): every one exists in Redis 7.0
//! except the filter's client id (7.2), without which the filter cannot check the caller's
//! ACL and rewrites only while no user of the server is restricted at all
//! (`crate::all_users`); on a server missing any other the filter never rewrites.

use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use redis_module::raw;

use super::{log, str_bytes, Args, Ctx, Handler, RawCtx, RawStr, OK};
use crate::config;
use crate::core::parse_i64;
use crate::redisson::exec::{self, Outcome};
use crate::redisson::rewrite::{self, Env, A};
use crate::redisson::table::{self, ROWS};
use crate::redisson::{acl, reverse, stats, unknown};

type Fctx = *mut raw::RedisModuleCommandFilterCtx;

/// An optional module API function (`None` on a server without it).
macro_rules! opt {
    ($name:ident) => {
        // SAFETY: Redis writes these pointers once, in RedisModule_Init, before any other code
        // of the module runs; afterwards they are only read.
        unsafe { raw::$name }
    };
}

/// Module strings made once at load and never freed (pointers kept as `usize`).
struct Strings {
    /// Per table row, the native command's name (0 for a row left to Lua).
    markers: Vec<usize>,
    /// The keywords of native arguments and the inner commands' names, for ACL checks.
    words: Vec<(&'static [u8], usize)>,
    /// Per table row, an `EVAL` body seen (held), to run the script itself by `EVAL`.
    bodies: Vec<AtomicUsize>,
}

static STRINGS: OnceLock<Strings> = OnceLock::new();
/// A context without a client, for API calls that want one: made by each load (the module's
/// memory, `STRINGS` included, outlives a `MODULE UNLOAD`; a context must not).
static DETACHED: AtomicUsize = AtomicUsize::new(0);
/// Set once the filter rewrote a call: until then no command looks for a marker.
static USED: AtomicBool = AtomicBool::new(false);
/// The server has every API the rewrite needs (set by [`register`]).
static READY: AtomicBool = AtomicBool::new(false);
/// Set while the module runs a script itself ([`run_script`]): that call must reach Lua, not
/// be rewritten back (what `REDISMODULE_CMDFILTER_NOSELF` did for a filter of its own; the
/// module's one filter must see its own calls for the read-hold index).
static OWN_CALL: AtomicBool = AtomicBool::new(false);

const WORDS: &[&[u8]] = &[b"LATCH", b"TOKEN", b"READ", b"WRITE", b"NOQUEUE", b"1"];

fn new_string(b: &[u8]) -> RawStr {
    // SAFETY: a NULL context is allowed (no automatic memory); Redis copies the bytes. The
    // string is ours until handed to Redis or freed.
    unsafe { api!(RedisModule_CreateString)(null_mut(), b.as_ptr() as *const c_char, b.len()) }
}

fn free_string(s: RawStr) {
    // SAFETY: `s` is a string we own a reference to; a NULL context is allowed.
    unsafe { api!(RedisModule_FreeString)(null_mut(), s) };
}

/// A new reference to `s` (a copy if `s` cannot be shared), for Redis to own.
fn hold(s: RawStr) -> Option<RawStr> {
    let f = opt!(RedisModule_HoldString)?;
    // SAFETY: `s` is a live string; a NULL context is allowed.
    let h = unsafe { f(null_mut(), s) };
    (!h.is_null()).then_some(h)
}

/// Prepares the rewrite, which the module's one command filter (`super::server`) runs. A
/// server lacking the APIs it needs gets a log line, and `native` then changes nothing.
pub fn register(ctx: &redis_module::Context) -> bool {
    READY.store(false, Relaxed);
    let needed = [
        opt!(RedisModule_CommandFilterArgInsert).is_some(),
        opt!(RedisModule_CommandFilterArgDelete).is_some(),
        opt!(RedisModule_CommandFilterArgReplace).is_some(),
        opt!(RedisModule_HoldString).is_some(),
        opt!(RedisModule_Call).is_some(),
        opt!(RedisModule_ReplyWithCallReply).is_some(),
        opt!(RedisModule_FreeCallReply).is_some(),
        opt!(RedisModule_GetDetachedThreadSafeContext).is_some(),
    ];
    if needed.contains(&false) {
        log(c"warning", "lockmod: this server lacks the APIs lockmod.redisson-scripts needs; it has no effect");
        return true;
    }
    let detached = opt!(RedisModule_GetDetachedThreadSafeContext).map_or(0, |f| {
        // SAFETY: OnLoad context; the detached context lives as long as the module.
        unsafe { f(ctx.ctx) as usize }
    });
    DETACHED.store(detached, Relaxed);
    if opt!(RedisModule_CommandFilterGetClientId).is_none() {
        // Known before the first script, once the server has loaded its ACL users.
        super::filter_probe::arm(detached as RawCtx);
    }
    // Made once: after a MODULE UNLOAD and LOAD the earlier strings are still valid.
    STRINGS.get_or_init(|| Strings {
        markers: ROWS
            .iter()
            .map(|r| rewrite::native_of(r.kind).map_or(0, |n| new_string(n.name().as_bytes()) as usize))
            .collect(),
        words: WORDS
            .iter()
            .copied()
            .chain(acl::COMMANDS.iter().map(|c| c.as_bytes()))
            .map(|w| (w, new_string(w) as usize))
            .collect(),
        bodies: ROWS.iter().map(|_| AtomicUsize::new(0)).collect(),
    });
    READY.store(true, Relaxed);
    true
}

/// Logs that the caller's ACL cannot be checked here (Redis 7.0: a filter cannot learn the
/// calling user), and what that means.
pub fn warn_if_acl_blind() {
    if opt!(RedisModule_CommandFilterGetClientId).is_none() {
        log(
            c"notice",
            "lockmod: redisson-scripts native on a server whose command filters cannot see the calling user \
             (Redis < 7.2): scripts run natively only while no ACL user is restricted (docs/configuration.md)",
        );
    }
}

/// The filter's part for `EVAL` (`eval`) and `EVALSHA` under `lockmod.redisson-scripts
/// native`: rewrites a call of a recognised script into its native command.
///
/// # Safety
/// `fctx` must be the live filter context of this call, with `argc` arguments.
pub(super) unsafe fn rewrite(fctx: Fctx, argc: c_int, eval: bool) {
    if !READY.load(Relaxed) || OWN_CALL.load(Relaxed) {
        return;
    }
    // SAFETY: as this function's.
    unsafe { filter(fctx, argc, eval) }
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
unsafe fn filter(fctx: Fctx, argc: c_int, eval: bool) {
    // SAFETY (whole function): `fctx` is live; its argument strings are owned by the client
    // and stay alive until we replace or delete them.
    let argc = argc.max(0) as usize;
    if argc < 4 {
        return;
    }
    let raws: Vec<RawStr> =
        (0..argc).map(|i| unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, i as c_int) }).collect();
    if raws.iter().any(|r| r.is_null()) {
        return;
    }
    let Some(nk) = parse_i64(str_bytes(raws[2])).and_then(|n| usize::try_from(n).ok()).filter(|n| *n <= argc - 3)
    else {
        return;
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
        return;
    };
    let kind = ROWS[row].kind;
    if rewrite::native_of(kind).is_none() {
        return stats::left_to_lua();
    }
    // SAFETY: a NULL context is allowed: only the server-wide flags are reported.
    let flags = unsafe { api!(RedisModule_GetContextFlags)(null_mut()) } as u64;
    if flags & NOT_HERE != 0 {
        return stats::left_to_lua();
    }
    let env = Env { sharded: config::sharded() };
    let Some(plan) = rewrite::plan(kind, keys, argv, env) else { return stats::left_to_lua() };
    // Redis 7.0: the caller is unknown, so only while nobody is restricted (`all_users`).
    if opt!(RedisModule_CommandFilterGetClientId).is_none()
        && !super::filter_probe::every_user_unrestricted(DETACHED.load(Relaxed) as RawCtx)
    {
        return stats::left_to_lua();
    }
    let Some(strings) = STRINGS.get() else { return };
    let marker = strings.markers[row] as RawStr;
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
        return stats::left_to_lua();
    }
    if eval {
        keep_body(strings, row, raws[1]);
    }
    let (Some(replace), Some(delete), Some(insert)) = (
        opt!(RedisModule_CommandFilterArgReplace),
        opt!(RedisModule_CommandFilterArgDelete),
        opt!(RedisModule_CommandFilterArgInsert),
    ) else {
        new.into_iter().for_each(free_string);
        return;
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
}

fn word(strings: &Strings, w: &[u8]) -> Option<RawStr> {
    strings.words.iter().find(|(k, _)| *k == w).map(|(_, s)| *s as RawStr)
}

/// Keeps the first `EVAL` body seen for a row: the script is then run by `EVAL` (a body the
/// client sent by `EVAL` may never have been loaded, so `EVALSHA` could say NOSCRIPT).
fn keep_body(strings: &Strings, row: usize, body: RawStr) {
    if strings.bodies[row].load(Relaxed) != 0 {
        return;
    }
    if let Some(h) = hold(body) {
        if strings.bodies[row].compare_exchange(0, h as usize, Relaxed, Relaxed).is_err() {
            free_string(h);
        }
    }
}

/// True if the calling user may run the script as sent, the native command, and every
/// command the script runs inside (see `crate::redisson::acl`). On a server whose filter
/// cannot name the client (Redis 7.0) true: `filter` has checked that no user is restricted.
///
/// # Safety
/// `fctx` must be live; `raws` and `native` hold live strings.
unsafe fn acl_allows(
    fctx: Fctx,
    strings: &Strings,
    raws: &[RawStr],
    native: &[RawStr],
    inner: &[(&'static str, acl::On)],
) -> bool {
    let Some(client_id) = opt!(RedisModule_CommandFilterGetClientId) else { return true };
    let (Some(user_name), Some(user_of), Some(check), Some(free_user)) = (
        opt!(RedisModule_GetClientUserNameById),
        opt!(RedisModule_GetModuleUserFromUserName),
        opt!(RedisModule_ACLCheckCommandPermissions),
        opt!(RedisModule_FreeModuleUser),
    ) else {
        return false;
    };
    let detached = DETACHED.load(Relaxed) as RawCtx;
    if detached.is_null() {
        return false;
    }
    // SAFETY: `fctx` is live; the detached context has no automatic memory, so the name is
    // ours to free.
    let name = unsafe { user_name(detached, client_id(fctx)) };
    if name.is_null() {
        // ENOTSUP: a client without a user (ACL does not apply to it); anything else (a
        // module's fake client, not found): leave the script alone.
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSUP);
    }
    // SAFETY: `name` is a live string; the user handle is freed below.
    let user = unsafe { user_of(name) };
    free_string(name);
    if user.is_null() {
        return false;
    }
    // SAFETY: live user handle and argument vectors; Redis only reads them.
    let may = |argv: &[RawStr]| unsafe { check(user, argv.as_ptr() as *mut RawStr, argv.len() as c_int) } == OK;
    let mut ok = may(raws) && may(native);
    for (cmd, on) in inner {
        if !ok {
            break;
        }
        let Some(c) = word(strings, cmd.as_bytes()) else {
            ok = false;
            break;
        };
        ok = match on {
            acl::On::Key(i) => may(&[c, raws[3 + i]]),
            acl::On::Own(b) => {
                let s = new_string(b);
                let r = may(&[c, s]);
                free_string(s);
                r
            }
        };
    }
    // SAFETY: the handle from GetModuleUserFromUserName, freed once.
    unsafe { free_user(user) };
    ok
}

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
