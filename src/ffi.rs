//! The only file with `unsafe`: small wrappers over the Redis module C API.
//!
//! Everything above this file sees safe types: [`Ctx`] (a command's context), [`Args`] (its
//! argv), [`Key`] (an open key, closed on drop) and [`RStr`] (an owned module string, freed on
//! drop). The SDK's safe layer allocates a `Vec<RedisString>` and retains every argument on each
//! call; the lock commands are meant to cost about as much as a `SET NX PX`, so the hot path goes
//! straight to the C API through these wrappers instead.
//!
//! Every API function used here exists in Redis 7.0; [`missing_apis`] checks that at load time,
//! so the `api!` fallback (a panic, caught by [`dispatch`] and turned into an error reply) is
//! never reached on a supported server.

// `api!` reads a static inside its own `unsafe`, which nests in callers' unsafe blocks.
#![allow(unused_unsafe)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_long, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use crate::core::{LockError, Reply};

pub type RawCtx = *mut raw::RedisModuleCtx;
pub type RawStr = *mut raw::RedisModuleString;

const OK: c_int = raw::REDISMODULE_OK as c_int;
const READ: c_int = raw::REDISMODULE_READ as c_int;
const WRITE: c_int = raw::REDISMODULE_WRITE as c_int;

/// Resolves a module API function pointer, which Redis fills in when the module loads.
macro_rules! api {
    ($name:ident) => {
        // SAFETY: Redis writes these pointers once, in RedisModule_Init, before any other code
        // of the module runs; afterwards they are only read.
        match unsafe { raw::$name } {
            Some(f) => f,
            None => $crate::ffi::api_missing(stringify!($name)),
        }
    };
}

// Declared after `api!` so the macro is in scope there.
pub mod config;
pub mod events;
pub mod filter;
pub mod metadata;
pub mod server;

#[cold]
pub(crate) fn api_missing(name: &str) -> ! {
    // Unreachable from client input or the keyspace: whether a pointer is set depends only on
    // the server binary, and `missing_apis` (checked in OnLoad, before any command or callback
    // is registered) refuses to load the module on a server lacking any API this file calls.
    // Were it reached anyway, every entry point runs under `catch_unwind`: an error reply or a
    // log line, never an unwind into Redis.
    panic!("the server does not export {name}")
}

/// Declares the module API functions `api!` may call: their names, and the load-time check.
macro_rules! needed_apis {
    ($($name:ident),* $(,)?) => {
        /// Every module API function called through `api!` (a unit test keeps this complete).
        pub const NEEDED_APIS: &[&str] = &[$(stringify!($name)),*];

        /// Names of the module API functions this module needs but the server does not export.
        pub fn missing_apis() -> Vec<&'static str> {
            let mut missing = Vec::new();
            // SAFETY: read-only access to pointers Redis wrote during RedisModule_Init.
            $( if unsafe { raw::$name }.is_none() { missing.push(stringify!($name)); } )*
            missing
        }
    };
}

