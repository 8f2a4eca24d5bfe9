//! Writing a command's reply, and a stack buffer for formatting integers.

use std::os::raw::{c_char, c_long};

use redis_module::raw;

use super::{Ctx, OK};
use crate::core::Reply;

impl Ctx {
    pub fn reply(&self, r: &Reply) {
        // SAFETY: every call below writes to the reply buffer of the live context `self.0`;
        // string pointers stay valid for the call and Redis copies them.
        unsafe {
            match r {
                Reply::Nil => api!(RedisModule_ReplyWithNull)(self.0),
                Reply::Int(n) => api!(RedisModule_ReplyWithLongLong)(self.0, *n),
                Reply::Bulk(b) => api!(RedisModule_ReplyWithStringBuffer)(self.0, b.as_ptr() as *const c_char, b.len()),
                Reply::Error(e) => {
                    self.reply_error(e);
                    OK
                }
                Reply::Simple(s) => {
                    let Ok(s) = std::ffi::CString::new(s.as_bytes()) else { return self.reply_error("ERR bad reply") };
                    api!(RedisModule_ReplyWithSimpleString)(self.0, s.as_ptr())
                }
                Reply::Array(items) => {
                    api!(RedisModule_ReplyWithArray)(self.0, items.len() as c_long);
                    for i in items {
                        self.reply(i);
                    }
                    OK
                }
                Reply::Map(pairs) => {
                    // Redis turns a map into a flat field/value array for RESP2 clients.
                    api!(RedisModule_ReplyWithMap)(self.0, pairs.len() as c_long);
                    for (k, v) in pairs {
                        self.reply(k);
                        self.reply(v);
                    }
                    OK
                }
            };
        }
    }

    pub fn reply_error(&self, msg: &str) {
        let Ok(m) = std::ffi::CString::new(msg.replace('\0', " ")) else { return };
        // SAFETY: live context; Redis copies the message.
        unsafe { api!(RedisModule_ReplyWithError)(self.0, m.as_ptr()) };
    }
}

/// A stack buffer for formatting integers without allocating (`core::IntBuf`).
pub(super) mod itoa_buf {
    pub use crate::core::IntBuf as Buf;
}

pub use itoa_buf::Buf as IntBuf;
