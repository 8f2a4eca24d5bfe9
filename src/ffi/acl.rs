//! The ACL C API: who runs the current command, users by name, key and channel checks, and
//! ACL LOG entries. Everything here is in Redis 7.0 and Valkey, except
//! `RM_GetModuleUserACLString` (Redis 7.0.8), used only where its pointer is set.
//!
//! `RM_GetCurrentUserName` dereferences the context client's user, which is null for the
//! clients Redis runs as the superuser (the primary's link, AOF loading, a module's `RM_Call`
//! without `C`): calling it there would crash the server. [`current_user`] asks the safe
//! `RM_GetClientUserNameById` first and calls it only once a user is known to exist.

use std::os::raw::c_int;

use redis_module::raw;

use super::{Ctx, RStr, StrRef, OK};

/// Contexts Redis runs with no ACL user, whose commands it does not check either.
const SUPERUSER_CONTEXTS: u64 = (raw::REDISMODULE_CTX_FLAGS_REPLICATED | raw::REDISMODULE_CTX_FLAGS_LOADING) as u64;

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The ACL user name of the client behind `ctx`, or `None` for a client without one (Redis
/// checks nothing for it: it runs as the superuser).
///
/// A connection is found by its id. No context flag tells a module's `RM_Call` client (no
/// user unless called with `C`) from a connection: with Redis 7.2's `K` flag it may even be
/// allowed to block.
pub fn current_user(ctx: &Ctx) -> Option<RStr> {
    // SAFETY: live context.
    let id = unsafe { api!(RedisModule_GetClientId)(ctx.0) };
    if id == 0 {
        return None;
    }
    // SAFETY: live context; the returned string (if any) is ours to free, with this context.
    let name = unsafe { api!(RedisModule_GetClientUserNameById)(ctx.0, id) };
    if !name.is_null() {
        return Some(RStr { ctx: ctx.0, ptr: name });
    }
    // ENOTSUP: a connection without a user (the primary's link). ENOENT: not a connection at
    // all: a script's client (running as the script's caller), a module's RM_Call client, or
    // the AOF loader's.
    if errno() != libc::ENOENT || ctx.flags() & SUPERUSER_CONTEXTS != 0 || !context_has_user(ctx) {
        return None;
    }
    // SAFETY: the context client has a user (just checked), which is all this call needs.
    let name = unsafe { api!(RedisModule_GetCurrentUserName)(ctx.0) };
    (!name.is_null()).then(|| RStr { ctx: ctx.0, ptr: name })
}

/// True if the context client has an ACL user. `RM_Call` with `C` runs as that user and
/// fails with ENOTSUP, before anything else, when there is none; otherwise a command that does
/// not exist fails with ENOENT, having run nothing and logged nothing.
fn context_has_user(ctx: &Ctx) -> bool {
    // SAFETY: live context; the format has no arguments; a reply, if any, is freed here.
    unsafe {
        let reply = api!(RedisModule_Call)(ctx.0, c"lockmod.no-such-command".as_ptr(), c"C".as_ptr());
        let err = errno();
        if !reply.is_null() {
            api!(RedisModule_FreeCallReply)(reply);
            return true;
        }
        err != libc::ENOTSUP
    }
}

/// An ACL user, for checks within one command or callback: Redis may delete it afterwards.
pub struct User {
    ctx: super::RawCtx,
    ptr: *mut raw::RedisModuleUser,
}

impl Drop for User {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: a handle from RM_GetModuleUserFromUserName, freed once; for such a handle
        // Redis frees only the wrapper, never the user.
        unsafe { api!(RedisModule_FreeModuleUser)(self.ptr) };
    }
}

impl User {
    /// The user named `name`, or `None` if there is no such user (deleted).
    pub fn find(ctx: &Ctx, name: StrRef) -> Option<User> {
        // SAFETY: live string; the handle is freed on drop.
        let ptr = unsafe { api!(RedisModule_GetModuleUserFromUserName)(name.ptr) };
        (!ptr.is_null()).then(|| User { ctx: ctx.0, ptr })
    }

    /// The user's rules as `ACL LIST` shows them (without `user <name>`); `None` on a server
    /// without the API.
    pub fn description(&self) -> Option<RStr> {
        // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
        let f = unsafe { raw::RedisModule_GetModuleUserACLString }?;
        // SAFETY: live user; the string returned holds a reference we release on drop.
        let s = unsafe { f(self.ptr) };
        (!s.is_null()).then(|| RStr { ctx: self.ctx, ptr: s })
    }

    /// True if the user may touch `key` as `flags` say (`REDISMODULE_CMD_KEY_ACCESS` asks read
    /// permission; `INSERT`, `UPDATE`, `DELETE` ask write permission).
    pub fn may_key(&self, key: StrRef, flags: u32) -> bool {
        // SAFETY: live user and string; the flags are among those the API accepts.
        unsafe { api!(RedisModule_ACLCheckKeyPermissions)(self.ptr, key.ptr, flags as c_int) == OK }
    }

