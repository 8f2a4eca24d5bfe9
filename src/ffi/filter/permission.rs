//! Whether the calling user may have a script call rewritten: the script as sent, the native
//! command, and every command the script runs inside, checked against the user's ACL through
//! the filter's client id (Redis 7.2+).

use std::os::raw::c_int;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::{free_string, new_string, word, Fctx, Strings, DETACHED};
use crate::ffi::{RawCtx, RawStr, OK};
use crate::redisson::acl;

/// True if the calling user may run the script as sent, the native command, and every
/// command the script runs inside (see `crate::redisson::acl`). On a server whose filter
/// cannot name the client (Redis 7.0) true: `filter` has checked that no user is restricted.
///
/// # Safety
/// `fctx` must be live; `raws` and `native` hold live strings.
pub(super) unsafe fn acl_allows(
    fctx: Fctx,
    strings: &Strings,
    raws: &[RawStr],
    native: &[RawStr],
    inner: &[(&'static str, acl::On)],
) -> bool {
    let Some(client_id) = opt!(RedisModule_CommandFilterGetClientId) else { return true };
    let (Some(user_name), Some(user_of), Some(check), Some(free_user)) = (
        opt!(RedisModule_GetClientUserNameById),
        opt!(RedisModule_GetModuleUserFromUserName),
        opt!(RedisModule_ACLCheckCommandPermissions),
        opt!(RedisModule_FreeModuleUser),
    ) else {
        return false;
    };
    let detached = DETACHED.load(Relaxed) as RawCtx;
    if detached.is_null() {
        return false;
    }
    // SAFETY: `fctx` is live; the detached context has no automatic memory, so the name is
    // ours to free.
    let name = unsafe { user_name(detached, client_id(fctx)) };
    if name.is_null() {
        // ENOTSUP: a client without a user (ACL does not apply to it); anything else (a
        // module's fake client, not found): leave the script alone.
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOTSUP);
    }
    // SAFETY: `name` is a live string; the user handle is freed below.
    let user = unsafe { user_of(name) };
    free_string(name);
    if user.is_null() {
        return false;
    }
    // SAFETY: live user handle and argument vectors; Redis only reads them.
    let may = |argv: &[RawStr]| unsafe { check(user, argv.as_ptr() as *mut RawStr, argv.len() as c_int) } == OK;
    let mut ok = may(raws) && may(native);
    for (cmd, on) in inner {
        if !ok {
            break;
        }
        let Some(c) = word(strings, cmd.as_bytes()) else {
            ok = false;
            break;
        };
        ok = match on {
            acl::On::Key(i) => may(&[c, raws[3 + i]]),
            acl::On::Own(b) => {
                let s = new_string(b);
                let r = may(&[c, s]);
                free_string(s);
                r
            }
        };
    }
    // SAFETY: the handle from GetModuleUserFromUserName, freed once.
    unsafe { free_user(user) };
    ok
}
