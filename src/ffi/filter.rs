//! The module's one command filter, and the safe view of a filtered call its owners get.
//!
//! Redis runs every registered filter before every command from a client, queued in `MULTI`,
//! or called by a script; its own part of that (a context and a list walk) costs about 70
//! instructions per filter per command on the whole server, even when the filter returns at
//! once. So the module registers exactly one, which reads `argv[0]` once and dispatches by its
//! first byte, length and name to the [`FilterHooks`] handed in at load (`crate::server`):
//! - `ACL` and `EXEC`: always (`crate::acl` caches ACL verdicts per user);
//! - `CONFIG RESETSTAT`: always (our counters reset with Redis' own);
//! - `EVAL`/`EVALSHA`/`EVAL_RO`: only under `lockmod.redisson-scripts native`
//!   (`crate::redisson`); `SCRIPT` (what the script cache holds, for it): always;
//! - a key named `...:timeout` that a `ZADD` (from a client, a transaction or a script) or an
//!   `EVAL`/`EVALSHA` names: an expirable semaphore's lease written by others, Redisson's Lua
//!   above all, whose reclaim timer must be armed (`crate::blocking::reclaim_find`). Scripts'
//!   keys always; `ZADD`'s only once the server has shown it holds leases ([`leases_seen`]), so
//!   a server that never uses an expirable semaphore pays one flag test per `ZADD`;
//! - any other command's keys: only while [`watching`] (`crate::watch`);
//! - `INCR`/`INCRBY` of a fencing counter: only while [`fencing`] (`crate::fencing`: counters
//!   move to a new era, or a script that names one runs), and a script's keys (`EVAL`,
//!   `EVALSHA`, `FCALL`) naming a counter once an era is in force.
//!
//! A [`FilterCall`] reads and rewrites the call's arguments; [`Owned`] strings are what a
//! rewrite hands Redis. The API calls used only here go through `opt!` (an `Option`): every one
//! exists in Redis 7.0 except the filter's client id (7.2).

use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering::Relaxed};

use redis_module::raw;

use super::args::str_bytes;
use super::{log, Ctx, RawStr, StrRef, OK};
use crate::core::config::redisson_native;

type Fctx = *mut raw::RedisModuleCommandFilterCtx;

/// Which script call the filter sees.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    EvalSha,
    Eval,
    /// `EVAL_RO`: never rewritten (Redisson's lock scripts write), but it caches its body.
    EvalRo,
}

/// What the filter does for each kind of command: functions of the layers that own the
/// reactions, handed in at load so that nothing here names them.
pub struct FilterHooks {
    /// `ACL ...`, with the command's name as sent.
    pub acl: fn(FilterCall, &[u8]),
    /// `EXEC`, with the command's name as sent.
    pub exec: fn(FilterCall, &[u8]),
    /// `CONFIG RESETSTAT`.
    pub reset_stats: fn(),
    /// `SCRIPT ...`.
    pub script: fn(FilterCall),
    /// `EVAL`, `EVALSHA` or `EVAL_RO` under `lockmod.redisson-scripts native`.
    pub eval: fn(FilterCall, Form),
    /// Any other command (named `cmd`), while [`watching`].
    pub other: fn(FilterCall, &[u8]),
    /// A `ZADD` to `key`, or a script naming `key`, a name ending in `:timeout`.
    pub timeout_key: fn(&[u8]),
    /// Any command (named `cmd`), while [`fencing`].
    pub fencing: fn(FilterCall, &[u8]),
    /// A script naming `key`, a fencing counter's name, once a fencing era is in force.
    pub token_key: fn(&[u8]),
}

static HOOKS: AtomicPtr<FilterHooks> = AtomicPtr::new(null_mut());

/// What the filter looks at in every command, one bit per owner: [`WATCH`] while other
/// commands' keys are looked at (`crate::watch` sets it), [`FENCE`] while `INCR`s of fencing
/// counters are (`crate::fencing`). A plain static, read once before every command in the
/// server: zero when neither looks, so the usual command pays one load and one test.
static LOOK: AtomicU8 = AtomicU8::new(0);
const WATCH: u8 = 1;
const FENCE: u8 = 2;