needed_apis!(
    RedisModule_OpenKey,
    RedisModule_CloseKey,
    RedisModule_KeyType,
    RedisModule_HashGet,
    RedisModule_HashSet,
    RedisModule_GetAbsExpire,
    RedisModule_SetAbsExpire,
    RedisModule_DeleteKey,
    RedisModule_Replicate,
    RedisModule_PublishMessage,
    RedisModule_CreateString,
    RedisModule_FreeString,
    RedisModule_StringPtrLen,
    RedisModule_StringToLongLong,
    RedisModule_ReplyWithNull,
    RedisModule_ReplyWithLongLong,
    RedisModule_ReplyWithError,
    RedisModule_ReplyWithArray,
    RedisModule_ReplyWithMap,
    RedisModule_ReplyWithStringBuffer,
    RedisModule_ReplyWithSimpleString,
    RedisModule_NotifyKeyspaceEvent,
    RedisModule_Milliseconds,
    RedisModule_ValueLength,
    RedisModule_ScanKey,
    RedisModule_ScanCursorCreate,
    RedisModule_ScanCursorDestroy,
    RedisModule_StringDMA,
    RedisModule_StringSet,
    RedisModule_ListPush,
    RedisModule_ListPop,
    RedisModule_ListGet,
    RedisModule_ListDelete,
    RedisModule_ZsetAdd,
    RedisModule_ZsetRem,
    RedisModule_ZsetScore,
    RedisModule_ZsetFirstInScoreRange,
    RedisModule_ZsetRangeCurrentElement,
    RedisModule_ZsetRangeNext,
    RedisModule_ZsetRangeEndReached,
    RedisModule_ZsetRangeStop,
    RedisModule_GetContextFlags,
    RedisModule_CreateCommand,
    RedisModule_Log,
    RedisModule_BlockClient,
    RedisModule_CommandFilterArgGet,
    RedisModule_CommandFilterArgsCount,
    RedisModule_CreateTimer,
    RedisModule_GetBlockedClientPrivateData,
    RedisModule_GetClientId,
    RedisModule_GetCommand,
    RedisModule_GetSelectedDb,
    RedisModule_LoadConfigs,
    RedisModule_RegisterCommandFilter,
    RedisModule_RegisterEnumConfig,
    RedisModule_SelectDb,
    RedisModule_SetCommandInfo,
    RedisModule_SetDisconnectCallback,
    RedisModule_StopTimer,
    RedisModule_SubscribeToKeyspaceEvents,
    RedisModule_SubscribeToServerEvent,
    RedisModule_UnblockClient,
);

// ---------------------------------------------------------------------------------------------
// Command registration and dispatch.

/// The shape of every command handler: parse `args`, run, and return the reply.
pub type Handler = fn(&Ctx, &Args) -> Result<Reply, LockError>;

/// Defines an `extern "C"` trampoline for a [`Handler`], for [`create_command`].
#[macro_export]
macro_rules! command_fn {
    ($handler:path) => {{
        extern "C" fn trampoline(
            ctx: $crate::ffi::RawCtx,
            argv: *mut $crate::ffi::RawStr,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            // SAFETY: Redis calls a command function with a live context and `argc` arguments.
            unsafe { $crate::ffi::dispatch(ctx, argv, argc, $handler) }
        }
        trampoline as $crate::ffi::CommandFn
    }};
}

pub type CommandFn = extern "C" fn(RawCtx, *mut RawStr, c_int) -> c_int;

/// Runs a handler and writes its reply. A panic becomes an error reply, never a crash.
///
/// # Safety
/// `ctx` must be a live command context and `argv` must hold `argc` live module strings, as
/// Redis guarantees when it calls a command function.
#[inline]
pub unsafe fn dispatch(ctx: RawCtx, argv: *mut RawStr, argc: c_int, handler: Handler) -> c_int {
    let argv: &[RawStr] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        // SAFETY: Redis passes `argc` valid string pointers in `argv`, alive for this call.
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    // A Redisson script the command filter rewrote into this command.
    if let Some(rc) = unsafe { filter::dispatch_scripted(ctx, argv, handler) } {
        return rc;
    }
    let ctx = Ctx(ctx);
    let args = Args { argv };
    let result = catch_unwind(AssertUnwindSafe(|| handler(&ctx, &args)));
    match result {
        Ok(Ok(reply)) => ctx.reply(&reply),
        Ok(Err(LockError::Blocked)) => {}
        Ok(Err(e)) => ctx.reply_error(&e.to_string()),
        Err(_) => ctx.reply_error("ERR internal error in lockmod (see the server log)"),
    }
    OK
}

