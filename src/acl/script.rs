//! Whether the calling user may have a script call rewritten: the script as sent, the native
//! command, and every command the script runs inside (listed by `crate::redisson::acl`),
//! checked against the user's ACL through the filter's client id (Redis 7.2+).

use crate::ffi::acl::user_of_client;
use crate::ffi::filter::FilterCall;
use crate::ffi::StrRef;

/// True if the calling user may run every command of `argvs` (each its name first). On a
/// server whose filter cannot name the client (Redis 7.0) true: the filter has checked that no
/// user is restricted (`super::probe`). A client without a user: true (ACL does not apply to
/// it); one that cannot be told (a module's fake client, not found): false, the script is left
/// alone.
pub fn allows(call: FilterCall, argvs: &[Vec<StrRef>]) -> bool {
    let Some(id) = call.client_id() else { return true };
    match user_of_client(id) {
        Ok(None) => true,
        Ok(Some(user)) => argvs.iter().all(|argv| user.may_run(argv)),
        Err(()) => false,
    }
}
