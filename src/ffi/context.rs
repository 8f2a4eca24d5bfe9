//! The context: the server's clock and flags, the client and its database, opening keys,
//! notifications and publishing.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw;

use super::{Key, RStr, RawCtx, StrRef, OK, READ, WRITE};

/// A command's (or callback's) context.
#[derive(Clone, Copy)]
pub struct Ctx(pub RawCtx);

impl Ctx {
    pub fn raw(&self) -> RawCtx {
        self.0
    }

    /// The server's clock in ms as it was when this command started: the time Redis (7.2+)
    /// uses to decide which keys have expired during the command. Redis 7.0 has no such API
    /// and reads the clock afresh, so there we do too.
    pub fn cached_ms() -> i64 {
        // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init; the call is
        // a plain read of the server's cached clock.
        match unsafe { raw::RedisModule_CachedMicroseconds } {
            Some(f) => unsafe { f() / 1000 },
            None => Self::now_ms(),
        }
    }

    /// The real-time clock in ns, read now (`CLOCK_REALTIME`, as redis-cell's `time::now_utc()`):
    /// neither cached nor rounded to the server's ms, so two calls in one millisecond (or one
    /// `EXEC`) read two instants, as redis-cell's do.
    pub fn wall_ns() -> i64 {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        since.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }

    /// The server's clock in ms, read now (for timers and callbacks outside a command).
    pub fn now_ms() -> i64 {
        // SAFETY: a plain clock read.
        unsafe { api!(RedisModule_Milliseconds)() }
    }

    pub fn flags(&self) -> u64 {
        // SAFETY: `self.0` is a live context.
        unsafe { api!(RedisModule_GetContextFlags)(self.0) as u64 }
    }

    /// Whether the server runs in cluster mode: read once (`cluster-enabled` cannot change
    /// while the server runs), then remembered.
    pub fn in_cluster(&self) -> bool {
        use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
        // 0: not read yet, 1: no, 2: yes.
        static CLUSTER: AtomicU8 = AtomicU8::new(0);
        match CLUSTER.load(Relaxed) {
            0 => {
                let yes = self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER as u64 != 0;
                CLUSTER.store(if yes { 2 } else { 1 }, Relaxed);
                yes
            }
            v => v == 2,
        }
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

    /// The number of keys in the selected database.
    pub fn db_size(&self) -> u64 {
        // SAFETY: live context.
        unsafe { api!(RedisModule_DbSize)(self.0) }
    }

    /// Opens `name` for reading and writing (or reading only). The key is closed on drop, and
    /// signalled as modified then only if a write through the handle changed it.
    pub fn open_key(&self, name: StrRef, write: bool) -> Key {
        let mode = if write { READ | WRITE } else { READ };
        // SAFETY: `name` is a live module string; the returned handle is closed in `Key::drop`.
        let ptr = unsafe { api!(RedisModule_OpenKey)(self.0, name.ptr, mode) };
        // Only a handle that can write may need signalling, in the database it was opened in.
        let db = if write { self.selected_db() } else { -1 };
        Key { ctx: self.0, ptr, db, changed: std::cell::Cell::new(false) }
    }

    pub fn string(&self, bytes: &[u8]) -> RStr {
        RStr::new(self.0, bytes)
    }

    /// Fires a keyspace notification, as the equivalent Redis command would.
    pub fn notify(&self, class: u32, event: &CStr, key: StrRef) {
        // SAFETY: live context and key name; `event` is NUL-terminated.
        unsafe { api!(RedisModule_NotifyKeyspaceEvent)(self.0, class as c_int, event.as_ptr(), key.ptr) };
    }

    pub fn publish(&self, channel: StrRef, message: StrRef) {
        // SAFETY: live context and strings.
        unsafe { api!(RedisModule_PublishMessage)(self.0, channel.ptr, message.ptr) };
    }

    /// Publishes to shard subscribers (`SPUBLISH`); false, publishing nothing, on a server
    /// without the API (it is in every Redis 7.0).
    pub fn publish_shard(&self, channel: StrRef, message: StrRef) -> bool {
        // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
        let Some(f) = (unsafe { raw::RedisModule_PublishMessageShard }) else { return false };
        // SAFETY: live context and strings.
        unsafe { f(self.0, channel.ptr, message.ptr) };
        true
    }
}
