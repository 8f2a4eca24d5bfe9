//! Whether every ACL user of the server may run every command and touch every key and channel:
//! what lets the Redisson script filter run a script natively on a server whose command
//! filter cannot name the calling client (Redis 7.0), where it cannot ask about the caller.
//!
//! A user allowed `EVALSHA` but not the module's command must get what the Lua gives it, not
//! a new `NOPERM`. Where the caller is unknown, that holds only while no user is restricted at
//! all, so the filter rewrites a script only while that is *known* ([`OPEN`]). It is known
//! until the ACL may change, and forgotten exactly where `crate::caller` forgets that every
//! user grants every key and channel (every `ACL` change, and the `EXEC` that may run a queued
//! one). A filter may not call into Redis (`RM_Call`), so while it is [`UNKNOWN`] the filter
//! leaves the script to Lua and arms a 0 ms timer, whose callback finds it out as soon as the
//! server has run the commands it is reading (Redis runs due timers after each batch). The
//! timer armed at load runs once the server has loaded its ACL users (a config file's `user`
//! lines and `aclfile` are loaded after the modules).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8};

use super::rules::{grants_every_command, grants_everything};
use super::tracked::{tracked, MAX_REMEMBERED};
use crate::ffi::acl::{self, User};
use crate::ffi::Ctx;

const UNKNOWN: u8 = 0;
const OPEN: u8 = 1;
const RESTRICTED: u8 = 2;

/// [`UNKNOWN`], [`OPEN`] or [`RESTRICTED`]. Only the main thread touches it.
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// A timer that will find the state out is armed.
static ARMED: AtomicBool = AtomicBool::new(false);

/// `Some(true)` while every user is known to grant every command, key and channel,
/// `Some(false)` while some user is known not to, `None` while unknown.
#[inline]
pub fn known() -> Option<bool> {
    match STATE.load(Relaxed) {
        OPEN => Some(true),
        RESTRICTED => Some(false),
        _ => None,
    }
}

/// True if the caller should arm the timer that runs [`learn`]: none is armed yet.
pub fn should_arm() -> bool {
    !ARMED.swap(true, Relaxed)
}

/// The timer could not be armed: the next ask arms it.
pub fn disarmed() {
    ARMED.store(false, Relaxed);
}

/// The ACL may have changed: nothing is known until [`learn`] runs again.
pub fn forget() {
    STATE.store(UNKNOWN, Relaxed);
}

/// Module load: nothing known, no timer armed (Redis refuses to unload a module whose timer
/// has not fired).
pub fn reset() {
    forget();
    disarmed();
}

/// Finds the state out (a timer's context: never inside a transaction). A server that
/// renamed `ACL` or `EXEC`, whose ACL changes the filter cannot see, a user the module cannot
/// describe (Redis before 7.0.8), or more users than `crate::caller` remembers: restricted, so
/// every script runs as Lua.
pub fn learn(ctx: &Ctx) {
    disarmed();
    if STATE.load(Relaxed) != UNKNOWN {
        return;
    }
    let open = tracked()
        && acl::user_names(ctx).is_some_and(|names| {
            names.len() <= MAX_REMEMBERED
                && names.iter().all(|n| {
                    let name = ctx.string(n);
                    User::find(ctx, name.as_ref())
                        .and_then(|u| u.description())
                        .is_some_and(|d| grants_everything(d.bytes()) && grants_every_command(d.bytes()))
                })
        });
    STATE.store(if open { OPEN } else { RESTRICTED }, Relaxed);
}

/// For unit tests of what forgets the state.
#[cfg(test)]
pub fn assume_open() {
    STATE.store(OPEN, Relaxed);
}
