//! Asking the server about its script cache (`SCRIPT EXISTS`, `INFO` fields, whether `SCRIPT`
//! is renamed), for `crate::redisson::cache`. A command filter may not call into Redis; a
//! command (and `OnLoad`) may.

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr::null_mut;

use redis_module::raw;

use super::{Ctx, RawStr};

const REPLY_ARRAY: c_int = raw::REDISMODULE_REPLY_ARRAY as c_int;
const REPLY_INTEGER: c_int = raw::REDISMODULE_REPLY_INTEGER as c_int;

/// `SCRIPT EXISTS` of `shas`: one answer per SHA1, or `None` if the call failed.
pub fn exists(ctx: &Ctx, shas: &[&str]) -> Option<Vec<bool>> {
    let mut v: Vec<RawStr> = shas
        .iter()
        // SAFETY: a NULL context is allowed (freed below); Redis copies the bytes.
        .map(|s| unsafe { api!(RedisModule_CreateString)(null_mut(), s.as_ptr() as *const c_char, s.len()) })
        .collect();
    // SAFETY: live context; "cv" takes a C string and (RedisModuleString **, size_t) of live
    // strings; no "!": nothing is replicated. The reply and its elements are read before it is
    // freed here.
    let answers = unsafe {
        let reply = api!(RedisModule_Call)(
            ctx.raw(),
            c"SCRIPT".as_ptr(),
            c"cv".as_ptr(),
            c"EXISTS".as_ptr(),
            v.as_mut_ptr(),
            v.len(),
        );
        let answers = (!reply.is_null()
            && api!(RedisModule_CallReplyType)(reply) == REPLY_ARRAY
            && api!(RedisModule_CallReplyLength)(reply) == shas.len())
        .then(|| {
            (0..shas.len())
                .map(|i| {
                    let e = api!(RedisModule_CallReplyArrayElement)(reply, i);
                    (!e.is_null() && api!(RedisModule_CallReplyType)(e) == REPLY_INTEGER)
                        .then(|| api!(RedisModule_CallReplyInteger)(e) == 1)
                })
                .collect::<Option<Vec<bool>>>()
        })
        .flatten();
        if !reply.is_null() {
            api!(RedisModule_FreeCallReply)(reply);
        }
        answers
    };
    // SAFETY: each string was created above and is freed once.
    v.into_iter().for_each(|s| unsafe { api!(RedisModule_FreeString)(null_mut(), s) });
    answers
}

/// An unsigned field of an `INFO` section, or `None` if the server has no such field.
pub fn info_field(ctx: &Ctx, section: &str, field: &str) -> Option<u64> {
    let (Ok(section), Ok(field)) = (CString::new(section), CString::new(field)) else { return None };
    let (Some(get), Some(get_field), Some(free)) = (
        // SAFETY: read-only access to pointers Redis wrote during RedisModule_Init.
        unsafe { raw::RedisModule_GetServerInfo },
        unsafe { raw::RedisModule_ServerInfoGetFieldUnsigned },
        unsafe { raw::RedisModule_FreeServerInfo },
    ) else {
        return None;
    };
    // SAFETY: live context; the data is freed once, after the field was read.
    unsafe {
        let data = get(ctx.raw(), section.as_ptr());
        if data.is_null() {
            return None;
        }
        let mut err: c_int = 0;
        let value = get_field(data, field.as_ptr(), &mut err);
        free(ctx.raw(), data);
        (err == 0).then_some(value)
    }
}

/// True if `SCRIPT` runs under its own name: the filter knows a flush by its name.
pub fn script_named(ctx: &Ctx) -> bool {
    // SAFETY: live context; "cc" takes two NUL-terminated strings; the reply is read before
    // it is freed here.
    unsafe {
        let reply = api!(RedisModule_Call)(
            ctx.raw(),
            c"COMMAND".as_ptr(),
            c"cc".as_ptr(),
            c"INFO".as_ptr(),
            c"script".as_ptr(),
        );
        if reply.is_null() {
            return false;
        }
        let named =
            api!(RedisModule_CallReplyType)(reply) == REPLY_ARRAY && api!(RedisModule_CallReplyLength)(reply) == 1 && {
                let e = api!(RedisModule_CallReplyArrayElement)(reply, 0);
                !e.is_null() && api!(RedisModule_CallReplyType)(e) == REPLY_ARRAY
            };
        api!(RedisModule_FreeCallReply)(reply);
        named
    }
}
