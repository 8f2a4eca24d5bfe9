//! Who a command runs for, and the checks of what that user's ACL lets it touch beyond the
//! lock key (the derived keys and channels of `crate::access`).
//!
//! Each store carries an [`Access`]: the command's caller, looked up at the first check (a
//! command that touches only its lock key never asks), the user a parked client ran as (for
//! its grant), or the module itself (its own upkeep, checked by the caller beforehand).
//!
//! Cost. A user whose root selector grants every key and channel (`~* &*`, as the default
//! user) passes every check, so none is made. While every user of the server is such a user
//! (a server without ACL rules), nobody is even looked up: one flag, read per command. Once
//! some user is restricted, each command looks its caller's name up (once) and a user known to
//! grant everything is then let through; the others' names are checked. What is known lasts
//! until the ACL may have changed: the command filter ([`on_command`]) sees every `ACL
//! SETUSER`, `DELUSER` and `LOAD` before it runs or is queued by MULTI, and the `EXEC` that
//! runs a queued one (on Redis 7.0, where a filter cannot tell clients apart: every `EXEC`
//! after an ACL change), and each empties it. Inside a transaction nothing is learnt, as it may
//! change the ACL between two of our commands.

use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU8};

use redis_module::raw;

use crate::access::{KeyUse, Need};
use crate::core::{Denied, LockError, Result};
use crate::ffi::acl::{self, User};
use crate::ffi::{Ctx, RStr};

/// The identity a parked client keeps for its grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Who {
    /// A client without an ACL user (Redis runs it as the superuser), or the module itself.
    Root,
    User(Vec<u8>),
}

/// A user name as the server handed it (no copy on the hot path), or as a waiter kept it.
enum Name {
    Server(RStr),
    Kept(Vec<u8>),
}

impl Name {
    fn bytes(&self) -> &[u8] {
        match self {
            Name::Server(s) => s.bytes(),
            Name::Kept(v) => v,
        }
    }
}

enum State {
    /// The command's caller, not looked up yet.
    Caller,
    /// A parked client's user, not looked up yet.
    Waiter(Who),
    /// Every user of the server grants everything: nobody was looked up.
    AllOpen,
    /// Every check passes: no ACL user, or one granted every key and channel.
    Open(Option<Name>),
    /// Each name is checked against this user.
    Checked(Name, User),
    /// The user no longer exists: everything is denied.
    Gone(Vec<u8>),
}

/// The ACL side of one store.
pub struct Access {
    state: State,
    /// Denials go to `ACL LOG` only from the denied client's own command (the log entry
    /// describes the context's client).
    own_command: bool,
}

impl Access {
    /// For a command: its caller.
    pub fn caller() -> Access {
        Access { state: State::Caller, own_command: true }
    }

    /// For the module's own upkeep, which checks nothing.
    pub fn module() -> Access {
        Access { state: State::Open(None), own_command: false }
    }

    /// For a parked client's grant: the user it ran as.
    pub fn waiter(who: &Who) -> Access {
        Access { state: State::Waiter(who.clone()), own_command: false }
    }

    #[inline]
    fn resolve(&mut self, ctx: &Ctx) {
        if matches!(self.state, State::Caller | State::Waiter(_)) {
            self.resolve_now(ctx);
        }
    }

    #[cold]
    fn resolve_now(&mut self, ctx: &Ctx) {
        let state = std::mem::replace(&mut self.state, State::Open(None));
        let all_open = all_open(ctx);
        self.state = match state {
            State::Caller if all_open => State::AllOpen,
            State::Caller => match acl::current_user(ctx) {
                None => State::Open(None),
                Some(name) => judge(ctx, Name::Server(name)),
            },
            State::Waiter(Who::Root) => State::Open(None),
            // Even when every user grants everything, a parked client's user may be gone.
            State::Waiter(Who::User(name)) if all_open => {
                let s = ctx.string(&name);
                match User::find(ctx, s.as_ref()) {
                    Some(_) => State::Open(Some(Name::Kept(name))),
                    None => State::Gone(name),
                }
            }
            State::Waiter(Who::User(name)) => judge(ctx, Name::Kept(name)),
            resolved => resolved,
        };
    }

    /// True when a check may fail.
    #[inline]
    pub fn restricted(&mut self, ctx: &Ctx) -> bool {
        // The common case, first: a server where every user grants everything.
        if matches!(self.state, State::Caller) && ALL_OPEN.load(Relaxed) == OPEN {
            // `Caller` owns nothing: forgotten rather than dropped (no call to the drop glue
            // of every state, on the path of every acquire).
            std::mem::forget(std::mem::replace(&mut self.state, State::AllOpen));
        }
        self.resolve(ctx);
        !matches!(self.state, State::Open(_) | State::AllOpen)
    }

    /// Who this store runs for (what a client parked now keeps).
    pub fn who(&mut self, ctx: &Ctx) -> Who {
        self.resolve(ctx);
        match &self.state {
            // Asked only when a client parks: the one time an open caller is looked up.
            State::AllOpen => acl::current_user(ctx).map_or(Who::Root, |n| Who::User(n.bytes().to_vec())),
            State::Open(None) | State::Caller | State::Waiter(Who::Root) => Who::Root,
            State::Open(Some(n)) | State::Checked(n, _) => Who::User(n.bytes().to_vec()),
            State::Gone(n) | State::Waiter(Who::User(n)) => Who::User(n.clone()),
        }
    }

