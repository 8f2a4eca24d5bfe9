//! Command metadata for Redis 7 (`COMMAND INFO`, `COMMAND DOCS`, `COMMAND GETKEYS`): data only,
//! one family, a file per family of commands: the locks' rows and what every file shares
//! (here), the synchronizers' ([`sync`]), GCRA's ([`gcra`]) and the rate limiter's
//! ([`ratelimiter`]).
//!
//! One row per command of the design, whether or not it is registered yet: the apply step in
//! `ffi::metadata` looks each command up by name and skips the rows of commands that do not
//! exist, so a command table added later picks up its row by registering the name.

pub mod gcra;
pub mod ratelimiter;
pub mod sync;

use crate::ffi::metadata::{Arg, ArgKind, Command, KeyAccess};

/// `COMMAND DOCS` "since": every command so far came with the first release.
pub const SINCE: &str = crate::server::version::FIRST_RELEASE;

pub(super) const fn arg(name: &'static str, kind: ArgKind) -> Arg {
    Arg { name, kind, token: None, optional: false, multiple: false, subargs: &[] }
}

const KEY: Arg = arg("key", ArgKind::Key);
const OWNER: Arg = arg("owner", ArgKind::String);
const LEASE: Arg = arg("lease", ArgKind::Integer);
const WAIT: Arg = arg("wait", ArgKind::Integer);
pub(super) const COUNT: Arg =
    Arg { name: "count", kind: ArgKind::Integer, token: Some("COUNT"), optional: true, multiple: false, subargs: &[] };
pub(super) const BLOCK: Arg =
    Arg { name: "ms", kind: ArgKind::Integer, token: Some("BLOCK"), optional: true, multiple: false, subargs: &[] };
