//! Who a command runs for, and the checks of what that user's ACL lets it touch beyond the
//! lock key (the derived keys and channels of `crate::access`).
//!
//! Each store carries an [`Access`]: the command's caller, looked up at the first check (a
//! command that touches only its lock key never asks), the user a parked client ran as (for
//! its grant), or the module itself (its own upkeep, checked by the caller beforehand).
//!
//! Cost. A user whose root selector grants every key and channel (`~* &*`, as the default
//! user) passes every check, so none is made: that verdict is cached per user name, and then
//! costs one lookup of the caller's name per command. The cache lasts until the ACL may have
//! changed: the command filter (`on_command`) sees every `ACL SETUSER`, `DELUSER` and `LOAD`,
//! and, once one was seen, every `EXEC` (a transaction may have queued one), and each empties
//! it. Inside a transaction nothing is cached: it may change the ACL between two of
//! our commands. A restricted user's names are checked on every command.

use std::cell::RefCell;

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

    fn resolve(&mut self, ctx: &Ctx) {
        let state = std::mem::replace(&mut self.state, State::Open(None));
        self.state = match state {
            State::Caller => match acl::current_user(ctx) {
                None => State::Open(None),
                Some(name) => judge(ctx, Name::Server(name)),
            },
            State::Waiter(Who::Root) => State::Open(None),
            State::Waiter(Who::User(name)) => judge(ctx, Name::Kept(name)),
            resolved => resolved,
        };
    }

    /// True when a check may fail.
    pub fn restricted(&mut self, ctx: &Ctx) -> bool {
        self.resolve(ctx);
        !matches!(self.state, State::Open(_))
    }

    /// Who this store runs for (what a client parked now keeps).
    pub fn who(&mut self, ctx: &Ctx) -> Who {
        self.resolve(ctx);
        match &self.state {
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

/// Users known to grant everything, until the ACL may have changed.
#[derive(Default)]
struct Verdicts {
    /// An ACL change was seen: from now on every `EXEC` may carry one.
    acl_changed: bool,
    open: Vec<Vec<u8>>,
}

/// Users remembered at most: a server has a handful; a flood of names only costs lookups.
const MAX_REMEMBERED: usize = 64;

impl Verdicts {
    fn is_open(&self, name: &[u8]) -> bool {
        self.open.iter().any(|n| n == name)
    }

    fn forget(&mut self) {
        self.open.clear();
    }
}

thread_local! {
    // Redis runs every module callback, and the command filter, on its main thread.
    static VERDICTS: RefCell<Verdicts> = RefCell::default();
}

fn remember(ctx: &Ctx, name: &[u8]) {
    // Inside MULTI/EXEC the transaction may change the ACL after this very command.
    if ctx.flags() & raw::REDISMODULE_CTX_FLAGS_MULTI as u64 != 0 {
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

/// Called by the command filter for every command before it runs (or is queued by MULTI).
pub fn on_command(name: &[u8], sub: Option<&[u8]>) {
    let acl_change =
        name.eq_ignore_ascii_case(b"acl") && sub.is_some_and(|s| !ACL_READS.iter().any(|r| s.eq_ignore_ascii_case(r)));
    let exec = name.eq_ignore_ascii_case(b"exec");
    if !acl_change && !exec {
        return;
    }
    VERDICTS.with(|v| {
        let mut v = v.borrow_mut();
        v.acl_changed |= acl_change;
        if v.acl_changed {
            v.forget();
        }
    });
}

/// Forgets every verdict (module load: the ACL may have changed while unloaded).
pub fn forget_all() {
    VERDICTS.with(|v| *v.borrow_mut() = Verdicts::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(name: &[u8]) -> bool {
        VERDICTS.with(|v| v.borrow().is_open(name))
    }

    fn remembered(name: &[u8]) {
        VERDICTS.with(|v| v.borrow_mut().open.push(name.to_vec()));
    }

    #[test]
    fn an_acl_change_forgets_every_verdict_and_makes_exec_forget_them_too() {
        forget_all();
        remembered(b"default");
        on_command(b"ACL", Some(b"whoami"));
        on_command(b"exec", None);
        on_command(b"get", Some(b"k"));
        assert!(open(b"default"), "no change seen yet");
        on_command(b"acl", Some(b"SETUSER"));
        assert!(!open(b"default"));
        remembered(b"default");
        on_command(b"EXEC", None);
        assert!(!open(b"default"), "EXEC may run a queued ACL SETUSER");
        remembered(b"default");
        on_command(b"acl", Some(b"some-future-subcommand"));
        assert!(!open(b"default"));
    }
}
