//! Applies command metadata (the table is `crate::server::metadata`'s; its types are here)
//! with `RM_SetCommandInfo`.
//!
//! Built here rather than with the SDK's command-info builder, which leaks its argument
//! structs (their free function is private): the raw structs below point into CStrings and
//! vectors owned by one [`Built`] value that lives until the call returns. Redis copies every
//! string and array it is given (`zstrdup` in `RM_SetCommandInfo` and `moduleCopyCommandArgs`,
//! module.c 7.0.15), so nothing has to outlive the call.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::OK;

/// What an argument is, as `COMMAND DOCS` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// The lock key (key spec 0).
    Key,
    String,
    Integer,
    /// A decimal number (`GCRA`'s period in seconds).
    Double,
    /// A bare word such as `TOKEN`.
    PureToken,
    /// Exactly one of the sub-arguments.
    OneOf,
    /// The sub-arguments in sequence, after the argument's token.
    Block,
}

#[derive(Debug)]
pub struct Arg {
    pub name: &'static str,
    pub kind: ArgKind,
    pub token: Option<&'static str>,
    pub optional: bool,
    /// Given one or more times (`id [id ...]`).
    pub multiple: bool,
    pub subargs: &'static [Arg],
}

/// What a command does with its key, as key-spec flags (`REDISMODULE_CMD_KEY_*`). Redis' ACL
/// asks read permission for ACCESS and write permission for INSERT, UPDATE or DELETE, so these
/// are what a user needs on the lock key; the derived keys are listed in `crate::core::access`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAccess {
    /// `RO ACCESS`: reads what it replies (`LOCK.INFO`).
    Read,
    /// `RW ACCESS UPDATE`: reads the holds and the TTL (replied when refused) and changes
    /// them (acquire, unlock).
    ReadUpdate,
    /// `RW UPDATE`: moves the expiry of a lock the owner holds (renew).
    Update,
    /// `RM DELETE`: deletes the key whatever it holds (force unlock).
    Delete,
    /// `RW ACCESS DELETE`: deletes the key if it is in the mode given (`RWLOCK.FORCEUNLOCK`).
    ReadDelete,
    /// `RO`: only the key's type is checked (`FAIRLOCK.CANCEL` changes the queue, not the lock).
    TypeOnly,
    /// No key argument: no key spec (`LOCK.CONTENDED` lists names across the keyspace and
    /// checks each against the caller's ACL itself).
    NoKey,
}

#[derive(Debug)]
pub struct Command {
    pub name: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// As Redis counts it: the command name included, negative for "at least".
    pub arity: i32,
    pub key: KeyAccess,
    /// ACL categories (Redis 7.2+ and Valkey, where a module sets them; Redis 7.0 gives module
    /// commands none). As Redis' own: `write` or `read`, `fast` or `slow`, and `blocking` where
    /// `BLOCK` is accepted.
    pub acl: &'static str,
    pub args: &'static [Arg],
}

static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// Owner of every buffer the raw structs point into.
#[derive(Default)]
struct Built {
    strings: Vec<CString>,
    arg_arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl Built {
    /// A C copy of `s` owned by `self`. The table holds no NUL bytes; one would only empty it.
    fn c(&mut self, s: &str) -> *const std::os::raw::c_char {
        let c = CString::new(s).unwrap_or_default();
        let p = c.as_ptr();
        // Moving a CString does not move its heap buffer, so `p` stays valid.
        self.strings.push(c);
        p
    }

    /// A terminated array of raw arguments (null for none); sub-arguments recursively.
    fn args(&mut self, args: &[Arg]) -> *mut raw::RedisModuleCommandArg {
        if args.is_empty() {
            return ptr::null_mut();
        }
        let mut out = Vec::with_capacity(args.len() + 1);
        for a in args {
            // SAFETY: an all-zero RedisModuleCommandArg is valid (null pointers, zero ints).
            let mut r: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            r.name = self.c(a.name);
            r.type_ = match a.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                ArgKind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            };
            r.key_spec_index = if a.kind == ArgKind::Key { 0 } else { -1 };
            if let Some(t) = a.token {
                r.token = self.c(t);
            }
            if a.optional {
                r.flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
            }
            if a.multiple {
                r.flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
            }
            r.subargs = self.args(a.subargs);
            out.push(r);
        }
        // SAFETY: as above; the zeroed entry (null name) terminates the array.
        out.push(unsafe { std::mem::zeroed() });
        let p = out.as_mut_ptr();
        // Moving the Vec does not move its heap buffer.
        self.arg_arrays.push(out);
        p
    }
}

fn key_flags(access: KeyAccess) -> u64 {
    use raw::*;
    // One of RO/RW/OW/RM (what happens to the key), then ACCESS and at most one of INSERT,
    // UPDATE, DELETE (what happens to its data), as Redis documents key-spec flags.
    let f = match access {
        KeyAccess::Read => REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS,
        KeyAccess::ReadUpdate => REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_UPDATE,
        KeyAccess::Update => REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_UPDATE,
        KeyAccess::Delete => REDISMODULE_CMD_KEY_RM | REDISMODULE_CMD_KEY_DELETE,
        KeyAccess::ReadDelete => REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_DELETE,
        KeyAccess::TypeOnly => REDISMODULE_CMD_KEY_RO,
        KeyAccess::NoKey => 0,
    };
    u64::from(f)
}

/// Sets the metadata of `cmd` if a command of that name is registered. Returns false only
/// when Redis rejects the metadata (it logs why).
pub fn apply(ctx: &redis_module::Context, cmd: &Command, since: &str) -> bool {
    let Ok(name) = CString::new(cmd.name) else { return false };
    // SAFETY: OnLoad context; the name is NUL-terminated. Null when the command is not
    // registered (yet): its row then waits for the command table that adds it.
    let handle = unsafe { api!(RedisModule_GetCommand)(ctx.ctx, name.as_ptr()) };
    if handle.is_null() {
        return true;
    }
    let mut built = Built::default();
    // SAFETY: an all-zero key spec is valid and, with begin_search_type 0 (INVALID), is the
    // array's terminator.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    // A keyless command's array is the terminator alone.
    if cmd.key != KeyAccess::NoKey {
        specs[0].flags = key_flags(cmd.key);
        specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        specs[0].bs.index.pos = 1;
        specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        specs[0].fk.range =
            raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: 0, keystep: 1, limit: 0 };
    }
    let info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: built.c(cmd.summary),
        complexity: built.c(cmd.complexity),
        since: built.c(since),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: cmd.arity,
        key_specs: specs.as_mut_ptr(),
        args: built.args(cmd.args),
    };
    // SAFETY: `handle` is a live command of this module; every pointer in `info` points into
    // `built`, `specs` or `VERSION`, all alive for the call; Redis copies what it keeps.
    if unsafe { api!(RedisModule_SetCommandInfo)(handle, &info) } != OK {
        return false;
    }
    // SAFETY: read-only access to a pointer Redis wrote during RedisModule_Init.
    if let Some(set_acl) = unsafe { raw::RedisModule_SetCommandACLCategories } {
        let cats = built.c(cmd.acl);
        // SAFETY: live command handle, NUL-terminated category list (Redis 7.2+ only).
        if unsafe { set_acl(handle, cats) } != OK {
            super::log(c"warning", &format!("lockmod: ACL categories of {} rejected", cmd.name));
        }
    }
    drop(built);
    true
}
