//! The safe view of a filtered call that the command filter's owners get ([`FilterCall`]), the
//! module strings a rewrite hands Redis ([`Owned`]), and what the filter asks of the server
//! around a call (its flags, which rewrite APIs it has, a context without a client). The
//! filter itself, which dispatches to its owners, is `super::filter`.

use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use super::{Ctx, RawStr, StrRef, OK};

/// Redis' filter context of the call being filtered.
pub(super) type Fctx = *mut raw::RedisModuleCommandFilterCtx;

/// The command the filter runs for, valid for that filter call only (the hooks get it by
/// value and cannot keep it: it is not `'static`, and nothing stores it).
#[derive(Clone, Copy)]
pub struct FilterCall<'a> {
    fctx: Fctx,
    _call: std::marker::PhantomData<&'a ()>,
}

impl<'a> FilterCall<'a> {
    pub(super) fn new(fctx: Fctx) -> FilterCall<'a> {
        FilterCall { fctx, _call: std::marker::PhantomData }
    }

    /// The number of arguments, the command's name included.
    pub fn argc(&self) -> usize {
        // SAFETY: `fctx` is live for this filter call.
        let n = unsafe { api!(RedisModule_CommandFilterArgsCount)(self.fctx) };
        n.max(0) as usize
    }

    /// Argument `i` as a module string, or None past the last one.
    pub fn arg_str(&self, i: usize) -> Option<StrRef<'a>> {
        let i = c_int::try_from(i).ok()?;
        // SAFETY: `fctx` is live for this filter call and its argument strings are owned by the
        // client, alive until replaced or deleted (only `replace_all` does, consuming the view's
        // use); Redis answers NULL for a position past the last argument.
        let s = unsafe { api!(RedisModule_CommandFilterArgGet)(self.fctx, i) };
        (!s.is_null()).then(|| StrRef::from_raw(s))
    }

    /// The bytes of argument `i`, or None past the last one.
    pub fn arg(&self, i: usize) -> Option<&'a [u8]> {
        self.arg_str(i).map(|s| s.bytes())
    }

    /// Every argument, or None if any could not be read.
    pub fn args(&self) -> Option<Vec<StrRef<'a>>> {
        (0..self.argc()).map(|i| self.arg_str(i)).collect()
    }

    /// The client the filter runs for, and whether it is inside MULTI (so the command is only
    /// being queued); `None` on a server without the API (Redis 7.0).
    pub fn client(&self) -> Option<(u64, bool)> {
        // SAFETY: the live filter context of the running filter.
        unsafe { filter_client(self.fctx) }
    }

    /// The calling client's id; `None` on a server whose filter cannot name it (Redis 7.0).
    pub fn client_id(&self) -> Option<u64> {
        let get_id = opt!(RedisModule_CommandFilterGetClientId)?;
        // SAFETY: `fctx` is the live filter context of the running filter.
        Some(unsafe { get_id(self.fctx) })
    }

    /// Replaces the whole call by `new` (the command's name first): Redis owns each string
    /// from here on. False, freeing them, on a server without the APIs.
    pub fn replace_all(self, new: Vec<Owned>) -> bool {
        let (Some(replace), Some(delete), Some(insert)) = (
            opt!(RedisModule_CommandFilterArgReplace),
            opt!(RedisModule_CommandFilterArgDelete),
            opt!(RedisModule_CommandFilterArgInsert),
        ) else {
            return false;
        };
        let argc = self.argc() as c_int;
        let mut new = new.into_iter();
        if let Some(first) = new.next() {
            // SAFETY: `fctx` is live and has an argument 0; the string is a reference we own,
            // which Redis takes over.
            unsafe { replace(self.fctx, 0, first.into_raw()) };
        }
        // From the end: each delete is then O(1).
        for i in (1..argc).rev() {
            // SAFETY: `fctx` is live; `i` is the last argument left at each step.
            unsafe { delete(self.fctx, i) };
        }
        for (j, s) in new.enumerate() {
            // SAFETY: `fctx` is live; position `1 + j` is at most one past the last argument;
            // the string is a reference we own, which Redis takes over.
            unsafe { insert(self.fctx, (1 + j) as c_int, s.into_raw()) };
        }
        true
    }
}