/// Whether other commands' keys are looked at.
#[inline]
pub fn watching() -> bool {
    LOOK.load(Relaxed) & WATCH != 0
}

/// Whether `INCR`s of fencing counters are looked at.
#[inline]
pub fn fencing() -> bool {
    LOOK.load(Relaxed) & FENCE != 0
}

/// Turns the look at `INCR`s of fencing counters on or off.
pub fn set_fencing(on: bool) {
    set_bit(FENCE, on);
}

fn set_bit(bit: u8, on: bool) {
    if on {
        LOOK.fetch_or(bit, Relaxed);
    } else {
        LOOK.fetch_and(!bit, Relaxed);
    }
}

/// Set once the server has shown it holds an expirable semaphore's leases (the module armed a
/// reclaim timer, a script named a `...:timeout` key): from then on the filter looks at every
/// `ZADD`'s key. Never cleared: a semaphore in use stays in use.
static LEASES_SEEN: AtomicBool = AtomicBool::new(false);

/// Whether `ZADD`s are looked at.
#[inline]
pub fn leases_seen() -> bool {
    LEASES_SEEN.load(Relaxed)
}

/// Leases were seen: look at `ZADD`s from now on.
pub fn set_leases_seen() {
    LEASES_SEEN.store(true, Relaxed);
}

/// Turns the look at other commands' keys on or off.
#[inline]
pub fn set_watching(on: bool) {
    set_bit(WATCH, on);
}

/// Registers the module's one command filter, calling `hooks`. False if Redis refused.
pub fn register(ctx: &redis_module::Context, hooks: &'static FilterHooks) -> bool {
    HOOKS.store(hooks as *const FilterHooks as *mut FilterHooks, Relaxed);
    // SAFETY: OnLoad context; the callback has the signature Redis expects. Not NOSELF: the
    // index must see what a script the module runs itself writes (`crate::redisson` skips its
    // own rewrite there instead).
    let filter = unsafe { api!(RedisModule_RegisterCommandFilter)(ctx.ctx, Some(on_command), 0) };
    !filter.is_null()
}

fn hooks() -> Option<&'static FilterHooks> {
    let p = HOOKS.load(Relaxed);
    // SAFETY: set only by `register`, from a `&'static FilterHooks`.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// The module's only command filter. Every name it acts on itself starts with `a` (`ACL`), `c`
/// (`CONFIG`), `e` (`EXEC`, `EVAL`, `EVALSHA`, `EVAL_RO`) or `f` (`FCALL`), or is `SCRIPT` (six
/// letters from `s`); any other command (`SET`, `GET`, `HSET`, ...) costs one argument fetch
/// and a byte test (two for a six-letter `s...`), and goes to the `other` hook only while
/// [`watching`], to the `fencing` hook only while [`fencing`].
extern "C" fn on_command(fctx: Fctx) {
    // SAFETY: `fctx` is live for this call; Redis answers NULL past the last argument (here,
    // for a command without arguments), and the argument strings are owned by the client.
    let cmd = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, 0) };
    if cmd.is_null() {
        return;
    }
    let name = str_bytes(cmd);
    let first = name.first().map(|b| b | 0x20);
    let special = match first {
        Some(b'a' | b'c' | b'e' | b'f') => true,
        Some(b's') => name.len() == 6,
        _ => false,
    };
    if special {
        on_some(fctx, name);
        return;
    }
    if first == Some(b'z') && leases_seen() && is_zadd(name) {
        on_zadd(fctx);
    }
    let look = LOOK.load(Relaxed);
    if look != 0 {
        look_at(FilterCall::new(fctx), name, look);
    }
}

/// A command while something looks at commands: to each hook whose bit is set in `look`.
/// (Their fast paths cannot panic; each guards what follows a hit itself.)
#[inline]
fn look_at(call: FilterCall, name: &[u8], look: u8) {
    let Some(h) = hooks() else { return };
    if look & WATCH != 0 {
        (h.other)(call, name);
    }
    if look & FENCE != 0 {
        (h.fencing)(call, name);
    }
}

