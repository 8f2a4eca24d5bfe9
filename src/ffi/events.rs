//! Blocked clients, timers and event subscriptions: the C callbacks Redis calls, each of which
//! forwards to the safe code in `crate::blocking` and never lets a panic cross into C.

use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};

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

/// The keyspace events the module subscribes to: only keys that go away without a command
/// (`expired`, `evicted`). Everything else the module learns from its own writes, from a
/// poll of parked locks, or from its command filter while read holds are indexed, so an
/// ordinary write anywhere in the server (`SET`, `HSET`, `DEL`, `PEXPIRE`) calls no module
/// code. Subscribed on first need ([`watch_keyspace`]): Redis walks the subscriber list for
/// every event of every write, about 50 instructions per write once anyone subscribes.
pub const KEYSPACE_EVENTS: c_int = (raw::REDISMODULE_NOTIFY_EXPIRED | raw::REDISMODULE_NOTIFY_EVICTED) as c_int;

/// Whether [`KEYSPACE_EVENTS`] are subscribed (Redis has no way to unsubscribe).
static WATCHING_KEYSPACE: AtomicBool = AtomicBool::new(false);

/// What `INFO lockmod` shows as `lockmod_keyspace_subscriptions`.
pub fn keyspace_subscriptions() -> &'static str {
    if WATCHING_KEYSPACE.load(Relaxed) {
        "expired,evicted"
    } else {
        "none"
    }
}

/// A context of this module usable outside any command or callback (the command filter gets
/// none), for arming timers and registering the filter. Set at load.
static MODULE_CTX: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(std::ptr::null_mut());

/// The module's own context, for arming timers from the command filter.
pub fn module_ctx() -> Option<Ctx> {
    let p = MODULE_CTX.load(Relaxed);
    (!p.is_null()).then_some(Ctx(p))
}

/// Subscribes to what can free a lock or change its read holds without any command: FLUSHALL
/// and FLUSHDB, and what swaps a whole keyspace (SWAPDB, loading, a role change). A primary
/// demoted to a replica must also release its parked clients: Valkey leaves module-blocked
/// clients parked on a demotion in cluster mode (Redis 7.0 unblocks them itself, and then
/// nothing is left for us). Keyspace events come later, with [`watch_keyspace`].
pub fn subscribe(ctx: &redis_module::Context) -> bool {
    // A module unloaded and loaded again may find its statics as it left them, while Redis
    // dropped its subscriptions with the unload.
    WATCHING_KEYSPACE.store(false, Relaxed);
    // SAFETY: OnLoad context. The detached context lives as long as the module (a module
    // loaded again gets a new one; the old one is a few hundred bytes left behind).
    let detached = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx.ctx) };
    if detached.is_null() {
        return false;
    }
    MODULE_CTX.store(detached, Relaxed);
    let event = |id| raw::RedisModuleEvent { id, dataver: 1 };
    let swaps = [
        raw::REDISMODULE_EVENT_SWAPDB,
        raw::REDISMODULE_EVENT_LOADING,
        raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
    ];
    // SAFETY: OnLoad context; the callbacks have the signatures Redis expects.
    unsafe {
        api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event(raw::REDISMODULE_EVENT_FLUSHDB), Some(on_flush)) == OK
            && swaps.iter().all(|&id| api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event(id), Some(on_swap)) == OK)
    }
}

/// Subscribes to [`KEYSPACE_EVENTS`], once: called before the first state that needs them
/// exists (a granted lock, whose expiry `lockmod_expired_while_held` counts; a parked client;
/// a read-hold index entry, which an evicted or expired hash makes stale). No event can come
/// in between: both run on the main thread within the same command. False if Redis refused.
pub fn watch_keyspace(ctx: &Ctx) -> bool {
    if WATCHING_KEYSPACE.load(Relaxed) {
        return true;
    }
    // SAFETY: a live context of this module (a command or callback); the callback has the
    // signature Redis expects. Redis copies nothing from us but the function pointer.
    let ok = unsafe { api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.0, KEYSPACE_EVENTS, Some(on_keyspace_event)) };
    if ok != OK {
        super::log(c"warning", "lockmod: could not subscribe to expired and evicted events");
        return false;
    }
    WATCHING_KEYSPACE.store(true, Relaxed);
    true
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
        TimerData::Poll => c"lockmod-poll",
        _ => c"lockmod-timer",
    };
    timed(ctx.0, event, || guarded("a timer", (), || blocking::on_timer(&ctx, *data)));
}

/// An `expired` or `evicted` event (the only classes subscribed).
extern "C" fn on_keyspace_event(ctx: RawCtx, _type: c_int, event: *const c_char, key: RawStr) -> c_int {
    let ctx = Ctx(ctx);
    // SAFETY: Redis passes the event name as a NUL-terminated static string.
    let event = if event.is_null() { &[][..] } else { unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes() };
    guarded("a keyspace event", (), || {
        let key = str_bytes(key);
        let db = ctx.selected_db();
        crate::stats::on_key_event(event, db, key);
        crate::hold_index::on_key_gone(db, event, key);
        blocking::on_key_gone(&ctx, key)
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
