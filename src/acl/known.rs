//! What is known of the server's ACL between two changes: whether every user grants
//! everything (then nobody is looked up), and which users do. Forgotten whenever the command
//! filter sees a command that may change the ACL ([`on_command`]): `ACL SETUSER`, `DELUSER`,
//! `LOAD`, and the `EXEC` that may run a queued one.

use std::cell::RefCell;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use super::all_users;
use super::rules::grants_everything;
use super::tracked::{tracked, MAX_REMEMBERED};
use crate::ffi::acl::{self, User};
use crate::ffi::Ctx;

/// True when every user of the server grants everything, so no check can fail: known until
/// the ACL may change, found out (with `ACL USERS`) at the first need after that.
pub(super) fn all_open(ctx: &Ctx) -> bool {
    match ALL_OPEN.load(Relaxed) {
        OPEN => return true,
        RESTRICTED => return false,
        _ => {}
    }
    // Inside MULTI/EXEC the transaction may change the ACL after this very command; where
    // the filter cannot see ACL changes, nothing may be known for longer than a command.
    if in_transaction(ctx) || !tracked() {
        return false;
    }
    let open = acl::user_names(ctx).is_some_and(|names| {
        names.len() <= MAX_REMEMBERED
            && names.iter().all(|n| {
                let name = ctx.string(n);
                User::find(ctx, name.as_ref())
                    .and_then(|u| u.description())
                    .is_some_and(|d| grants_everything(d.bytes()))
            })
    });
    ALL_OPEN.store(if open { OPEN } else { RESTRICTED }, Relaxed);
    open
}

/// Whether every user grants everything: [`UNKNOWN`], [`OPEN`] or [`RESTRICTED`]. An atomic
/// rather than a thread-local: it is read on every command, and a thread-local costs a call
/// in a shared library. Only the main thread touches it.
pub(super) static ALL_OPEN: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
pub(super) const OPEN: u8 = 1;
const RESTRICTED: u8 = 2;

fn in_transaction(ctx: &Ctx) -> bool {
    ctx.flags() & raw::REDISMODULE_CTX_FLAGS_MULTI as u64 != 0
}

/// What is known of the ACL, until it may have changed (with [`ALL_OPEN`]).
#[derive(Default)]
struct Verdicts {
    /// Users known to grant everything.
    open: Vec<Vec<u8>>,
    /// An ACL change was seen where the client could not be told apart (Redis 7.0), or too
    /// many transactions queued one: every `EXEC` may run one.
    every_exec: bool,
    /// Clients that queued an ACL change in a transaction: their `EXEC` runs it.
    queued: Vec<u64>,
}

impl Verdicts {
    fn is_open(&self, name: &[u8]) -> bool {
        self.open.iter().any(|n| n == name)
    }

    fn forget(&mut self) {
        ALL_OPEN.store(UNKNOWN, Relaxed);
        all_users::forget();
        self.open.clear();
    }
}

/// Whether `name` is known to grant everything.
pub(super) fn known_open(name: &[u8]) -> bool {
    VERDICTS.with(|v| v.borrow().is_open(name))
}

thread_local! {
    // Redis runs every module callback, and the command filter, on its main thread.
    static VERDICTS: RefCell<Verdicts> = RefCell::default();
}

pub(super) fn remember(ctx: &Ctx, name: &[u8]) {
    if in_transaction(ctx) || !tracked() {
        return;
    }
    VERDICTS.with(|v| {
        let mut v = v.borrow_mut();
        if v.open.len() >= MAX_REMEMBERED {
            v.open.remove(0);
        }
        v.open.push(name.to_vec());
    });
}

/// `ACL` subcommands that change no user; any other may (SETUSER, DELUSER, LOAD, and any
/// added later).
const ACL_READS: &[&[u8]] =
    &[b"whoami", b"list", b"users", b"getuser", b"cat", b"log", b"genpass", b"help", b"dryrun", b"save"];