/// Registers `name` with `RedisModule_CreateCommand`. Returns false if Redis refused it.
pub fn create_command(
    ctx: &redis_module::Context,
    name: &CStr,
    f: CommandFn,
    flags: &CStr,
    first: c_int,
    last: c_int,
    step: c_int,
) -> bool {
    // SAFETY: `ctx` is the OnLoad context; the strings are NUL-terminated and copied by Redis.
    unsafe { api!(RedisModule_CreateCommand)(ctx.ctx, name.as_ptr(), Some(f), flags.as_ptr(), first, last, step) == OK }
}

/// Logs through the server's log, which is where operators look.
pub fn log(level: &CStr, message: &str) {
    let Ok(msg) = std::ffi::CString::new(message.replace('\0', " ")) else { return };
    // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
    if let Some(f) = unsafe { raw::RedisModule_Log } {
        // SAFETY: a null context is allowed by RM_Log; the strings are NUL-terminated.
        unsafe { f(std::ptr::null_mut(), level.as_ptr(), c"%s".as_ptr(), msg.as_ptr()) };
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

/// A command's arguments, `argv[0]` being the command name.
pub struct Args<'a> {
    argv: &'a [RawStr],
}

impl<'a> Args<'a> {
    /// No arguments: for stores used outside a command (timers, blocked-client callbacks).
    pub fn empty() -> Args<'static> {
        Args { argv: &[] }
    }

    pub fn len(&self) -> usize {
        self.argv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.argv.is_empty()
    }

    /// The bytes of argument `i`, borrowed from Redis for the duration of the command.
    pub fn bytes(&self, i: usize) -> &'a [u8] {
        match self.argv.get(i) {
            Some(&s) => str_bytes(s),
            None => &[],
        }
    }

    /// The module string of argument `i`.
    pub fn raw(&self, i: usize) -> Option<StrRef<'a>> {
        self.argv.get(i).map(|&ptr| StrRef { ptr, _life: std::marker::PhantomData })
    }

    /// The index of the argument whose own buffer `b` is (pointer identity, not equality).
    /// Lets the store hand Redis its own argv strings instead of allocating copies.
    pub fn index_of(&self, b: &[u8]) -> Option<usize> {
        self.argv.iter().position(|&s| {
            let own = str_bytes(s);
            own.as_ptr() == b.as_ptr() && own.len() == b.len()
        })
    }
}

fn str_bytes<'a>(s: RawStr) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `s` is a live module string; Redis returns a pointer to its `len` bytes, valid
    // until the string is freed, which for argv and our `RStr`s outlives every borrow.
    unsafe {
        let p = api!(RedisModule_StringPtrLen)(s, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// A module string known to be alive for `'a`: an argument of the running command, or an
/// [`RStr`] borrowed. The only way safe code hands a string to the C API.
#[derive(Clone, Copy)]
pub struct StrRef<'a> {
    ptr: RawStr,
    _life: std::marker::PhantomData<&'a ()>,
}

impl<'a> StrRef<'a> {
    pub fn bytes(&self) -> &'a [u8] {
        str_bytes(self.ptr)
    }
}

/// An owned module string, freed on drop.
pub struct RStr {
    ctx: RawCtx,
    ptr: RawStr,
}

impl RStr {
    fn new(ctx: RawCtx, bytes: &[u8]) -> RStr {
        // SAFETY: Redis copies `bytes`; the result is freed in `Drop` with the same context.
        let ptr = unsafe { api!(RedisModule_CreateString)(ctx, bytes.as_ptr() as *const c_char, bytes.len()) };
        RStr { ctx, ptr }
    }

    pub fn as_ref(&self) -> StrRef<'_> {
        StrRef { ptr: self.ptr, _life: std::marker::PhantomData }
    }

    pub fn bytes(&self) -> &[u8] {
        str_bytes(self.ptr)
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: we own `ptr`, created with `ctx`, and free it exactly once.
            unsafe { api!(RedisModule_FreeString)(self.ctx, self.ptr) };
        }
    }
}

/// A value that should have been an integer was not.
#[derive(Debug)]
pub struct NotAnInteger;

