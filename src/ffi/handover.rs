//! Redis 7.2 and Valkey 7.2: running the module's hook right before Redis writes the answers
//! of unblocked clients, from inside `moduleHandleBlockedClients` itself (`answers_due`'s
//! notes say why 7.2 needs it).
//!
//! Redis walks its list of unblocked clients there, and frees each handle's private data
//! (`free_privdata`) as it goes. So the module keeps a handle of its own that nothing else can
//! release, and releases it (`RM_UnblockClient`) as soon as an answer waits: when Redis frees
//! its private data, the hook runs and hands the waiting answers over, each appended to the
//! very list Redis is walking. Redis writes them in the same walk, with no command run in
//! between, and sets each answered client's wait offset as usual (a `WAIT` after a grant
//! covers it). Until then the answered clients stay parked in Redis' eyes, and their own
//! callbacks say what a timeout or an error means.
//!
//! The handle comes from `lockmod.handover`, a command of the module's own that it calls with
//! `RM_Call(..., "K")` (7.2's calls that may block): it blocks the call's own client, which no
//! one can name (`CLIENT UNBLOCK` looks clients up among connections) and which has no
//! timeout. Called inside `MULTI` or a script, `RM_BlockClient` does not block but still
//! returns a handle, without a client: as good. The client and the call's reply are Redis'
//! to free once the handle is released. The command refuses anyone else.

use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

use redis_module::raw;

use super::latency::timed;
use super::log::guarded;
use super::{Ctx, RawCtx, RawStr, OK};

/// What a released handle runs: `answers_due`'s hook (its `SleepHook`, spelled out here so
/// that this file, below `answers_due`, does not import it back).
type Hook = fn(&Ctx) -> bool;

/// The module's own command that makes the handle.
pub const COMMAND: &CStr = c"lockmod.handover";

/// Its flags: an admin command (ACL), not shown by `MONITOR` or the slow log, that runs
/// whenever the module may answer (loading, a stale replica, a busy script).
const FLAGS: &CStr = c"admin no-monitor no-slowlog allow-loading allow-stale allow-busy";

thread_local! {
    /// The module is calling [`COMMAND`] itself.
    static CALLING: Cell<bool> = const { Cell::new(false) };
    /// The handle the call made.
    static MADE: Cell<*mut raw::RedisModuleBlockedClient> = const { Cell::new(std::ptr::null_mut()) };
    /// A handle is released and its hook not run yet.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// The hook the released handle runs.
    static HOOK: Cell<Option<Hook>> = const { Cell::new(None) };
}

/// Registers [`COMMAND`] (at load, where the module answers through it), in the ACL
/// categories `@admin` and `@dangerous`, as Redis' own admin commands (a module command gets
/// none from its flags). False if Redis refused the command.
pub fn register(ctx: &redis_module::Context) -> bool {
    if !super::create_command(ctx, COMMAND, command, FLAGS, 0, 0, 0) {
        return false;
    }
    // SAFETY: the OnLoad context; the name is NUL-terminated.
    let handle = unsafe { api!(RedisModule_GetCommand)(ctx.ctx, COMMAND.as_ptr()) };
    if let Some(set) = opt!(RedisModule_SetCommandACLCategories) {
        // SAFETY: a live command of this module (checked not null); a NUL-terminated list.
        if !handle.is_null() && unsafe { set(handle, c"admin dangerous".as_ptr()) } != OK {
            super::log(c"warning", "lockmod: ACL categories of lockmod.handover rejected");
        }
    }
    true
}

/// The private data of a released handle: not null, so that Redis calls [`released`].
static MARK: u8 = 0;

/// Runs `hook` once, right before Redis next writes answers (see the file's notes). True if a
/// handle is on its way; false if none could be made in this context (one without a client,
/// which `RM_Call` needs: the caller tries again from a timer).
pub fn arm(ctx: &Ctx, hook: Hook) -> bool {
    if ARMED.with(Cell::get) {
        return true;
    }
    let Some(bc) = make(ctx) else { return false };
    HOOK.with(|h| h.set(Some(hook)));
    ARMED.with(|a| a.set(true));
    // SAFETY: `bc` is the live handle `lockmod.handover` just made, released once, here; the
    // private data is a static Redis only hands back to `released`.
    unsafe { api!(RedisModule_UnblockClient)(bc, &MARK as *const u8 as *mut c_void) };
    true
}

/// Calls [`COMMAND`] and returns the handle it made.
fn make(ctx: &Ctx) -> Option<*mut raw::RedisModuleBlockedClient> {
    // RM_Call reads the database of the context's client.
    if ctx.client_id() == 0 {
        return None;
    }
    let call = opt!(RedisModule_Call)?;
    CALLING.with(|c| c.set(true));
    MADE.with(|m| m.set(std::ptr::null_mut()));
    // SAFETY: a live context with a client; the command name and the format ("K": may block,
    // no arguments) are NUL-terminated.
    let reply = unsafe { call(ctx.0, COMMAND.as_ptr(), c"K".as_ptr()) };
    CALLING.with(|c| c.set(false));
    if !reply.is_null() {
        // SAFETY: a live reply (the promise of the blocked call, or an error inside MULTI or a
        // script), freed once; Redis keeps the blocked call's client until it is released.
        unsafe { api!(RedisModule_FreeCallReply)(reply) };
    }
    let bc = MADE.with(|m| m.replace(std::ptr::null_mut()));
    (!bc.is_null()).then_some(bc)
}

/// `lockmod.handover`: blocks the module's own call for [`make`]; refuses anyone else.
extern "C" fn command(ctx: RawCtx, _argv: *mut RawStr, _argc: c_int) -> c_int {
    let ctx = Ctx(ctx);
    if !CALLING.with(Cell::get) {
        ctx.reply_error("ERR lockmod.handover is the module's own, not for clients");
        return OK;
    }
    // SAFETY: a live command context. No reply, timeout or disconnect callback: the client is
    // the module's own call, which nothing times out or disconnects; `released` takes the
    // private data `arm` gives.
    let bc = unsafe { api!(RedisModule_BlockClient)(ctx.0, None, None, Some(released), 0) };
    MADE.with(|m| m.set(bc));
    OK
}

/// Redis frees the released handle's private data, walking its unblocked clients: the hook.
extern "C" fn released(ctx: RawCtx, _privdata: *mut c_void) {
    ARMED.with(|a| a.set(false));
    let Some(hook) = HOOK.with(|h| h.take()) else { return };
    let ctx = Ctx(ctx);
    timed(ctx.0, c"lockmod-answers", || guarded("the hand-over hook", false, || hook(&ctx)));
}