/// `ZADD`, in any case: one 4-byte compare.
#[inline]
fn is_zadd(name: &[u8]) -> bool {
    match name {
        [a, b, c, d] => u32::from_le_bytes([*a, *b, *c, *d]) | 0x2020_2020 == u32::from_le_bytes(*b"zadd"),
        _ => false,
    }
}

/// The key names that may hold an expirable semaphore's leases end with this.
const TIMEOUT_SUFFIX: &[u8; 8] = b":timeout";

/// A `ZADD`: if its key ends with `:timeout`, the hook hears of it (out of line: the usual
/// `ZADD` pays an argument fetch and one 8-byte compare).
#[inline(never)]
fn on_zadd(fctx: Fctx) {
    // SAFETY: `fctx` is live for this call; NULL past the last argument.
    let key = unsafe { api!(RedisModule_CommandFilterArgGet)(fctx, 1) };
    if key.is_null() {
        return;
    }
    timeout_key(str_bytes(key));
}

/// A key a `ZADD` or a script names: if it ends with `:timeout`, the hook hears of it.
fn timeout_key(key: &[u8]) {
    if key.len() > TIMEOUT_SUFFIX.len() && key.ends_with(TIMEOUT_SUFFIX) {
        set_leases_seen();
        if let Some(h) = hooks() {
            if catch_unwind(AssertUnwindSafe(|| (h.timeout_key)(key))).is_err() {
                log(c"warning", "lockmod: internal error in the command filter");
            }
        }
    }
}

/// `EVAL`/`EVALSHA`/`FCALL` (any setting): its keys (`numkeys` of them after it) that end
/// with `:timeout`, and, once a fencing era is in force, those that name a token counter. A
/// script's own cost dwarfs the look.
fn script_keys(call: FilterCall) {
    let Some(n) = call.arg(2).and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok()) else { return };
    let last = call.argc().min(n.saturating_add(3));
    let fenced = crate::core::era::era() > 0;
    for key in (3..last).filter_map(|i| call.arg(i)) {
        timeout_key(key);
        if fenced && crate::core::names::is_token(key) {
            if let Some(h) = hooks() {
                if catch_unwind(AssertUnwindSafe(|| (h.token_key)(key))).is_err() {
                    log(c"warning", "lockmod: internal error in the command filter");
                }
            }
        }
    }
}

/// A command whose name starts with `a`, `c`, `e` or `f`, or a six-letter one starting with
/// `s`, out of line (the usual command pays no stack frame for it), a panic logged rather than
/// unwound into Redis.
#[inline(never)]
fn on_some(fctx: Fctx, name: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| on_special(fctx, name))).is_err() {
        log(c"warning", "lockmod: internal error in the command filter");
    }
}

/// A command whose name starts with `a`, `c`, `e` or `f`, or a six-letter one starting with
/// `s`: dispatched by its length and name.
fn on_special(fctx: Fctx, name: &[u8]) {
    let Some(h) = hooks() else { return };
    let call = FilterCall::new(fctx);
    let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
    let look = LOOK.load(Relaxed);
    match name.len() {
        3 if is(b"acl") => (h.acl)(call, name),
        4 if is(b"exec") => (h.exec)(call, name),
        6 if call.argc() == 2 && is(b"config") => {
            if call.arg(1).is_some_and(|s| s.eq_ignore_ascii_case(b"resetstat")) {
                (h.reset_stats)();
            }
        }
        // Whatever the setting: a flush queued before `native` is switched on runs after.
        6 if is(b"script") => (h.script)(call),
        4 | 7 if is(b"eval") || is(b"evalsha") => {
            // Before a rewrite, which replaces the arguments.
            script_keys(call);
            if redisson_native() {
                let form = if name.len() == 4 { Form::Eval } else { Form::EvalSha };
                (h.eval)(call, form);
            } else if look != 0 {
                look_at(call, name, look);
            }
        }
        7 if redisson_native() && is(b"eval_ro") => (h.eval)(call, Form::EvalRo),
        5 if is(b"fcall") => {
            script_keys(call);
            if look != 0 {
                look_at(call, name, look);
            }
        }
        _ => {
            if look != 0 {
                look_at(call, name, look);
            }
        }
    }
}

