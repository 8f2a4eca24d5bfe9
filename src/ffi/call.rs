//! Calling a command from the module (`RM_Call`), for running a Redisson script itself: its
//! reply is copied to the client as the script's own.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw;

use super::filter::Owned;
use super::{Ctx, RawStr};

/// A reply of [`Ctx::call_replicated`], freed on drop.
pub struct CallReply(*mut raw::RedisModuleCallReply);

impl CallReply {
    /// True for an error reply.
    pub fn is_error(&self) -> bool {
        // SAFETY: a live call reply.
        let t = unsafe { api!(RedisModule_CallReplyType)(self.0) };
        t == raw::REDISMODULE_REPLY_ERROR as c_int
    }

    /// The reply's text (an error's message); empty for a reply without one.
    pub fn text(&self) -> &[u8] {
        let mut len = 0usize;
        // SAFETY: a live reply; Redis writes the length.
        let p = unsafe { api!(RedisModule_CallReplyStringPtr)(self.0, &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: `len` bytes at `p`, alive as long as the reply, which `self` borrows.
        unsafe { std::slice::from_raw_parts(p as *const u8, len) }
    }
}

impl Drop for CallReply {
    fn drop(&mut self) {
        if let Some(free) = opt!(RedisModule_FreeCallReply) {
            // SAFETY: a live call reply, freed once.
            unsafe { free(self.0) };
        }
    }
}

impl Ctx {
    /// Whether this server has what [`Ctx::call_replicated`] and
    /// [`Ctx::reply_with_call_reply`] need.
    pub fn can_call_scripts() -> bool {
        opt!(RedisModule_Call).is_some()
            && opt!(RedisModule_ReplyWithCallReply).is_some()
            && opt!(RedisModule_FreeCallReply).is_some()
    }

    /// Runs `cmd args...` as the client's own call would: its effects replicated (`!`), its
    /// reply in the client's protocol (`0`). `None` if Redis would not run it.
    pub fn call_replicated(&self, cmd: &CStr, args: &[Owned]) -> Option<CallReply> {
        let call = opt!(RedisModule_Call)?;
        let mut v: Vec<RawStr> = args.iter().map(|s| s.as_ref().ptr).collect();
        // SAFETY: live context; "v" consumes (RedisModuleString **, size_t) of live strings,
        // which `args` keeps alive for the call.
        let reply = unsafe { call(self.0, cmd.as_ptr(), c"!0v".as_ptr(), v.as_mut_ptr(), v.len()) };
        (!reply.is_null()).then_some(CallReply(reply))
    }

    /// Replies to the client with a call's reply.
    pub fn reply_with_call_reply(&self, reply: &CallReply) {
        if let Some(reply_with) = opt!(RedisModule_ReplyWithCallReply) {
            // SAFETY: live context and call reply; Redis copies the reply.
            unsafe { reply_with(self.0, reply.0) };
        }
    }
}
