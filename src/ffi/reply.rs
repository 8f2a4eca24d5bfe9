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

/// A stack buffer for formatting integers without allocating.
pub(super) mod itoa_buf {
    #[derive(Default)]
    pub struct Buf([u8; 24], usize);

    /// "00" to "99": two digits per division (a lease's absolute expiry has 13).
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";

    impl Buf {
        pub fn format(&mut self, n: i64) -> &[u8] {
            let mut v = n.unsigned_abs();
            let mut i = self.0.len();
            while v >= 100 {
                let d = (v % 100) as usize * 2;
                v /= 100;
                i -= 2;
                self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
            }
            if v >= 10 {
                let d = v as usize * 2;
                i -= 2;
                self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
            } else {
                i -= 1;
                self.0[i] = b'0' + v as u8;
            }
            if n < 0 {
                i -= 1;
                self.0[i] = b'-';
            }
            self.1 = i;
            &self.0[i..]
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn integers_format_as_redis_prints_them() {
            for n in [0, 1, 9, 10, 99, 100, 101, 12345, -1, -10, -99, -100, 1_700_000_000_123, i64::MAX, i64::MIN] {
                assert_eq!(super::Buf::default().format(n), n.to_string().as_bytes(), "{n}");
            }
        }
    }
}

pub use itoa_buf::Buf as IntBuf;
