//! Blocked clients, timers and event subscriptions: the C callbacks Redis calls, each of which
//! forwards to the safe code in `crate::blocking` and never lets a panic cross into C.

use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use super::latency::timed;
use super::{str_bytes, Ctx, RawCtx, RawStr, OK};
use crate::blocking::{self, TimerData};
use crate::core::Reply;

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
        // `free_privdata` exactly once.
        unsafe { api!(RedisModule_UnblockClient)(self.0, privdata) };
    }
}

/// A module timer's id.
pub type TimerId = u64;

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

    /// Parks the calling client for up to `timeout_ms` (0 = no limit).
    pub fn block_client(&self, timeout_ms: i64) -> Option<BlockedClient> {
        // SAFETY: live command context; the callbacks are `extern "C"` functions of this file
        // with the signatures Redis expects.
        let bc = unsafe {
            api!(RedisModule_BlockClient)(self.0, Some(on_reply), Some(on_timeout), Some(free_reply), timeout_ms)
        };
        if bc.is_null() {
            return None;
        }
        // SAFETY: `bc` was just returned by RM_BlockClient and is live.
        unsafe { api!(RedisModule_SetDisconnectCallback)(bc, Some(on_disconnect)) };
        Some(BlockedClient(bc))
    }

    pub fn client_id(&self) -> u64 {
        // SAFETY: live context.
        unsafe { api!(RedisModule_GetClientId)(self.0) }
    }

    pub fn selected_db(&self) -> i32 {
        // SAFETY: live context.
        unsafe { api!(RedisModule_GetSelectedDb)(self.0) }
    }

    pub fn select_db(&self, db: i32) -> bool {
        // SAFETY: live context; Redis validates the id.
        unsafe { api!(RedisModule_SelectDb)(self.0, db) == OK }
    }

    /// Runs `blocking::on_timer(data)` once, `ms` from now.
    pub fn create_timer(&self, ms: i64, data: TimerData) -> TimerId {
        let data = Box::into_raw(Box::new(data)) as *mut c_void;
        // SAFETY: ownership of `data` passes to the timer; `on_timer` or `stop_timer` takes it back.
        unsafe { api!(RedisModule_CreateTimer)(self.0, ms.max(0), Some(on_timer), data) }
    }

    /// Cancels a timer that has not fired, dropping its data. False if it already fired.
    pub fn stop_timer(&self, id: TimerId) -> bool {
        let mut data: *mut c_void = std::ptr::null_mut();
        // SAFETY: on success Redis returns the data pointer we created in `create_timer`, which
        // we own again and free here exactly once.
        unsafe {
            if api!(RedisModule_StopTimer)(self.0, id, &mut data) != OK {
                return false;
            }
            if !data.is_null() {
                drop(Box::from_raw(data as *mut TimerData));
            }
        }
        true
    }
}

/// Subscribes to what can free a lock or change its read holds behind the module's back:
/// keyspace events (`del`, `expired`, `evicted`, string, hash, list and zset changes by any
/// client, Redisson's Lua included), FLUSHALL/FLUSHDB, and what swaps a whole keyspace
/// (SWAPDB, loading, a role change). A primary demoted to a replica must also release its
/// parked clients: Valkey leaves module-blocked clients parked on a demotion in cluster mode
/// (Redis 7.0 unblocks them itself, and then nothing is left for us).
///
/// Hash, list and zset events are subscribed later, by [`watch_collections`]: see there.
pub fn subscribe(ctx: &redis_module::Context) -> bool {
    // A module unloaded and loaded again may find its statics as it left them (the shared
    // object need not be unmapped), while Redis dropped its subscriptions with the unload.
    WATCHING_COLLECTIONS.with(|w| w.set(false));
    let types = raw::REDISMODULE_NOTIFY_GENERIC
        | raw::REDISMODULE_NOTIFY_EXPIRED
        | raw::REDISMODULE_NOTIFY_EVICTED
        | raw::REDISMODULE_NOTIFY_STRING;
    let event = |id| raw::RedisModuleEvent { id, dataver: 1 };
    let swaps = [
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
    ];
    // SAFETY: OnLoad context; the callbacks have the signatures Redis expects.
    unsafe {
        api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.ctx, types as c_int, Some(on_keyspace_event)) == OK
            && api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event(raw::REDISMODULE_EVENT_FLUSHDB), Some(on_flush))
                == OK
            && swaps.iter().all(|&id| api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event(id), Some(on_swap)) == OK)
    }
}