/// The client a command filter runs for, and whether it is inside MULTI (so the command is
/// only being queued); `None` on a server without the API (Redis 7.0).
///
/// # Safety
/// `fctx` must be the live context of the command filter that is running.
unsafe fn filter_client(fctx: Fctx) -> Option<(u64, bool)> {
    // SAFETY: read-only access to pointers Redis wrote during RedisModule_Init.
    let get_id = unsafe { raw::RedisModule_CommandFilterGetClientId }?;
    // SAFETY: `fctx` is the live filter context of the running filter.
    let id = unsafe { get_id(fctx) };
    // SAFETY: an all-zero client info is valid; Redis fills it for a versioned struct.
    let mut info: raw::RedisModuleClientInfo = unsafe { std::mem::zeroed() };
    info.version = u64::from(raw::REDISMODULE_CLIENTINFO_VERSION);
    // SAFETY: `info` is a writable client-info struct of the version declared in it.
    let found = unsafe { api!(RedisModule_GetClientInfoById)(&mut info as *mut _ as *mut std::ffi::c_void, id) } == OK;
    // Not a connection (a module's RM_Call): the command runs now, it is not queued.
    Some((id, found && info.flags & u64::from(raw::REDISMODULE_CLIENTINFO_FLAG_MULTI) != 0))
}

/// Whether this server has every API a rewrite of the call needs.
pub fn can_rewrite() -> bool {
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
    !needed.contains(&false)
}

/// Whether a filter can name its calling client (Redis 7.2+).
pub fn can_name_client() -> bool {
    opt!(RedisModule_CommandFilterGetClientId).is_some()
}

/// The server-wide context flags (no client: a NULL context reports only those).
pub fn server_flags() -> u64 {
    // SAFETY: a NULL context is allowed: only the server-wide flags are reported.
    unsafe { api!(RedisModule_GetContextFlags)(null_mut()) as u64 }
}

/// A context without a client, for API calls that want one outside a command: made by each
/// load (the module's memory outlives a `MODULE UNLOAD`; a context must not).
static DETACHED: AtomicPtr<raw::RedisModuleCtx> = AtomicPtr::new(null_mut());

/// Makes the context [`detached`] returns, at load.
pub fn make_detached(ctx: &redis_module::Context) {
    let detached = opt!(RedisModule_GetDetachedThreadSafeContext).map_or(null_mut(), |f| {
        // SAFETY: OnLoad context; the detached context lives as long as the module.
        unsafe { f(ctx.ctx) }
    });
    DETACHED.store(detached, Relaxed);
}

/// The context made by [`make_detached`], if any.
pub fn detached() -> Option<Ctx> {
    let p = DETACHED.load(Relaxed);
    (!p.is_null()).then_some(Ctx(p))
}

/// A module string the module owns outside any context (made with a NULL context): freed on
/// drop, unless handed over to Redis.
pub struct Owned(RawStr);

// SAFETY: only Redis' main thread makes, uses and frees module strings; the module's statics
// that keep them are only there because a module cannot own anything else for its lifetime.
unsafe impl Send for Owned {}
// SAFETY: as above.
unsafe impl Sync for Owned {}

impl Owned {
    /// A new string with the bytes `b`.
    pub fn new(b: &[u8]) -> Owned {
        // SAFETY: a NULL context is allowed (no automatic memory); Redis copies the bytes. The
        // string is ours until handed to Redis or freed.
        Owned(unsafe { api!(RedisModule_CreateString)(null_mut(), b.as_ptr() as *const c_char, b.len()) })
    }

    /// A new reference to `s` (a copy if `s` cannot be shared); `None` on a server without
    /// the API, or if Redis would not.
    pub fn hold(s: StrRef) -> Option<Owned> {
        let f = opt!(RedisModule_HoldString)?;
        // SAFETY: `s` is a live string; a NULL context is allowed.
        let h = unsafe { f(null_mut(), s.ptr) };
        (!h.is_null()).then_some(Owned(h))
    }

    pub fn as_ref(&self) -> StrRef<'_> {
        StrRef::from_raw(self.0)
    }

    /// The string's identity (its address): what a command compares an argument with.
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    /// Hands the reference over (to Redis).
    pub(super) fn into_raw(self) -> RawStr {
        let p = self.0;
        std::mem::forget(self);
        p
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a string we own a reference to; a NULL context is allowed.
            unsafe { api!(RedisModule_FreeString)(null_mut(), self.0) };
        }
    }
}
