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
//!   above all, whose reclaim timer must be armed (`crate::blocking::reclaim::find`). Scripts'
//!   keys always; `ZADD`'s only once the server has shown it holds leases ([`leases_seen`]), so
//!   a server that never uses an expirable semaphore pays one flag test per `ZADD`;
//! - any other command's keys: only while [`watching`] (`crate::watch`);
//! - `INCR`/`INCRBY` of a fencing counter: only while [`fencing`] (`crate::fencing`: counters
//!   move to a new era, or a script that names one runs), and a script's keys (`EVAL`,
//!   `EVALSHA`, `FCALL`) naming a counter once an era is in force.
//!
//! A [`FilterCall`] reads and rewrites the call's arguments; [`Owned`] strings are what a
//! rewrite hands Redis (both in `super::filter_call`). The API calls used only there go through
//! `opt!` (an `Option`): every one exists in Redis 7.0 except the filter's client id (7.2).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering::Relaxed};

use redis_module::raw;

use super::args::str_bytes;
use super::log;
use crate::core::config::redisson_native;

pub use super::filter_call::{can_name_client, can_rewrite, detached, make_detached, server_flags, FilterCall, Owned};

pub(super) type Fctx = *mut raw::RedisModuleCommandFilterCtx;

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
/// with `:timeout`, and, once a fencing era is in force or while the era is not in the node's
/// file yet, those that name a token counter. A script's own cost dwarfs the look.
fn script_keys(call: FilterCall) {
    let Some(n) = call.arg(2).and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok()) else { return };
    let last = call.argc().min(n.saturating_add(3));
    let fenced = crate::core::lock::era::era() > 0 || !crate::core::lock::era::is_open();
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