thread_local! {
    static WATCHING_COLLECTIONS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Subscribes to hash, list and zset events, once. Only parked clients (a Redisson client's
/// `HDEL`/`HSET` may free a lock or change its mode; a waiter leaving a fair queue may put a
/// parked one first in line) and read-hold index entries (a foreign write to a lock hash makes
/// its entry stale) need them. Until one exists, leaving them out spares every hash write,
/// ours included, a call into this module: Redis builds a context for each subscriber call,
/// about 4% of a `LOCK.ACQUIRE`. Redis has no way to unsubscribe, so this is one-way. Call it
/// before the state that needs the events exists: no event can come in between, as both run
/// on the main thread within the same command or callback. False if Redis refused: the caller
/// must then do without that state.
pub fn watch_collections(ctx: &Ctx) -> bool {
    if WATCHING_COLLECTIONS.with(|w| w.replace(true)) {
        return true;
    }
    let types = raw::REDISMODULE_NOTIFY_HASH | raw::REDISMODULE_NOTIFY_LIST | raw::REDISMODULE_NOTIFY_ZSET;
    // SAFETY: a live context of this module (a command or callback); the callback has the
    // signature Redis expects. Redis copies nothing from us but the function pointer.
    let ok = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.0, types as c_int, Some(on_keyspace_event)) };
    if ok != OK {
        WATCHING_COLLECTIONS.with(|w| w.set(false));
        super::log(c"warning", "lockmod: could not subscribe to hash, list and zset events");
    }
    ok == OK
}

/// Runs `f`, turning a panic into a log line: no panic may unwind into Redis.
fn guarded<T>(what: &str, fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        super::log(c"warning", &format!("lockmod: internal error in {what}"));
        fallback
    })
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

extern "C" fn on_timeout(ctx: RawCtx, _argv: *mut RawStr, _argc: c_int) -> c_int {
    let ctx = Ctx(ctx);
    let reply =
        timed(ctx.0, c"lockmod-timeout", || guarded("a BLOCK timeout", Reply::Nil, || blocking::on_timeout(&ctx)));
    ctx.reply(&reply);
    OK
}

extern "C" fn on_disconnect(ctx: RawCtx, bc: *mut raw::RedisModuleBlockedClient) {
    let ctx = Ctx(ctx);
    timed(ctx.0, c"lockmod-disconnect", || {
        guarded("a BLOCK disconnect", (), || blocking::on_disconnect(&ctx, bc as usize))
    });
}

extern "C" fn on_timer(ctx: RawCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the `Box<TimerData>` leaked by `create_timer`; a fired timer's data
    // comes back exactly once, here.
    let data = unsafe { Box::from_raw(data as *mut TimerData) };
    let ctx = Ctx(ctx);
    // Timers do the module's O(N) background work: each kind is its own latency event.
    let event = match *data {
        TimerData::FairCancels => c"lockmod-fair-cancels",
        TimerData::FairTick => c"lockmod-fair-tick",
        _ => c"lockmod-timer",
    };
    timed(ctx.0, event, || guarded("a timer", (), || blocking::on_timer(&ctx, *data)));
}

extern "C" fn on_keyspace_event(ctx: RawCtx, _type: c_int, event: *const c_char, key: RawStr) -> c_int {
    let ctx = Ctx(ctx);
    // SAFETY: Redis passes the event name as a NUL-terminated static string.
    let event = if event.is_null() { &[][..] } else { unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes() };
    guarded("a keyspace event", (), || {
        let key = str_bytes(key);
        crate::hold_index::on_keyspace_event(ctx.selected_db(), event, key);
        blocking::on_keyspace_event(&ctx, event, key)
    });
    OK
}

extern "C" fn on_flush(ctx: RawCtx, _eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        let ctx = Ctx(ctx);
        guarded("a flush event", (), || {
            crate::hold_index::clear();
            blocking::on_flush(&ctx)
        });
    }
}

/// SWAPDB, loading (DEBUG RELOAD, a full sync) or a role change: the keyspace the read-hold
/// index mirrors was replaced. (One callback: a module has one listener per event.)
extern "C" fn on_swap(ctx: RawCtx, eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    let ctx = Ctx(ctx);
    guarded("a keyspace swap event", (), || {
        crate::hold_index::clear();
        // Locks with parked clients may be free in the database swapped in: serve them.
        if eid.id == raw::REDISMODULE_EVENT_SWAPDB {
            blocking::on_flush(&ctx);
        }
        // No lock may be granted on a replica: release every parked client with an error.
        if eid.id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
            && subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA
        {
            blocking::on_demoted(&ctx);
        }
    });
}
