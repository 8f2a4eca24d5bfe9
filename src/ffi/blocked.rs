//! Blocked clients: parking a client with `RM_BlockClient`, answering it, and the C callbacks
//! Redis calls about it. What a timeout, a disconnect or a lost answer means belongs to the
//! code that parked the client: it names its [`BlockCallbacks`] when it parks one, and
//! trampolines monomorphised for them forward to it, so this file imports none of the code it
//! calls back.
//!
//! An answer handed to Redis (`RM_UnblockClient`) is written to the client only later, when
//! Redis handles unblocked clients before it sleeps, and only if the client is still there
//! then. A `CLIENT UNBLOCK ... ERROR`, a `CLIENT KILL` or a disconnect in between drops it:
//! Redis calls the disconnect callback, skips the reply callback and frees the answer. So the
//! answer carries what undoes it ([`BlockCallbacks::Undelivered`]), and whether it was written
//! is known when Redis frees it: [`BlockCallbacks::on_undelivered`] gets it back otherwise.
//!
//! Redis 7.0 (and 7.2) also drop an answer on a timeout in between (the BLOCK time running
//! out, or `CLIENT UNBLOCK ... TIMEOUT`): the timeout callback is skipped, so the client gets
//! no reply at all (7.4 and Valkey 8 ignore the timeout and write the answer). There, [`answers_wait`] says
//! so, and the code that answers keeps the client parked until [`before_next_sleep`]'s hook,
//! which 7.0 runs right before it handles unblocked clients.

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use redis_module::raw;

use super::latency::timed;
use super::log::guarded;
use super::{Ctx, RawCtx, RawStr, OK};
use crate::core::Reply;

/// What happens to a parked client besides its answer by [`BlockedClient::answer`]. Runs on
/// the main thread; a panic is logged, never unwound.
pub trait BlockCallbacks: 'static {
    /// What an answer carries to be undone if it never reaches the client (a grant to give
    /// back).
    type Undelivered: 'static;

    /// The client's time ran out, or `CLIENT UNBLOCK ... TIMEOUT`: the reply it gets (it is
    /// released right after). From the blocked client's context.
    fn on_timeout(ctx: &Ctx) -> Reply;

    /// The client went away (or `CLIENT UNBLOCK ... ERROR` released it); `bc` is its handle's
    /// [`BlockedClient::id`]. Also called for a client already answered whose answer Redis
    /// has not written yet (that answer then comes back through `on_undelivered`).
    fn on_disconnect(ctx: &Ctx, bc: usize);

    /// An answer given with [`BlockedClient::answer`] was dropped unwritten (see the file's
    /// notes). Called while Redis handles unblocked clients: no place to write.
    fn on_undelivered(ctx: &Ctx, what: Self::Undelivered);
}

/// A client parked with `RM_BlockClient` by `C`. Released exactly once, by
/// [`BlockedClient::answer`] or [`BlockedClient::unblock`] (it is not `Clone`, and both
/// consume it).
pub struct BlockedClient<C: BlockCallbacks>(*mut raw::RedisModuleBlockedClient, PhantomData<fn() -> C>);

/// The private data of an answered client: its reply, whether Redis wrote it, and what undoes
/// it otherwise.
struct Sent<U> {
    reply: Reply,
    delivered: bool,
    undelivered: Option<U>,
}

impl<C: BlockCallbacks> BlockedClient<C> {
    /// An identity for matching the disconnect callback's handle.
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    /// A handle that stands for nothing, for unit tests of the registry (never unblocked).
    #[cfg(test)]
    pub fn fake(id: usize) -> Self {
        BlockedClient(id as *mut raw::RedisModuleBlockedClient, PhantomData)
    }

    /// Releases the client. With a reply, the reply callback writes it to the client; without
    /// one (after a timeout reply, or a disconnect) Redis just frees the handle.
    pub fn unblock(self, reply: Option<Reply>) {
        match reply {
            Some(r) => self.answer(r, None),
            None => self.release(std::ptr::null_mut()),
        }
    }

    /// Releases the client with `reply`; if Redis drops the reply unwritten, `undelivered`
    /// comes back to [`BlockCallbacks::on_undelivered`].
    pub fn answer(self, reply: Reply, undelivered: Option<C::Undelivered>) {
        let sent = Box::new(Sent { reply, delivered: false, undelivered });
        self.release(Box::into_raw(sent) as *mut c_void);
    }

