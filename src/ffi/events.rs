//! Keyspace and server event subscriptions: the C callbacks Redis calls when keys go without
//! a command (expiry, eviction, FLUSH*, SWAPDB, loading, a role change). Each tells the
//! layers that care through the [`EventHooks`] handed in at load (`crate::server`), and never
//! lets a panic cross into C.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use super::args::str_bytes;
use super::log::guarded;
use super::{Ctx, RawCtx, RawStr, OK};

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

/// What the module does when Redis reports that keys went without a command: functions of
/// the layers that own the reactions.
pub struct EventHooks {
    /// An `expired` or `evicted` event (`event`) on `key` in `db`.
    pub key_gone: fn(&Ctx, &[u8], i32, &[u8]),
    /// FLUSHALL or FLUSHDB ended.
    pub flushed: fn(&Ctx),
    /// The keyspace was swapped (SWAPDB, loading, a role change).
    pub swapped: fn(&Ctx, Swap),
    /// `CONFIG SET dir`: the server's files are somewhere else from now on.
    pub dir_changed: fn(&Ctx),
}

/// Which swap of the keyspace happened.
#[derive(Clone, Copy, Debug)]
pub struct Swap {
    /// `SWAPDB`: locks with parked clients may be free in the database swapped in.
    pub swapdb: bool,
    /// This server became a replica.
    pub now_replica: bool,
    /// This server became a primary.
    pub now_primary: bool,
    /// Loading ended (a restart from the RDB or AOF, `DEBUG RELOAD`, a full sync).
    pub loaded: bool,
}

static HOOKS: AtomicPtr<EventHooks> = AtomicPtr::new(std::ptr::null_mut());

fn hooks() -> Option<&'static EventHooks> {
    let p = HOOKS.load(Relaxed);
    // SAFETY: set only by `subscribe`, from a `&'static EventHooks`.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Subscribes to what can free a lock or change its read holds without any command: FLUSHALL
/// and FLUSHDB, and what swaps a whole keyspace (SWAPDB, loading, a role change). A primary
/// demoted to a replica must also release its parked clients: Valkey leaves module-blocked
/// clients parked on a demotion in cluster mode (Redis 7.0 unblocks them itself, and then
/// nothing is left for us). Keyspace events come later, with [`watch_keyspace`].
pub fn subscribe(ctx: &redis_module::Context, hooks: &'static EventHooks) -> bool {
    HOOKS.store(hooks as *const EventHooks as *mut EventHooks, Relaxed);
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
            && api!(RedisModule_SubscribeToServerEvent)(ctx.ctx, event(raw::REDISMODULE_EVENT_CONFIG), Some(on_config))
                == OK
    }
}

/// `CONFIG SET` changed configs: only `dir` matters here (once per `CONFIG SET`, never on a
/// command path).
extern "C" fn on_config(ctx: RawCtx, _eid: raw::RedisModuleEvent, subevent: u64, data: *mut c_void) {
    if subevent != raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE || data.is_null() {
        return;
    }
    // SAFETY: for this event Redis passes a `RedisModuleConfigChange` that lives for the call,
    // whose `config_names` holds `num_changes` NUL-terminated names.
    let dir = unsafe {
        let change = &*(data as *const raw::RedisModuleConfigChange);
        (0..change.num_changes as usize).any(|i| {
            let name = *change.config_names.add(i);
            !name.is_null() && std::ffi::CStr::from_ptr(name).to_bytes().eq_ignore_ascii_case(b"dir")
        })
    };
    if dir {
        let ctx = Ctx(ctx);
        guarded("a config change event", (), || {
            if let Some(h) = hooks() {
                (h.dir_changed)(&ctx);
            }
        });
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

/// An `expired` or `evicted` event (the only classes subscribed).
extern "C" fn on_keyspace_event(ctx: RawCtx, _type: c_int, event: *const c_char, key: RawStr) -> c_int {
    let ctx = Ctx(ctx);
    // SAFETY: Redis passes the event name as a NUL-terminated static string.
    let event = if event.is_null() { &[][..] } else { unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes() };
    guarded("a keyspace event", (), || {
        if let Some(h) = hooks() {
            (h.key_gone)(&ctx, event, ctx.selected_db(), str_bytes(key));
        }
    });
    OK
}

extern "C" fn on_flush(ctx: RawCtx, _eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    if subevent == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
        let ctx = Ctx(ctx);
        guarded("a flush event", (), || {
            if let Some(h) = hooks() {
                (h.flushed)(&ctx);
            }
        });
    }
}

/// SWAPDB, loading (DEBUG RELOAD, a full sync) or a role change: the keyspace the read-hold
/// index mirrors was replaced. (One callback: a module has one listener per event.)
extern "C" fn on_swap(ctx: RawCtx, eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    let ctx = Ctx(ctx);
    let swap = Swap {
        swapdb: eid.id == raw::REDISMODULE_EVENT_SWAPDB,
        now_replica: eid.id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
            && subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA,
        now_primary: eid.id == raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
            && subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER,
        loaded: eid.id == raw::REDISMODULE_EVENT_LOADING && subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED,
    };
    guarded("a keyspace swap event", (), || {
        if let Some(h) = hooks() {
            (h.swapped)(&ctx, swap);
        }
    });
}