/// The command the filter runs for, valid for that filter call only (the hooks get it by
/// value and cannot keep it: it is not `'static`, and nothing stores it).
#[derive(Clone, Copy)]
pub struct FilterCall<'a> {
    fctx: Fctx,
    _call: std::marker::PhantomData<&'a ()>,
}

impl<'a> FilterCall<'a> {
    fn new(fctx: Fctx) -> FilterCall<'a> {
        FilterCall { fctx, _call: std::marker::PhantomData }
    }

    /// The number of arguments, the command's name included.
    pub fn argc(&self) -> usize {
        // SAFETY: `fctx` is live for this filter call.
        let n = unsafe { api!(RedisModule_CommandFilterArgsCount)(self.fctx) };
        n.max(0) as usize
    }

    /// Argument `i` as a module string, or None past the last one.
    pub fn arg_str(&self, i: usize) -> Option<StrRef<'a>> {
        let i = c_int::try_from(i).ok()?;
        // SAFETY: `fctx` is live for this filter call and its argument strings are owned by the
        // client, alive until replaced or deleted (only `replace_all` does, consuming the view's
        // use); Redis answers NULL for a position past the last argument.
        let s = unsafe { api!(RedisModule_CommandFilterArgGet)(self.fctx, i) };
        (!s.is_null()).then(|| StrRef::from_raw(s))
    }

    /// The bytes of argument `i`, or None past the last one.
    pub fn arg(&self, i: usize) -> Option<&'a [u8]> {
        self.arg_str(i).map(|s| s.bytes())
    }

    /// Every argument, or None if any could not be read.
    pub fn args(&self) -> Option<Vec<StrRef<'a>>> {
        (0..self.argc()).map(|i| self.arg_str(i)).collect()
    }

    /// The client the filter runs for, and whether it is inside MULTI (so the command is only
    /// being queued); `None` on a server without the API (Redis 7.0).
    pub fn client(&self) -> Option<(u64, bool)> {
        // SAFETY: the live filter context of the running filter.
        unsafe { filter_client(self.fctx) }
    }

    /// The calling client's id; `None` on a server whose filter cannot name it (Redis 7.0).
    pub fn client_id(&self) -> Option<u64> {
        let get_id = opt!(RedisModule_CommandFilterGetClientId)?;
        // SAFETY: `fctx` is the live filter context of the running filter.
        Some(unsafe { get_id(self.fctx) })
    }

    /// Replaces the whole call by `new` (the command's name first): Redis owns each string
    /// from here on. False, freeing them, on a server without the APIs.
    pub fn replace_all(self, new: Vec<Owned>) -> bool {
        let (Some(replace), Some(delete), Some(insert)) = (
            opt!(RedisModule_CommandFilterArgReplace),
            opt!(RedisModule_CommandFilterArgDelete),
            opt!(RedisModule_CommandFilterArgInsert),
        ) else {
            return false;
        };
        let argc = self.argc() as c_int;
        let mut new = new.into_iter();
        if let Some(first) = new.next() {
            // SAFETY: `fctx` is live and has an argument 0; the string is a reference we own,
            // which Redis takes over.
            unsafe { replace(self.fctx, 0, first.into_raw()) };
        }
        // From the end: each delete is then O(1).
        for i in (1..argc).rev() {
            // SAFETY: `fctx` is live; `i` is the last argument left at each step.
            unsafe { delete(self.fctx, i) };
        }
        for (j, s) in new.enumerate() {
            // SAFETY: `fctx` is live; position `1 + j` is at most one past the last argument;
            // the string is a reference we own, which Redis takes over.
            unsafe { insert(self.fctx, (1 + j) as c_int, s.into_raw()) };
        }
        true
    }
}