    fn release(self, privdata: *mut c_void) {
        // SAFETY: `self.0` is a live handle not yet released (this is its only release, as the
        // type is consumed); ownership of `privdata` (null, or a `Box<Sent<C::Undelivered>>`)
        // passes to Redis, which hands it back to `free_sent::<C>` exactly once.
        unsafe { api!(RedisModule_UnblockClient)(self.0, privdata) };
    }
}

/// Module-wide blocked-client sentinel flags that forbid parking (MULTI, Lua, DENY_BLOCKING).
const CANNOT_BLOCK: u64 = (raw::REDISMODULE_CTX_FLAGS_MULTI
    | raw::REDISMODULE_CTX_FLAGS_LUA
    | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING) as u64;

impl Ctx {
    /// True when the client may be parked: not inside MULTI/EXEC, a script, or another context
    /// that forbids blocking (there BLOCK behaves as the non-blocking form, as BLPOP does).
    pub fn can_block(&self) -> bool {
        self.flags() & CANNOT_BLOCK == 0
    }

    /// Parks the calling client for up to `timeout_ms` (0 = no limit); `C` says what its
    /// timeout, its disconnect and a lost answer do.
    pub fn block_client<C: BlockCallbacks>(&self, timeout_ms: i64) -> Option<BlockedClient<C>> {
        // SAFETY: live command context; the callbacks are `extern "C"` functions of this file
        // with the signatures Redis expects, monomorphised for `C`, whose private data type
        // (`Sent<C::Undelivered>`) is the one `BlockedClient<C>` hands over.
        let bc = unsafe {
            api!(RedisModule_BlockClient)(
                self.0,
                Some(on_reply::<C>),
                Some(on_timeout::<C>),
                Some(free_sent::<C>),
                timeout_ms,
            )
        };
        if bc.is_null() {
            return None;
        }
        // SAFETY: `bc` was just returned by RM_BlockClient and is live.
        unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect::<C>)) };
        Some(BlockedClient(bc, PhantomData))
    }
}

/// Whether an answer must wait for [`before_next_sleep`]'s hook: on a server that drops an
/// answer on a timeout before writing it (Redis before 7.4; see the file's notes) and runs
/// the hook right before it writes answers (Redis before 7.2). On 7.2, which does the first
/// but not the second, nothing here makes a timeout racing an answer safe: that release trips
/// an assertion of its own on it (fixed in 7.4, redis/redis#13015).
pub fn answers_wait() -> bool {
    // 0: not known yet, 1: no, 2: yes.
    static WAIT: AtomicU8 = AtomicU8::new(0);
    match WAIT.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            // SAFETY: no arguments; returns the server's version as 0x00MMmmpp.
            let version = unsafe { api!(RedisModule_GetServerVersion)() };
            let wait = version < 0x0007_0200;
            WAIT.store(if wait { 2 } else { 1 }, Relaxed);
            wait
        }
    }
}

/// A hook of [`before_next_sleep`]: true if it handed answers to Redis.
pub type SleepHook = fn(&Ctx) -> bool;

thread_local! {
    /// The hook of [`before_next_sleep`], while the event is subscribed.
    static HOOK: Cell<Option<SleepHook>> = const { Cell::new(None) };
    /// The hook is to run at the next sleep.
    static DUE: Cell<bool> = const { Cell::new(false) };
    /// The hook is running: the event must not be unsubscribed now (Redis reads its listener
    /// after the call, so freeing it from inside would be a use after free).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Runs `hook` once, at the next sleep of the event loop (Redis 7.0: right before it writes the
/// answers of unblocked clients); the hook says whether it handed answers to Redis. False if
/// Redis refused. `ctx` must belong to the module (a command, timer or callback context).
///
/// The event (`EVENTLOOP`, which Redis fires before and after every sleep, a context made and
/// freed each time) is subscribed only until the hook has run: it is dropped when Redis frees
/// the first answer handed over (right after the hook, outside the event), or by a 0 ms timer
/// when the hook handed none.
///
/// The event loop is woken, so that it does not sleep before the hook runs: a call made in
/// `beforeSleep` after the event (a command of a client Redis just unblocked, run by
/// `processUnblockedClients`) would otherwise leave its answer until the next timer, 5 to
/// 100 ms later.
pub fn before_next_sleep(ctx: &Ctx, hook: SleepHook) -> bool {
    if !DUE.with(|d| d.replace(true)) {
        // SAFETY: a main-thread call with a callback of the signature Redis expects and no
        // data. It writes a byte to the module pipe, so the next poll returns at once.
        unsafe { api!(RedisModule_EventLoopAddOneShot)(Some(wake), std::ptr::null_mut()) };
    }
    if HOOK.with(Cell::get).is_some() {
        return true;
    }
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
    // SAFETY: a live context of this module; the callback has the signature Redis expects.
    let ok = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, event, Some(on_event_loop)) } == OK;
    if ok {
        HOOK.with(|h| h.set(Some(hook)));
    } else {
        DUE.with(|d| d.set(false));
    }
    ok
}

