//! Applies the command metadata table (`crate::metadata`) with `RM_SetCommandInfo`.
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
use crate::server::metadata::{Arg, ArgKind, Command, KeyAccess, SINCE};

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
                ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                ArgKind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                ArgKind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            };
            r.key_spec_index = if a.kind == ArgKind::Key { 0 } else { -1 };
            if let Some(t) = a.token {
                r.token = self.c(t);
            }
            if a.optional {
                r.flags = raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int;
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
    };
    u64::from(f)
}

/// Sets the metadata of `cmd` if a command of that name is registered. Returns false only
/// when Redis rejects the metadata (it logs why).
pub fn apply(ctx: &redis_module::Context, cmd: &Command) -> bool {
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
    specs[0].flags = key_flags(cmd.key);
    specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    specs[0].bs.index.pos = 1;
    specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    specs[0].fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 { lastkey: 0, keystep: 1, limit: 0 };
    let info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: built.c(cmd.summary),
        complexity: built.c(cmd.complexity),
        since: built.c(SINCE),
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
