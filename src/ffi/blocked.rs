//! Blocked clients: parking a client with `RM_BlockClient`, releasing it with a reply, and the
//! C callbacks Redis calls about it. What a timeout or a disconnect means belongs to the code
//! that parked the client: it names its [`BlockCallbacks`] when it parks one, and trampolines
//! monomorphised for them forward to it, so this file imports none of the code it calls back.

use std::os::raw::{c_int, c_void};

use redis_module::raw;

use super::latency::timed;
use super::log::guarded;
use super::{Ctx, RawCtx, RawStr, OK};
use crate::core::Reply;

/// What happens to a parked client besides its release by [`BlockedClient::unblock`]. Runs on
/// the main thread, from the blocked client's context; a panic is logged, never unwound.
pub trait BlockCallbacks: 'static {
    /// The client's time ran out: the reply it gets (it is released right after).
    fn on_timeout(ctx: &Ctx) -> Reply;

    /// The client went away (or `CLIENT UNBLOCK ... ERROR` released it); `bc` is its handle's
    /// [`BlockedClient::id`].
    fn on_disconnect(ctx: &Ctx, bc: usize);
}

/// A client parked with `RM_BlockClient`. Released exactly once, by [`BlockedClient::unblock`]
/// (it is not `Clone`, and `unblock` consumes it).
pub struct BlockedClient(*mut raw::RedisModuleBlockedClient);

impl BlockedClient {
    /// An identity for matching the disconnect callback's handle.
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    /// A handle that stands for nothing, for unit tests of the registry (never unblocked).
    #[cfg(test)]
    pub fn fake(id: usize) -> BlockedClient {
        BlockedClient(id as *mut raw::RedisModuleBlockedClient)
    }

    /// Releases the client. With a reply, the reply callback writes it to the client; without
    /// one (after a timeout reply, or a disconnect) Redis just frees the handle.
    pub fn unblock(self, reply: Option<Reply>) {
        let privdata = match reply {
            Some(r) => Box::into_raw(Box::new(r)) as *mut c_void,
            None => std::ptr::null_mut(),
        };
        // SAFETY: `self.0` is a live handle not yet released (this is its only release, as the
        // type is consumed); ownership of `privdata` passes to Redis, which hands it back to
        // `free_reply` exactly once.
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
    /// timeout and its disconnect do.
    pub fn block_client<C: BlockCallbacks>(&self, timeout_ms: i64) -> Option<BlockedClient> {
        // SAFETY: live command context; the callbacks are `extern "C"` functions of this file
        // with the signatures Redis expects.
        let bc = unsafe {
            api!(RedisModule_BlockClient)(self.0, Some(on_reply), Some(on_timeout::<C>), Some(free_reply), timeout_ms)
        };
        if bc.is_null() {
            return None;
        }
        // SAFETY: `bc` was just returned by RM_BlockClient and is live.
        unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect::<C>)) };
        Some(BlockedClient(bc))
    }
}

extern "C" fn on_reply(ctx: RawCtx, _argv: *mut RawStr, _argc: c_int) -> c_int {
    // SAFETY: called by Redis with the blocked client's context; the private data is the
    // `Reply` boxed by `unblock` (or null), owned by Redis until `free_reply`.
    let reply = unsafe { api!(RedisModule_GetBlockedClientPrivateData)(ctx) as *const Reply };
    let ctx = Ctx(ctx);
    if reply.is_null() {
        ctx.reply(&Reply::Nil);
    } else {
        // SAFETY: non-null, points to a live `Reply` (see above).
        ctx.reply(unsafe { &*reply });
    }
    OK
}

extern "C" fn free_reply(_ctx: RawCtx, privdata: *mut c_void) {
    if !privdata.is_null() {
        // SAFETY: `privdata` is the `Box<Reply>` leaked by `unblock`; Redis frees it once.
        drop(unsafe { Box::from_raw(privdata as *mut Reply) });
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