/// Parses a module string as a signed 64-bit integer, as Redis does.
fn str_to_i64(s: StrRef) -> Option<i64> {
    let mut v: i64 = 0;
    // SAFETY: `s` is a live module string and `v` a valid out-pointer.
    let ok = unsafe { api!(RedisModule_StringToLongLong)(s.ptr, &mut v) } == OK;
    ok.then_some(v)
}

// ---------------------------------------------------------------------------------------------
// The context.

/// A command's (or callback's) context.
#[derive(Clone, Copy)]
pub struct Ctx(pub RawCtx);

/// An argument of a propagated command.
pub enum Arg<'a> {
    B(&'a [u8]),
    I(i64),
}

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

    /// The server's clock in ms, read now (for timers and callbacks outside a command).
    pub fn now_ms() -> i64 {
        // SAFETY: a plain clock read.
        unsafe { api!(RedisModule_Milliseconds)() }
    }

    pub fn flags(&self) -> u64 {
        // SAFETY: `self.0` is a live context.
        unsafe { api!(RedisModule_GetContextFlags)(self.0) as u64 }
    }

    /// Opens `name` for reading and writing (or reading only). The key is closed on drop.
    pub fn open_key(&self, name: StrRef, write: bool) -> Key {
        let mode = if write { READ | WRITE } else { READ };
        // SAFETY: `name` is a live module string; the returned handle is closed in `Key::drop`.
        let ptr = unsafe { api!(RedisModule_OpenKey)(self.0, name.ptr, mode) };
        Key { ctx: self.0, ptr }
    }

    pub fn string(&self, bytes: &[u8]) -> RStr {
        RStr::new(self.0, bytes)
    }

    /// Fires a keyspace notification, as the equivalent Redis command would.
    pub fn notify(&self, class: u32, event: &CStr, key: StrRef) {
        // SAFETY: live context and key name; `event` is NUL-terminated.
        unsafe { api!(RedisModule_NotifyKeyspaceEvent)(self.0, class as c_int, event.as_ptr(), key.ptr) };
    }

    pub fn publish(&self, channel: &[u8], message: &[u8]) {
        let c = self.string(channel);
        let m = self.string(message);
        // SAFETY: live context and strings.
        unsafe { api!(RedisModule_PublishMessage)(self.0, c.ptr, m.ptr) };
    }

    /// Publishes to shard subscribers (`SPUBLISH`); false, publishing nothing, on a server
    /// without the API (it is in every Redis 7.0).
    pub fn publish_shard(&self, channel: &[u8], message: &[u8]) -> bool {
        // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
        let Some(f) = (unsafe { raw::RedisModule_PublishMessageShard }) else { return false };
        let c = self.string(channel);
        let m = self.string(message);
        // SAFETY: live context and strings.
        unsafe { f(self.0, c.ptr, m.ptr) };
        true
    }

    /// Appends `cmd args...` to the replication stream and the AOF.
    pub fn replicate(&self, cmd: &CStr, args: &[Arg]) {
        let mut ints: [itoa_buf::Buf; 8] = Default::default();
        let mut parts: [&[u8]; 8] = [&[]; 8];
        if args.len() > parts.len() {
            return self.replicate_many(cmd, args);
        }
        for ((part, buf), a) in parts.iter_mut().zip(ints.iter_mut()).zip(args) {
            *part = match a {
                Arg::B(b) => b,
                Arg::I(n) => buf.format(*n),
            };
        }
        let f = api!(RedisModule_Replicate);
        let c = cmd.as_ptr();
        let p = |i: usize| parts[i].as_ptr() as *const c_char;
        let l = |i: usize| parts[i].len();
        // SAFETY: each "b" directive consumes a (pointer, length) pair of a live buffer; Redis
        // copies them before returning. Variadic calls need a literal format per arity.
        unsafe {
            match args.len() {
                1 => f(self.0, c, c"b".as_ptr(), p(0), l(0)),
                2 => f(self.0, c, c"bb".as_ptr(), p(0), l(0), p(1), l(1)),
                3 => f(self.0, c, c"bbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2)),
                4 => f(self.0, c, c"bbbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2), p(3), l(3)),
                5 => f(self.0, c, c"bbbbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2), p(3), l(3), p(4), l(4)),
                6 => f(
                    self.0,
                    c,
                    c"bbbbbb".as_ptr(),
                    p(0),
                    l(0),
                    p(1),
                    l(1),
                    p(2),
                    l(2),
                    p(3),
                    l(3),
                    p(4),
                    l(4),
                    p(5),
                    l(5),
                ),
                _ => {
                    self.replicate_many(cmd, args);
                    OK
                }
            };
        }
    }

    /// `replicate`, handing Redis the command's own argument strings (found in `argv` by
    /// pointer identity) instead of copies: on the O(1) paths a lock's name and owner are
    /// argv strings, so most arguments cost a reference count rather than an allocation.
    pub fn replicate_reusing(&self, argv: &Args, cmd: &CStr, args: &[Arg]) {
        const MAX: usize = 8;
        if args.len() > MAX {
            return self.replicate_many(cmd, args);
        }
        // Each argument's own string, looked up once.
        let mut raws: [RawStr; MAX] = [std::ptr::null_mut(); MAX];
        for (raw, a) in raws.iter_mut().zip(args) {
            if let Arg::B(b) = a {
                if let Some(i) = argv.index_of(b) {
                    *raw = argv.argv[i];
                }
            }
        }
        if raws[..args.len()].iter().all(|r| r.is_null()) {
            return self.replicate(cmd, args);
        }
        let mut buf = itoa_buf::Buf::default();
        let mut owned: [Option<RStr>; MAX] = Default::default();
        for ((raw, own), a) in raws.iter_mut().zip(owned.iter_mut()).zip(args) {
            if raw.is_null() {
                *raw = own
                    .insert(match a {
                        Arg::B(b) => self.string(b),
                        Arg::I(n) => self.string(buf.format(*n)),
                    })
                    .ptr;
            }
        }
        // SAFETY: "v" consumes (RedisModuleString **, size_t): the first `args.len()` entries
        // are live strings (argv outlives the command, `owned` outlives the call); Redis takes
        // its own references to what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), args.len());
        }
    }

    /// `replicate` for any number of arguments (the O(N) paths), through an argv vector.
    pub fn replicate_many(&self, cmd: &CStr, args: &[Arg]) {
        let mut buf = itoa_buf::Buf::default();
        let owned: Vec<RStr> = args
            .iter()
            .map(|a| match a {
                Arg::B(b) => self.string(b),
                Arg::I(n) => self.string(buf.format(*n)),
            })
            .collect();
        let mut raws: Vec<RawStr> = owned.iter().map(|s| s.ptr).collect();
        // SAFETY: "v" consumes (RedisModuleString **, size_t); Redis retains what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), raws.len());
        }
    }

    /// `replicate` with every argument already a module string (the O(N) paths that have
    /// them at hand: no copy per argument).
    pub fn replicate_strs(&self, cmd: &CStr, args: &[StrRef]) {
        let mut raws: Vec<RawStr> = args.iter().map(|s| s.ptr).collect();
        // SAFETY: "v" consumes (RedisModuleString **, size_t) of live strings (each `StrRef` is
        // alive for the call); Redis retains what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), raws.len());
        }
    }

    pub fn reply(&self, r: &Reply) {
        // SAFETY: every call below writes to the reply buffer of the live context `self.0`;
        // string pointers stay valid for the call and Redis copies them.
        unsafe {
            match r {
                Reply::Nil => api!(RedisModule_ReplyWithNull)(self.0),
                Reply::Int(n) => api!(RedisModule_ReplyWithLongLong)(self.0, *n),
                Reply::Bulk(b) => api!(RedisModule_ReplyWithStringBuffer)(self.0, b.as_ptr() as *const c_char, b.len()),
                Reply::Error(e) => {
                    self.reply_error(e);
                    OK
                }
                Reply::Simple(s) => {
                    let Ok(s) = std::ffi::CString::new(s.as_bytes()) else { return self.reply_error("ERR bad reply") };
                    api!(RedisModule_ReplyWithSimpleString)(self.0, s.as_ptr())
                }
                Reply::Array(items) => {
                    api!(RedisModule_ReplyWithArray)(self.0, items.len() as c_long);
                    for i in items {
                        self.reply(i);
                    }
                    OK
                }
                Reply::Map(pairs) => {
                    // Redis turns a map into a flat field/value array for RESP2 clients.
                    api!(RedisModule_ReplyWithMap)(self.0, pairs.len() as c_long);
                    for (k, v) in pairs {
                        self.reply(k);
                        self.reply(v);
                    }
                    OK
                }
            };
        }
    }

    pub fn reply_error(&self, msg: &str) {
        let Ok(m) = std::ffi::CString::new(msg.replace('\0', " ")) else { return };
        // SAFETY: live context; Redis copies the message.
        unsafe { api!(RedisModule_ReplyWithError)(self.0, m.as_ptr()) };
    }
}

