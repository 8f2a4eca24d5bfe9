//! Who a command runs for, and the checks of what that user's ACL lets it touch beyond the
//! lock key (the derived keys and channels of `crate::core::access`).
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

use std::sync::atomic::Ordering::Relaxed;

use redis_module::raw;

use crate::core::access::{KeyUse, Need};
use crate::core::{Denied, LockError, Result};
use crate::ffi::acl::{self, User};
use crate::ffi::{Ctx, RStr};

use super::known::{all_open, known_open, remember, ALL_OPEN, OPEN};
use super::rules::grants_everything;

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

    /// Whether the store runs a client's own command (not the module's upkeep or a parked
    /// client's grant).
    pub fn own_command(&self) -> bool {
        self.own_command
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

impl Access {
    /// Whether every need is allowed, with no error and no `ACL LOG` entry: for a command that
    /// leaves out of its reply what its caller may not see (`LOCK.CONTENDED`), where a name left
    /// out is no denial.
    pub fn allows(&mut self, ctx: &Ctx, needs: &[Need]) -> bool {
        let own_command = std::mem::replace(&mut self.own_command, false);
        let allowed = self.permit(ctx, needs).is_ok();
        self.own_command = own_command;
        allowed
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
    if known_open(name.bytes()) {
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
    if user.description().is_some_and(|d| grants_everything(d.bytes())) {
        remember(ctx, name.bytes());
        return State::Open(Some(name));
    }
    State::Checked(name, user)
}
