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
//!
//! This file holds what the parts share (the module strings, the flags) and the setup at load;
//! `call` rewrites a call, `permission` checks the caller's ACL for it, `dispatch` runs the
//! calls it rewrote, `learn` notes what changes the script cache (`crate::redisson::cache`).

use std::os::raw::c_char;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use redis_module::raw;

use super::{log, RawCtx, RawStr};
use crate::redisson::acl;
use crate::redisson::rewrite;
use crate::redisson::table::ROWS;

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
    /// Per table row, the native command's name for a rewritten `EVALSHA` (0 for a row left
    /// to Lua), and the same text for a rewritten `EVAL`: a call whose script turns out not to
    /// be cached answers as its own form would (`NOSCRIPT`, or running the body).
    markers: Vec<usize>,
    eval_markers: Vec<usize>,
    /// Every marker, sorted, with its row and whether it stands for `EVAL`.
    lookup: Vec<(usize, usize, bool)>,
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
    STRINGS.get_or_init(|| {
        let made = || -> Vec<usize> {
            ROWS.iter()
                .map(|r| rewrite::native_of(r.kind).map_or(0, |n| new_string(n.name().as_bytes()) as usize))
                .collect()
        };
        let (markers, eval_markers) = (made(), made());
        let mut lookup: Vec<(usize, usize, bool)> = markers
            .iter()
            .enumerate()
            .map(|(row, m)| (*m, row, false))
            .chain(eval_markers.iter().enumerate().map(|(row, m)| (*m, row, true)))
            .filter(|(m, _, _)| *m != 0)
            .collect();
        lookup.sort_unstable();
        Strings {
            markers,
            eval_markers,
            lookup,
            words: WORDS
                .iter()
                .copied()
                .chain(acl::COMMANDS.iter().map(|c| c.as_bytes()))
                .map(|w| (w, new_string(w) as usize))
                .collect(),
            bodies: ROWS.iter().map(|_| AtomicUsize::new(0)).collect(),
        }
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

fn word(strings: &Strings, w: &[u8]) -> Option<RawStr> {
    strings.words.iter().find(|(k, _)| *k == w).map(|(_, s)| *s as RawStr)
}

mod call;
mod dispatch;
mod learn;
mod permission;

pub(super) use call::{rewrite, Form};
pub use dispatch::dispatch_scripted;
pub(super) use learn::on_script;