/// The wake-up of [`before_next_sleep`]: the poll has returned, which was all it was for.
extern "C" fn wake(_data: *mut c_void) {}

/// Drops the event once the hook has run and is not due again. Not from inside the event.
fn unsubscribe_when_done(ctx: &Ctx) {
    if IN_HOOK.with(Cell::get) || DUE.with(Cell::get) || HOOK.with(Cell::get).is_none() {
        return;
    }
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
    // SAFETY: a live context of this module, outside the event's own callback (checked
    // above); a null callback removes the listener.
    if unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, event, None) } == OK {
        HOOK.with(|h| h.set(None));
    }
}

extern "C" fn on_event_loop(ctx: RawCtx, _eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    if subevent != raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP || !DUE.with(|d| d.replace(false)) {
        return;
    }
    let Some(hook) = HOOK.with(Cell::get) else { return };
    let ctx = Ctx(ctx);
    IN_HOOK.with(|h| h.set(true));
    let handed = timed(ctx.0, c"lockmod-answers", || guarded("the before-sleep hook", false, || hook(&ctx)));
    IN_HOOK.with(|h| h.set(false));
    if !handed {
        ctx.create_plain_timer(0, unsubscribe_when_done);
    }
}

extern "C" fn on_reply<C: BlockCallbacks>(ctx: RawCtx, _argv: *mut RawStr, _argc: c_int) -> c_int {
    // SAFETY: called by Redis with the blocked client's context; the private data is the
    // `Sent` boxed by `answer` (or null), owned by Redis until `free_sent`, and touched by no
    // one else meanwhile.
    let sent = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx) as *mut Sent<C::Undelivered> };
    let ctx = Ctx(ctx);
    // SAFETY: non-null, points to a live `Sent` (see above).
    match unsafe { sent.as_mut() } {
        Some(sent) => {
            ctx.reply(&sent.reply);
            sent.delivered = true;
        }
        None => ctx.reply(&Reply::Nil),
    }
    OK
}

extern "C" fn free_sent<C: BlockCallbacks>(ctx: RawCtx, privdata: *mut c_void) {
    if privdata.is_null() {
        return;
    }
    // SAFETY: `privdata` is the `Box<Sent<C::Undelivered>>` leaked by `answer` on a handle of
    // `C`; Redis frees it once.
    let sent = unsafe { Box::from_raw(privdata as *mut Sent<C::Undelivered>) };
    let ctx = Ctx(ctx);
    // Redis handles unblocked clients after the before-sleep event: the hook that handed this
    // answer over has run.
    unsubscribe_when_done(&ctx);
    if sent.delivered {
        return;
    }
    if let Some(what) = sent.undelivered {
        guarded("a lost BLOCK answer", (), || C::on_undelivered(&ctx, what));
    }
}

extern "C" fn on_timeout<C: BlockCallbacks>(ctx: RawCtx, _argv: *mut RawStr, _argc: c_int) -> c_int {
    let ctx = Ctx(ctx);
    let reply = timed(ctx.0, c"lockmod-timeout", || guarded("a BLOCK timeout", Reply::Nil, || C::on_timeout(&ctx)));
    ctx.reply(&reply);
    OK
}

extern "C" fn on_disconnect<C: BlockCallbacks>(ctx: RawCtx, bc: *mut raw::RedisModuleBlockedClient) {
    let ctx = Ctx(ctx);
    timed(ctx.0, c"lockmod-disconnect", || guarded("a BLOCK disconnect", (), || C::on_disconnect(&ctx, bc as usize)));
}