/// The client a command filter runs for, and whether it is inside MULTI (so the command is
/// only being queued); `None` on a server without the API (Redis 7.0).
///
/// # Safety
/// `fctx` must be the live context of the command filter that is running.
unsafe fn filter_client(fctx: Fctx) -> Option<(u64, bool)> {
    // SAFETY: read-only access to pointers Redis wrote during RedisModule_Init.
    let get_id = unsafe { raw::RedisModule_CommandFilterGetClientId }?;
    // SAFETY: `fctx` is the live filter context of the running filter.
    let id = unsafe { get_id(fctx) };
    // SAFETY: an all-zero client info is valid; Redis fills it for a versioned struct.
    let mut info: raw::RedisModuleClientInfo = unsafe { std::mem::zeroed() };
    info.version = u64::from(raw::REDISMODULE_CLIENTINFO_VERSION);
    // SAFETY: `info` is a writable client-info struct of the version declared in it.
    let found = unsafe { api!(RedisModule_GetClientInfoById)(&mut info as *mut _ as *mut std::ffi::c_void, id) } == OK;
    // Not a connection (a module's RM_Call): the command runs now, it is not queued.
    Some((id, found && info.flags & u64::from(raw::REDISMODULE_CLIENTINFO_FLAG_MULTI) != 0))
}

/// Whether this server has every API a rewrite of the call needs.
pub fn can_rewrite() -> bool {
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
    !needed.contains(&false)
}

/// Whether a filter can name its calling client (Redis 7.2+).
pub fn can_name_client() -> bool {
    opt!(RedisModule_CommandFilterGetClientId).is_some()
}

/// The server-wide context flags (no client: a NULL context reports only those).
pub fn server_flags() -> u64 {
    // SAFETY: a NULL context is allowed: only the server-wide flags are reported.
    unsafe { api!(RedisModule_GetContextFlags)(null_mut()) as u64 }
}

/// A context without a client, for API calls that want one outside a command: made by each
/// load (the module's memory outlives a `MODULE UNLOAD`; a context must not).
static DETACHED: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(null_mut());

/// Makes the context [`detached`] returns, at load.
pub fn make_detached(ctx: &redis_module::Context) {
    let detached = opt!(RedisModule_GetDetachedThreadSafeContext).map_or(null_mut(), |f| {
        // SAFETY: OnLoad context; the detached context lives as long as the module.
        unsafe { f(ctx.ctx) }
    });
    DETACHED.store(detached, Relaxed);
}

/// The context made by [`make_detached`], if any.
pub fn detached() -> Option<Ctx> {
    let p = DETACHED.load(Relaxed);
    (!p.is_null()).then_some(Ctx(p))
}

/// A module string the module owns outside any context (made with a NULL context): freed on
/// drop, unless handed over to Redis.
pub struct Owned(RawStr);

// SAFETY: only Redis' main thread makes, uses and frees module strings; the module's statics
// that keep them are only there because a module cannot own anything else for its lifetime.
unsafe impl Send for Owned {}
// SAFETY: as above.
unsafe impl Sync for Owned {}

impl Owned {
    /// A new string with the bytes `b`.
    pub fn new(b: &[u8]) -> Owned {
        // SAFETY: a NULL context is allowed (no automatic memory); Redis copies the bytes. The
        // string is ours until handed to Redis or freed.
        Owned(unsafe { api!(RedisModule_CreateString)(null_mut(), b.as_ptr() as *const c_char, b.len()) })
    }

    /// A new reference to `s` (a copy if `s` cannot be shared); `None` on a server without
    /// the API, or if Redis would not.
    pub fn hold(s: StrRef) -> Option<Owned> {
        let f = opt!(RedisModule_HoldString)?;
        // SAFETY: `s` is a live string; a NULL context is allowed.
        let h = unsafe { f(null_mut(), s.ptr) };
        (!h.is_null()).then_some(Owned(h))
    }

    pub fn as_ref(&self) -> StrRef<'_> {
        StrRef::from_raw(self.0)
    }

    /// The string's identity (its address): what a command compares an argument with.
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    /// Hands the reference over (to Redis).
    pub(super) fn into_raw(self) -> RawStr {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a string we own a reference to; a NULL context is allowed.
            unsafe { api!(RedisModule_FreeString)(null_mut(), self.0) };
        }
    }
}