    /// Checks every need; `NOPERM` naming the first one denied.
    pub fn permit(&mut self, ctx: &Ctx, needs: &[Need]) -> Result<()> {
        self.resolve(ctx);
        let user = match &self.state {
            State::Checked(_, user) => user,
            State::Gone(name) => return Err(LockError::NoPerm(Denied::User, name.clone())),
            _ => return Ok(()),
        };
        for need in needs {
            let (name, denied) = match need {
                Need::Key(k, _) => (k, Denied::Key),
                Need::Publish(c) => (c, Denied::Channel),
            };
            let s = ctx.string(name);
            let allowed = match need {
                Need::Key(_, how) => user.may_key(s.as_ref(), key_flags(*how)),
                Need::Publish(_) => user.may_publish(s.as_ref()),
            };
            if !allowed {
                if self.own_command {
                    user.log_denied(ctx, s.as_ref(), denied == Denied::Channel);
                }
                return Err(LockError::NoPerm(denied, name.clone()));
            }
        }
        Ok(())
    }
}

/// The key-spec flags Redis turns into read (ACCESS) and write (UPDATE) permission.
fn key_flags(how: KeyUse) -> u32 {
    match how {
        KeyUse::Read => raw::REDISMODULE_CMD_KEY_ACCESS,
        KeyUse::Write => raw::REDISMODULE_CMD_KEY_UPDATE,
        KeyUse::ReadWrite => raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
    }
}

/// True when every user of the server grants everything, so no check can fail: known until
/// the ACL may change, found out (with `ACL USERS`) at the first need after that.
fn all_open(ctx: &Ctx) -> bool {
    match ALL_OPEN.load(Relaxed) {
        OPEN => return true,
        RESTRICTED => return false,
        _ => {}
    }
    // Inside MULTI/EXEC the transaction may change the ACL after this very command; where
    // the filter cannot see ACL changes, nothing may be known for longer than a command.
    if in_transaction(ctx) || !TRACKED.load(Relaxed) {
        return false;
    }
    let open = acl::user_names(ctx).is_some_and(|names| {
        names.len() <= MAX_REMEMBERED
            && names.iter().all(|n| {
                let name = ctx.string(n);
                User::find(ctx, name.as_ref())
                    .and_then(|u| u.description())
                    .is_some_and(|d| crate::access::grants_everything(d.bytes()))
            })
    });
    ALL_OPEN.store(if open { OPEN } else { RESTRICTED }, Relaxed);
    open
}

/// Whether every user grants everything: [`UNKNOWN`], [`OPEN`] or [`RESTRICTED`]. An atomic
/// rather than a thread-local: it is read on every command, and a thread-local costs a call
/// in a shared library. Only the main thread touches it.
static ALL_OPEN: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const OPEN: u8 = 1;
const RESTRICTED: u8 = 2;

fn in_transaction(ctx: &Ctx) -> bool {
    ctx.flags() & raw::REDISMODULE_CTX_FLAGS_MULTI as u64 != 0
}

/// False when `ACL` or `EXEC` is renamed (`rename-command`): the filter, which knows them by
/// name, would miss ACL changes, so nothing is remembered.
static TRACKED: AtomicBool = AtomicBool::new(true);

/// Called at load: whether ACL changes can be seen by the command filter.
pub fn set_tracked(tracked: bool) {
    TRACKED.store(tracked, Relaxed);
}

/// Whether ACL changes can be seen by the command filter.
pub fn tracked() -> bool {
    TRACKED.load(Relaxed)
}

/// Looks the user up: open if it grants everything (remembered), checked otherwise.
fn judge(ctx: &Ctx, name: Name) -> State {
    if VERDICTS.with(|v| v.borrow().is_open(name.bytes())) {
        return State::Open(Some(name));
    }
    let kept;
    let s = match &name {
        Name::Server(s) => s.as_ref(),
        Name::Kept(v) => {
            kept = ctx.string(v);
            kept.as_ref()
        }
    };
    let Some(user) = User::find(ctx, s) else { return State::Gone(name.bytes().to_vec()) };
    // Without the description (Redis before 7.0.8) every name is checked: correct, slower.
    if user.description().is_some_and(|d| crate::access::grants_everything(d.bytes())) {
        remember(ctx, name.bytes());
        return State::Open(Some(name));
    }
    State::Checked(name, user)
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

/// Users (and clients with a queued ACL change) remembered at most: a server has a handful.
pub(crate) const MAX_REMEMBERED: usize = 64;

impl Verdicts {
    fn is_open(&self, name: &[u8]) -> bool {
        self.open.iter().any(|n| n == name)
    }

    fn forget(&mut self) {
        ALL_OPEN.store(UNKNOWN, Relaxed);
        crate::all_users::forget();
        self.open.clear();
    }
}

thread_local! {
    // Redis runs every module callback, and the command filter, on its main thread.
    static VERDICTS: RefCell<Verdicts> = RefCell::default();
}

fn remember(ctx: &Ctx, name: &[u8]) {
    if in_transaction(ctx) || !TRACKED.load(Relaxed) {
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
    crate::all_users::reset();
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
        crate::all_users::assume_open();
    }

    /// Open, and every user known to be unrestricted too (`crate::all_users`, forgotten with it).
    fn open_everywhere(name: &[u8]) -> bool {
        let everyone = crate::all_users::known() == Some(true);
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
        assert_eq!(crate::all_users::known(), None);
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
            assert_eq!(crate::all_users::known(), None);
        }
    }
}
