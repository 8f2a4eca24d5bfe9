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
//! answer carries what undoes it ([`BlockCallbacks::Undelivered`]). The disconnect callback is
//! the moment Redis decides: it runs inside the command that drops the answer, before that
//! command replies, with the answer as the context's private data, so the callback takes what
//! undoes it out of the answer and hands it to [`BlockCallbacks::on_disconnect`]. Should an
//! answer still be freed unwritten with it inside, [`BlockCallbacks::on_undelivered`] gets it.
//!
//! Before 7.4 a timeout in between (the BLOCK time running out, `CLIENT UNBLOCK ...
//! TIMEOUT`) drops the answer too, with no reply at all (7.0), or trips an assertion (7.2):
//! there the code that answers keeps the client parked until Redis is about to write answers
//! (`answers_due`).

use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};

use redis_module::raw;

use super::answers_due;
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
    /// has not written yet, which Redis now drops: `dropped` is what that answer carried.
    /// From inside the command (or the disconnect) that ends the wait, before it replies.
    fn on_disconnect(ctx: &Ctx, bc: usize, dropped: Option<Self::Undelivered>);

    /// An answer given with [`BlockedClient::answer`] was freed unwritten with its
    /// `Undelivered` still inside (a server that did not show it to `on_disconnect`). Called
    /// while Redis handles unblocked clients: no place to write.
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
    answers_due::answer_freed(&ctx);
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
    // SAFETY: the context Redis made for this callback, whose private data is the handle's:
    // null until it is answered, then the `Sent` box `answer` handed over on a handle of `C`,
    // which Redis frees (`free_sent`) only after this callback, and nobody touches meanwhile.
    let sent = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx) as *mut Sent<C::Undelivered> };
    // SAFETY: null or a live `Sent` (see above).
    let dropped = unsafe { sent.as_mut() }.and_then(|sent| sent.undelivered.take());
    let event = if dropped.is_some() { c"lockmod-give-back" } else { c"lockmod-disconnect" };
    let ctx = Ctx(ctx);
    timed(ctx.0, event, || guarded("a BLOCK disconnect", (), || C::on_disconnect(&ctx, bc as usize, dropped)));
}