/// A stack buffer for formatting integers without allocating.
mod itoa_buf {
    #[derive(Default)]
    pub struct Buf([u8; 24], usize);

    impl Buf {
        pub fn format(&mut self, n: i64) -> &[u8] {
            let mut v = n.unsigned_abs();
            let mut i = self.0.len();
            loop {
                i -= 1;
                self.0[i] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            if n < 0 {
                i -= 1;
                self.0[i] = b'-';
            }
            self.1 = i;
            &self.0[i..]
        }
    }
}

pub use itoa_buf::Buf as IntBuf;

// ---------------------------------------------------------------------------------------------
// Keys.

/// The type of the value at a key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyKind {
    Empty,
    String,
    List,
    Hash,
    Set,
    Zset,
    Other,
}

/// An open key, closed on drop.
pub struct Key {
    ctx: RawCtx,
    ptr: *mut raw::RedisModuleKey,
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: we own the handle and close it exactly once.
            unsafe { api!(RedisModule_CloseKey)(self.ptr) };
        }
    }
}

impl Key {
    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: live key handle.
        let t = unsafe { api!(RedisModule_KeyType)(self.ptr) } as isize;
        match t {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_LIST => KeyKind::List,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_SET => KeyKind::Set,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Elements in a hash, list or zset; bytes in a string; 0 if empty.
    pub fn len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: live key handle.
        unsafe { api!(RedisModule_ValueLength)(self.ptr) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Absolute expiry in ms, or `None` for a key without one (or an empty key).
    pub fn expire_at(&self) -> Option<i64> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: live key handle.
        let at = unsafe { api!(RedisModule_GetAbsExpire)(self.ptr) };
        (at >= 0).then_some(at)
    }

    pub fn set_expire_at(&self, at: i64) -> bool {
        // SAFETY: live key handle opened for writing (Redis checks and returns an error if not).
        unsafe { api!(RedisModule_SetAbsExpire)(self.ptr, at) == OK }
    }

    pub fn delete(&self) -> bool {
        // SAFETY: live key handle.
        unsafe { api!(RedisModule_DeleteKey)(self.ptr) == OK }
    }

    // -- hash ---------------------------------------------------------------------------------

    /// The value of `field`, if the key is a hash holding it.
    pub fn hash_get(&self, field: StrRef) -> Option<RStr> {
        let mut out: RawStr = std::ptr::null_mut();
        // SAFETY: variadic (field, out-pointer) pairs ended by NULL; the value string is created
        // with our context and freed by the returned `RStr`.
        unsafe {
            api!(RedisModule_HashGet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                &mut out as *mut RawStr,
                std::ptr::null_mut::<c_void>(),
            );
        }
        (!out.is_null()).then_some(RStr { ctx: self.ctx, ptr: out })
    }

    /// The integer value of `field`: `Ok(None)` if absent, `Err(NotAnInteger)` otherwise.
    pub fn hash_get_int(&self, field: StrRef) -> Result<Option<i64>, NotAnInteger> {
        match self.hash_get(field) {
            None => Ok(None),
            Some(v) => str_to_i64(v.as_ref()).map(Some).ok_or(NotAnInteger),
        }
    }

    /// Sets `field` to `value` (creating the hash if needed).
    pub fn hash_set(&self, field: StrRef, value: StrRef) {
        // SAFETY: variadic (field, value) pair ended by NULL; Redis copies both.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                value.ptr,
                std::ptr::null_mut::<c_void>(),
            );
        }
    }

    /// Deletes `field`; Redis deletes the key when its last field goes.
    pub fn hash_del(&self, field: StrRef) {
        // SAFETY: REDISMODULE_HASH_DELETE is the documented "delete this field" value marker.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
                std::ptr::null_mut::<c_void>(),
            );
        }
    }

    /// Calls `f(field, value)` for every field of a hash (or member, score-string of a zset).
    pub fn scan(&self, mut f: impl FnMut(&[u8], &[u8])) {
        extern "C" fn on_element(_key: *mut raw::RedisModuleKey, field: RawStr, value: RawStr, privdata: *mut c_void) {
            // SAFETY: `privdata` is the `&mut dyn FnMut` passed below, alive during ScanKey.
            let f = unsafe { &mut *(privdata as *mut &mut dyn FnMut(&[u8], &[u8])) };
            let v = if value.is_null() { &[][..] } else { str_bytes(value) };
            f(str_bytes(field), v);
        }
        if self.ptr.is_null() {
            return;
        }
        let mut dynf: &mut dyn FnMut(&[u8], &[u8]) = &mut f;
        // SAFETY: the cursor is created and destroyed here; the callback only runs inside
        // ScanKey, while `dynf` is alive. The key is not modified during the scan.
        unsafe {
            let cursor = api!(RedisModule_ScanCursorCreate)();
            while api!(RedisModule_ScanKey)(
                self.ptr,
                cursor,
                Some(on_element),
                &mut dynf as *mut &mut dyn FnMut(&[u8], &[u8]) as *mut c_void,
            ) != 0
            {}
            api!(RedisModule_ScanCursorDestroy)(cursor);
        }
    }

    // -- string -------------------------------------------------------------------------------

    /// The bytes of a string key (empty if the key is empty).
    pub fn string_get(&self) -> Vec<u8> {
        if self.ptr.is_null() || self.kind() != KeyKind::String {
            return Vec::new();
        }
        let mut len = 0usize;
        // SAFETY: read-only DMA access to a string key; copied out before the key is touched.
        unsafe {
            let p = api!(RedisModule_StringDMA)(self.ptr, &mut len, READ);
            if p.is_null() {
                return Vec::new();
            }
            std::slice::from_raw_parts(p as *const u8, len).to_vec()
        }
    }

    /// Replaces the value (of any type) with the string `value`, dropping any expiry.
    pub fn string_set(&self, value: StrRef) -> bool {
        // SAFETY: live key handle opened for writing; Redis copies the value.
        unsafe { api!(RedisModule_StringSet)(self.ptr, value.ptr) == OK }
    }

    // -- list ---------------------------------------------------------------------------------

    pub fn list_push_tail(&self, value: StrRef) {
        // SAFETY: live key handle opened for writing; Redis copies the value.
        unsafe { api!(RedisModule_ListPush)(self.ptr, raw::REDISMODULE_LIST_TAIL as c_int, value.ptr) };
    }

    /// Pops the head element; Redis deletes the key when it empties.
    pub fn list_pop_head(&self) -> Option<RStr> {
        // SAFETY: live key handle; the popped string is ours to free.
        let p = unsafe { api!(RedisModule_ListPop)(self.ptr, raw::REDISMODULE_LIST_HEAD as c_int) };
        (!p.is_null()).then_some(RStr { ctx: self.ctx, ptr: p })
    }

    /// The element at `index` (negative counts from the tail).
    pub fn list_get(&self, index: i64) -> Option<RStr> {
        // SAFETY: live key handle; the returned string is ours to free.
        let p = unsafe { api!(RedisModule_ListGet)(self.ptr, index as c_long) };
        (!p.is_null()).then_some(RStr { ctx: self.ctx, ptr: p })
    }

    pub fn list_delete(&self, index: i64) -> bool {
        // SAFETY: live key handle opened for writing.
        unsafe { api!(RedisModule_ListDelete)(self.ptr, index as c_long) == OK }
    }

    // -- zset ---------------------------------------------------------------------------------

    /// Adds or updates `member` with `score`.
    pub fn zset_add(&self, score: f64, member: StrRef) {
        let mut flags: c_int = 0;
        // SAFETY: live key handle opened for writing; Redis copies the member.
        unsafe { api!(RedisModule_ZsetAdd)(self.ptr, score, member.ptr, &mut flags) };
    }

    pub fn zset_rem(&self, member: StrRef) -> bool {
        let mut deleted: c_int = 0;
        // SAFETY: live key handle opened for writing.
        unsafe { api!(RedisModule_ZsetRem)(self.ptr, member.ptr, &mut deleted) };
        deleted != 0
    }

    pub fn zset_score(&self, member: StrRef) -> Option<f64> {
        let mut score = 0f64;
        // SAFETY: live key handle; `score` is a valid out-pointer.
        let ok = unsafe { api!(RedisModule_ZsetScore)(self.ptr, member.ptr, &mut score) } == OK;
        ok.then_some(score)
    }

    /// Every (member, score) of a zset, lowest score first.
    pub fn zset_all(&self) -> Vec<(Vec<u8>, f64)> {
        self.zset_entries().into_iter().map(|(m, score)| (m.bytes().to_vec(), score)).collect()
    }

    /// Every (member, score) of a zset as module strings, lowest score first.
    pub fn zset_entries(&self) -> Vec<(RStr, f64)> {
        let mut out = Vec::new();
        if self.ptr.is_null() || self.kind() != KeyKind::Zset {
            return out;
        }
        // SAFETY: a full-range iterator, stopped before returning; each element is a new
        // string we own (an `RStr`, freed on drop). The key is not modified while the iterator
        // is open.
        unsafe {
            if api!(RedisModule_ZsetFirstInScoreRange)(self.ptr, f64::NEG_INFINITY, f64::INFINITY, 0, 0) != OK {
                return out;
            }
            while api!(RedisModule_ZsetRangeEndReached)(self.ptr) == 0 {
                let mut score = 0f64;
                let m = api!(RedisModule_ZsetRangeCurrentElement)(self.ptr, &mut score);
                if m.is_null() {
                    break;
                }
                out.push((RStr { ctx: self.ctx, ptr: m }, score));
                if api!(RedisModule_ZsetRangeNext)(self.ptr) == 0 {
                    break;
                }
            }
            api!(RedisModule_ZsetRangeStop)(self.ptr);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Collects the `RedisModule_*` names every `api!(...)` under `dir` calls.
    fn called(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("src dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                called(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source file");
                for part in text.split("api!(").skip(1) {
                    let name: String = part.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if name.starts_with("RedisModule_") {
                        out.push(name);
                    }
                }
            }
        }
    }

    /// `api_missing` may panic only if the load-time check missed a function: it must not.
    #[test]
    fn the_load_time_check_covers_every_api_called() {
        let mut names = Vec::new();
        called(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut names);
        assert!(names.len() > 20, "found only {names:?}");
        let unchecked: Vec<&String> = names.iter().filter(|n| !super::NEEDED_APIS.contains(&n.as_str())).collect();
        assert!(unchecked.is_empty(), "called through api! but not checked at load: {unchecked:?}");
    }
}