const TOKEN: Arg = Arg {
    name: "token",
    kind: ArgKind::PureToken,
    token: Some("TOKEN"),
    optional: true,
    multiple: false,
    subargs: &[],
};
const NOQUEUE: Arg = Arg {
    name: "noqueue",
    kind: ArgKind::PureToken,
    token: Some("NOQUEUE"),
    optional: true,
    multiple: false,
    subargs: &[],
};
const LATCH: Arg = Arg {
    name: "latch",
    kind: ArgKind::Block,
    token: Some("LATCH"),
    optional: true,
    multiple: false,
    subargs: &[arg("request_id", ArgKind::String), arg("latch_ms", ArgKind::Integer)],
};
const SIDE: Arg = Arg {
    name: "side",
    kind: ArgKind::OneOf,
    token: None,
    optional: false,
    multiple: false,
    subargs: &[
        Arg {
            name: "read",
            kind: ArgKind::PureToken,
            token: Some("READ"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
        Arg {
            name: "write",
            kind: ArgKind::PureToken,
            token: Some("WRITE"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
    ],
};

/// `LOCK.CONTENDED`'s `BY WAIT|WAITERS`.
const BY: Arg = Arg {
    name: "by",
    kind: ArgKind::OneOf,
    token: Some("BY"),
    optional: true,
    multiple: false,
    subargs: &[
        Arg {
            name: "wait",
            kind: ArgKind::PureToken,
            token: Some("WAIT"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
        Arg {
            name: "waiters",
            kind: ArgKind::PureToken,
            token: Some("WAITERS"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
    ],
};

pub static COMMANDS: &[Command] = &[
    Command {
        name: "LOCK.ACQUIRE",
        summary: "Acquires a reentrant lock (Redisson RLock), optionally waiting and fenced",
        complexity: "O(1)",
        arity: -4,
        key: KeyAccess::ReadUpdate,
        acl: "write slow blocking",
        args: &[KEY, OWNER, LEASE, BLOCK, TOKEN],
    },
    Command {
        name: "LOCK.UNLOCK",
        summary: "Releases one hold of a reentrant lock and wakes its waiters",
        complexity: "O(1)",
        arity: -4,
        key: KeyAccess::ReadUpdate,
        acl: "write fast",
        args: &[KEY, OWNER, LEASE, LATCH],
    },
    Command {
        name: "LOCK.RENEW",
        summary: "Extends the lease of a held reentrant lock",
        complexity: "O(1)",
        arity: 4,
        key: KeyAccess::Update,
        acl: "write fast",
        args: &[KEY, OWNER, LEASE],
    },
    Command {
        name: "LOCK.FORCEUNLOCK",
        summary: "Deletes a reentrant lock whoever holds it and wakes its waiters",
        complexity: "O(1)",
        arity: 2,
        key: KeyAccess::Delete,
        acl: "write fast",
        args: &[KEY],
    },
    Command {
        name: "LOCK.INFO",
        summary: "Shows a lock's kind, holders, lease, queue, parked clients and fencing counter",
        complexity: "O(N) where N is COUNT (default 100): the items listed",
        arity: -2,
        key: KeyAccess::Read,
        acl: "read slow",
        args: &[KEY, COUNT],
    },
    Command {
        name: "LOCK.CONTENDED",
        summary: "Lists the names clients are parked on, the worst first: kind, holders, hold age, waiters",
        complexity: "O(M log M + N) where M is the number of names with parked clients and N is COUNT \
                     (default 10): the names listed",
        arity: -1,
        key: KeyAccess::NoKey,
        acl: "keyspace read slow",
        args: &[COUNT, BY],
    },
    Command {
        name: "RWLOCK.RLOCK",
        summary: "Acquires a read hold of a read-write lock (Redisson RReadWriteLock)",
        complexity: "O(1)",
        arity: -4,
        key: KeyAccess::ReadUpdate,
        acl: "write slow blocking",
        args: &[KEY, OWNER, LEASE, BLOCK],
    },
    Command {
        name: "RWLOCK.WLOCK",
        summary: "Acquires the write hold of a read-write lock, optionally waiting and fenced",
        complexity: "O(1)",
        arity: -4,
        key: KeyAccess::ReadUpdate,
        acl: "write slow blocking",
        args: &[KEY, OWNER, LEASE, BLOCK, TOKEN],
    },
    Command {
        name: "RWLOCK.UNLOCK",
        summary: "Releases one read or write hold of a read-write lock",
        complexity: "O(N) where N is the number of read holds",
        arity: -5,
        key: KeyAccess::ReadUpdate,
        acl: "write slow",
        args: &[KEY, OWNER, SIDE, LEASE, LATCH],
    },
    Command {
        name: "RWLOCK.RENEW",
        summary: "Extends the lease of an owner's holds of a read-write lock",
        complexity: "O(N) where N is the owner's number of read holds",
        arity: 4,
        key: KeyAccess::Update,
        acl: "write slow",
        args: &[KEY, OWNER, LEASE],
    },
    Command {
        name: "RWLOCK.FORCEUNLOCK",
        summary: "Deletes a read-write lock if it is in the given mode",
        complexity: "O(1)",
        arity: 3,
        key: KeyAccess::ReadDelete,
        acl: "write fast",
        args: &[KEY, SIDE],
    },
    Command {
        name: "FAIRLOCK.ACQUIRE",
        summary: "Acquires a fair lock (Redisson RFairLock) or joins its queue, optionally fenced",
        complexity: "O(N) where N is the number of queued waiters",
        arity: -5,
        key: KeyAccess::ReadUpdate,
        acl: "write slow blocking",
        args: &[KEY, OWNER, LEASE, WAIT, NOQUEUE, BLOCK, TOKEN],
    },
    Command {
        name: "FAIRLOCK.UNLOCK",
        summary: "Releases one hold of a fair lock and notifies the head of its queue",
        complexity: "O(N) where N is the number of queued waiters",
        arity: -4,
        key: KeyAccess::ReadUpdate,
        acl: "write slow",
        args: &[KEY, OWNER, LEASE, LATCH],
    },
    Command {
        name: "FAIRLOCK.CANCEL",
        summary: "Removes a waiter from a fair lock's queue",
        complexity: "O(N) where N is the number of queued waiters",
        arity: 4,
        key: KeyAccess::TypeOnly,
        acl: "write slow",
        args: &[KEY, OWNER, WAIT],
    },
    Command {
        name: "FAIRLOCK.RENEW",
        summary: "Extends the lease of a held fair lock",
        complexity: "O(1)",
        arity: 4,
        key: KeyAccess::Update,
        acl: "write fast",
        args: &[KEY, OWNER, LEASE],
    },
    Command {
        name: "FAIRLOCK.FORCEUNLOCK",
        summary: "Deletes a fair lock whoever holds it and notifies the head of its queue",
        complexity: "O(N) where N is the number of queued waiters",
        arity: 2,
        key: KeyAccess::Delete,
        acl: "write slow",
        args: &[KEY],
    },
    Command {
        name: "LOCK.HOLDS",
        summary: "Returns how many holds an owner has on a reentrant or fenced lock",
        complexity: "O(1)",
        arity: 3,
        key: KeyAccess::Read,
        acl: "read fast",
        args: &[KEY, OWNER],
    },
    Command {
        name: "RWLOCK.HOLDS",
        summary: "Returns an owner's read and write hold counts on a read-write lock",
        complexity: "O(1)",
        arity: 3,
        key: KeyAccess::Read,
        acl: "read fast",
        args: &[KEY, OWNER],
    },
    Command {
        name: "FAIRLOCK.HOLDS",
        summary: "Returns how many holds an owner has on a fair lock",
        complexity: "O(1)",
        arity: 3,
        key: KeyAccess::Read,
        acl: "read fast",
        args: &[KEY, OWNER],
    },
];
