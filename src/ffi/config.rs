//! Registers the module configs (`lockmod.*`, Redis 7.0+) whose values live in `crate::core::config`.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use super::OK;
use crate::core::config;

extern "C" fn get_pubsub(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    config::pubsub()
}

extern "C" fn set_pubsub(_name: *const c_char, val: c_int, _privdata: *mut c_void, _err: *mut RawErr) -> c_int {
    // Redis only passes values of the registered enum; the check is for the impossible rest.
    if config::set_pubsub(val) {
        OK
    } else {
        raw::REDISMODULE_ERR as c_int
    }
}

type RawErr = *mut raw::RedisModuleString;

extern "C" fn get_scripts(_name: *const c_char, _privdata: *mut c_void) -> c_int {
    config::redisson_scripts()
}

extern "C" fn set_scripts(_name: *const c_char, val: c_int, _privdata: *mut c_void, _err: *mut RawErr) -> c_int {
    let was = config::redisson_scripts();
    if !config::set_redisson_scripts(val) {
        return raw::REDISMODULE_ERR as c_int;
    }
    if let Some(f) = scripts_set() {
        f(was, val);
    }
    OK
}

/// What follows a set of `lockmod.redisson-scripts` (from, to): `crate::redisson`'s.
pub type ScriptsSet = fn(i32, i32);

static SCRIPTS_SET: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

fn scripts_set() -> Option<ScriptsSet> {
    let p = SCRIPTS_SET.load(Relaxed);
    // SAFETY: set only by `register`, from a function pointer of type `ScriptsSet`.
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut (), ScriptsSet>(p) })
}

/// What follows a set of `lockmod.fencing-era-file`: `crate::fencing`'s.
pub type EraFileSet = fn();

static ERA_FILE_SET: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// The value `CONFIG GET lockmod.fencing-era-file` shows: a string this module owns (Redis
/// copies it), replaced at each get. Main thread only.
static ERA_FILE_SHOWN: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn get_era_file(_name: *const c_char, _privdata: *mut c_void) -> *mut raw::RedisModuleString {
    let shown = config::era_file_shown();
    // SAFETY: a NULL context makes a string this module frees itself (below, at the next get).
    let s =
        unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), shown.as_ptr() as *const c_char, shown.len()) };
    let old = ERA_FILE_SHOWN.swap(s, Relaxed);
    if !old.is_null() {
        // SAFETY: created above by an earlier get with a NULL context; Redis copied it (it
        // `sdsdup`s a string config's value) and keeps no reference.
        unsafe { api!(RedisModule_FreeString)(std::ptr::null_mut(), old) };
    }
    s
}

extern "C" fn set_era_file(
    _name: *const c_char,
    val: *mut raw::RedisModuleString,
    _privdata: *mut c_void,
    err: *mut RawErr,
) -> c_int {
    match config::set_era_file(super::args::str_bytes(val)) {
        Ok(()) => {
            let p = ERA_FILE_SET.load(Relaxed);
            if !p.is_null() {
                // SAFETY: set only by `register`, from a function pointer of type `EraFileSet`.
                let f = unsafe { std::mem::transmute::<*mut (), EraFileSet>(p) };
                f();
            }
            OK
        }
        Err(why) => {
            if !err.is_null() {
                // SAFETY: Redis passes a valid out pointer and frees the string it receives.
                unsafe {
                    *err =
                        api!(RedisModule_CreateString)(std::ptr::null_mut(), why.as_ptr() as *const c_char, why.len())
                };
            }
            raw::REDISMODULE_ERR as c_int
        }
    }
}

/// Registers every config and loads the values given at load time; `on_scripts_set` runs
/// after each set of `lockmod.redisson-scripts`, `on_era_file_set` after each set of
/// `lockmod.fencing-era-file`. False if Redis refused.
pub fn register(ctx: &redis_module::Context, on_scripts_set: ScriptsSet, on_era_file_set: EraFileSet) -> bool {
    SCRIPTS_SET.store(on_scripts_set as *mut (), Relaxed);
    ERA_FILE_SET.store(on_era_file_set as *mut (), Relaxed);
    let mut names: [*const c_char; 2] = [c"global".as_ptr(), c"sharded".as_ptr()];
    let values: [c_int; 2] = [config::PUBSUB_GLOBAL, config::PUBSUB_SHARDED];
    // SAFETY: OnLoad context; the name and enum strings are NUL-terminated statics (Redis
    // copies them anyway); the arrays hold `num_enum_vals` entries; the callbacks match the
    // C signatures and ignore `privdata`.
    let registered = unsafe {
        api!(RedisModule_RegisterEnumConfig)(
            ctx.ctx,
            c"pubsub".as_ptr(),
            config::PUBSUB_GLOBAL,
            raw::REDISMODULE_CONFIG_DEFAULT,
            names.as_mut_ptr(),
            values.as_ptr(),
            2,
            Some(get_pubsub),
            Some(set_pubsub),
            None,
            std::ptr::null_mut(),
        )
    } == OK;
    let mut names: [*const c_char; 2] = [c"off".as_ptr(), c"native".as_ptr()];
    let values: [c_int; 2] = [config::SCRIPTS_OFF, config::SCRIPTS_NATIVE];
    // SAFETY: as above.
    let registered = registered
        && unsafe {
            api!(RedisModule_RegisterEnumConfig)(
                ctx.ctx,
                c"redisson-scripts".as_ptr(),
                config::SCRIPTS_OFF,
                raw::REDISMODULE_CONFIG_DEFAULT,
                names.as_mut_ptr(),
                values.as_ptr(),
                2,
                Some(get_scripts),
                Some(set_scripts),
                None,
                std::ptr::null_mut(),
            )
        } == OK;
    // A file name the server writes: protected as `dir` and `dbfilename` are (CONFIG SET needs
    // `enable-protected-configs`; redis.conf, the command line and MODULE LOADEX always may).
    // SAFETY: OnLoad context; the name and default are NUL-terminated statics; the callbacks
    // match the C signatures and ignore `privdata`.
    let registered = registered
        && unsafe {
            api!(RedisModule_RegisterStringConfig)(
                ctx.ctx,
                c"fencing-era-file".as_ptr(),
                c"lockmod-fencing-era".as_ptr(),
                raw::REDISMODULE_CONFIG_DEFAULT | raw::REDISMODULE_CONFIG_PROTECTED,
                Some(get_era_file),
                Some(set_era_file),
                None,
                std::ptr::null_mut(),
            )
        } == OK;
    // SAFETY: OnLoad context, after every config is registered.
    registered && unsafe { api!(RedisModule_LoadConfigs)(ctx.ctx) } == OK
}