/// Called by the command filter for every command before it runs or is queued by MULTI.
/// `client` gives the sending client's id and whether it is inside MULTI (`None`: unknown).
pub fn on_command(name: &[u8], sub: Option<&[u8]>, client: impl FnOnce() -> Option<(u64, bool)>) {
    let acl_change =
        name.eq_ignore_ascii_case(b"acl") && sub.is_some_and(|s| !ACL_READS.iter().any(|r| s.eq_ignore_ascii_case(r)));
    let exec = name.eq_ignore_ascii_case(b"exec");
    if !acl_change && !exec {
        return;
    }
    VERDICTS.with(|v| {
        let mut v = v.borrow_mut();
        if acl_change {
            // Runs now, or at its transaction's EXEC: forget now, and then again.
            v.forget();
            match client() {
                Some((_, false)) => {}
                Some((id, true)) if v.queued.len() < MAX_REMEMBERED => {
                    if !v.queued.contains(&id) {
                        v.queued.push(id);
                    }
                }
                _ => v.every_exec = true,
            }
        } else if v.every_exec {
            v.forget();
        } else if !v.queued.is_empty() {
            match client() {
                Some((id, _)) => {
                    if let Some(i) = v.queued.iter().position(|&q| q == id) {
                        v.queued.swap_remove(i);
                        v.forget();
                    }
                }
                None => v.forget(),
            }
        }
    });
}

/// Forgets everything (module load: the ACL may have changed while unloaded).
pub fn forget_all() {
    ALL_OPEN.store(UNKNOWN, Relaxed);
    all_users::reset();
    VERDICTS.with(|v| *v.borrow_mut() = Verdicts::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(name: &[u8]) -> bool {
        VERDICTS.with(|v| v.borrow().is_open(name))
    }

    fn remembered(name: &[u8]) {
        VERDICTS.with(|v| {
            let mut v = v.borrow_mut();
            v.open.push(name.to_vec());
        });
        ALL_OPEN.store(OPEN, Relaxed);
        all_users::assume_open();
    }

    /// Open, and every user known to be unrestricted too (`crate::all_users`, forgotten with it).
    fn open_everywhere(name: &[u8]) -> bool {
        let everyone = all_users::known() == Some(true);
        assert_eq!(open(name), everyone, "the two are forgotten together");
        everyone
    }

    // One test: `ALL_OPEN` is shared by every test thread.
    #[test]
    fn an_acl_change_forgets_and_so_does_the_exec_that_may_run_a_queued_one() {
        forget_all();
        remembered(b"default");
        on_command(b"ACL", Some(b"whoami"), || Some((1, false)));
        on_command(b"exec", None, || Some((1, false)));
        on_command(b"get", Some(b"k"), || Some((1, false)));
        assert!(open_everywhere(b"default"), "no change seen yet");
        on_command(b"acl", Some(b"SETUSER"), || Some((1, false)));
        assert!(!open_everywhere(b"default"));
        assert_eq!(all_users::known(), None);
        remembered(b"default");
        on_command(b"acl", Some(b"deluser"), || Some((7, true)));
        remembered(b"default");
        on_command(b"EXEC", None, || Some((8, false)));
        assert!(open_everywhere(b"default"), "another client's EXEC runs no ACL change");
        on_command(b"EXEC", None, || Some((7, false)));
        assert!(!open_everywhere(b"default"), "client 7's EXEC runs its queued ACL DELUSER");
        remembered(b"default");
        on_command(b"EXEC", None, || Some((7, false)));
        assert!(open(b"default"), "once");
        on_command(b"acl", Some(b"some-future-subcommand"), || Some((1, false)));
        assert!(!open(b"default"));

        // Without client ids (Redis 7.0) every EXEC after an ACL change forgets.
        forget_all();
        on_command(b"acl", Some(b"load"), || None);
        for _ in 0..3 {
            remembered(b"default");
            on_command(b"exec", None, || None);
            assert!(!open_everywhere(b"default"));
            assert_eq!(ALL_OPEN.load(Relaxed), UNKNOWN);
            assert_eq!(all_users::known(), None);
        }
    }
}