    /// True if the user may run the command `argv` (its name first); false on a server
    /// without the API.
    pub fn may_run(&self, argv: &[StrRef]) -> bool {
        let Some(check) = opt!(RedisModule_ACLCheckCommandPermissions) else { return false };
        let mut v: Vec<super::RawStr> = argv.iter().map(|s| s.ptr).collect();
        // SAFETY: live user handle and argument strings; Redis only reads them.
        unsafe { check(self.ptr, v.as_mut_ptr(), v.len() as c_int) == OK }
    }

    /// True if the user may `PUBLISH` on `channel`.
    pub fn may_publish(&self, channel: StrRef) -> bool {
        let flags = raw::REDISMODULE_CMD_CHANNEL_PUBLISH as c_int;
        // SAFETY: live user and string. The third parameter is the access flags in every
        // server (its header once named it `literal`).
        unsafe { api!(RedisModule_ACLCheckChannelPermissions)(self.ptr, channel.ptr, flags) == OK }
    }

    /// Adds an `ACL LOG` entry for a key (or channel) denied to this user, attributed to the
    /// context's client: call it only in the denied client's own command.
    pub fn log_denied(&self, ctx: &Ctx, object: StrRef, channel: bool) {
        let reason = if channel {
            raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_CHANNEL
        } else {
            raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_KEY
        };
        // SAFETY: live context (a command's, with its client), user and string; Redis copies
        // the object's bytes.
        unsafe { api!(RedisModule_ACLAddLogEntry)(ctx.0, self.ptr, object.ptr, reason) };
    }
}

/// The ACL user of client `id`, looked up outside any command (the command filter, with
/// `super::filter::detached`): `Ok(None)` for a client without a user (ACL does not apply to
/// it), `Err(())` when it cannot be told (a module's fake client, a client not found, a
/// server without the APIs).
#[allow(clippy::result_unit_err)]
pub fn user_of_client(id: u64) -> Result<Option<User>, ()> {
    let (Some(user_name), Some(user_of), Some(_), Some(_)) = (
        opt!(RedisModule_GetClientUserNameById),
        opt!(RedisModule_GetModuleUserFromUserName),
        opt!(RedisModule_ACLCheckCommandPermissions),
        opt!(RedisModule_FreeModuleUser),
    ) else {
        return Err(());
    };
    let Some(detached) = super::filter::detached() else { return Err(()) };
    // SAFETY: a live context without automatic memory, so the name is ours to free.
    let name = unsafe { user_name(detached.0, id) };
    if name.is_null() {
        // ENOTSUP: a client without a user; anything else: leave it alone.
        return if errno() == libc::ENOTSUP { Ok(None) } else { Err(()) };
    }
    // SAFETY: `name` is a live string; the handle is freed when the `User` drops.
    let ptr = unsafe { user_of(name) };
    // SAFETY: the name was made for us above; a NULL context is allowed.
    unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), name) };
    if ptr.is_null() {
        return Err(());
    }
    Ok(Some(User { ctx: detached.0, ptr }))
}

/// The names of every user (`ACL USERS`), or `None` if Redis would not say.
pub fn user_names(ctx: &Ctx) -> Option<Vec<Vec<u8>>> {
    // SAFETY: live context; "c" takes one NUL-terminated string; the reply, and the elements
    // borrowed from it, are read before it is freed here.
    unsafe {
        let reply = api!(RedisModule_Call)(ctx.0, c"ACL".as_ptr(), c"c".as_ptr(), c"USERS".as_ptr());
        if reply.is_null() {
            return None;
        }
        let names = if api!(RedisModule_CallReplyType)(reply) == raw::REDISMODULE_REPLY_ARRAY as c_int {
            let n = api!(RedisModule_CallReplyLength)(reply);
            let mut names = Vec::with_capacity(n);
            for i in 0..n {
                let e = api!(RedisModule_CallReplyArrayElement)(reply, i);
                let mut len = 0usize;
                let p = if e.is_null() { std::ptr::null() } else { api!(RedisModule_CallReplyStringPtr)(e, &mut len) };
                if !p.is_null() {
                    names.push(std::slice::from_raw_parts(p as *const u8, len).to_vec());
                }
            }
            Some(names)
        } else {
            None
        };
        api!(RedisModule_FreeCallReply)(reply);
        names
    }
}

/// True if `ACL` and `EXEC` run under their own names: the command filter knows an ACL change
/// by its name, so a server that renamed either (`rename-command`) must not be trusted to
/// show them.
pub fn acl_and_exec_named(ctx: &Ctx) -> bool {
    use super::lookup::server_has_command;
    server_has_command(ctx, c"acl") == Some(true) && server_has_command(ctx, c"exec") == Some(true)
}
