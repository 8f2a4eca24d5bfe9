//! Module work run at the end of the current execution unit (`RM_AddPostNotificationJob`,
//! Redis 7.2+ and Valkey): once the command, transaction or script now running is done, before
//! any other command runs, with its writes propagated inside that unit. Where Redis calls the
//! module while a script is busy (it still handles disconnects then), the module's writes wait
//! here for the script's end, so that the script's view does not change under it.

use std::os::raw::c_void;

use redis_module::raw;

use super::log::guarded;
use super::{Ctx, RawCtx, OK};

impl Ctx {
    /// Runs `job` at the end of the current execution unit, with a context of its own (a
    /// temporary client in this context's database). False where the server has no such jobs
    /// (Redis 7.0), refuses one (loading, a read-only replica), or this context has no client.
    pub fn after_this_unit(&self, job: fn(&Ctx)) -> bool {
        let Some(add) = opt!(RedisModule_AddPostNotificationJob) else { return false };
        // Redis reads the database of the context's client.
        if self.client_id() == 0 {
            return false;
        }
        let data = Box::into_raw(Box::new(job)) as *mut c_void;
        // SAFETY: a live module context with a client (checked above); ownership of `data` (a
        // `Box<fn(&Ctx)>`) passes to Redis, which hands it to `run_job` and then to `free_job`
        // exactly once, or never takes it (an error: freed below).
        let added = unsafe { add(self.0, Some(run_job), data, Some(free_job)) } == OK;
        if !added {
            // SAFETY: Redis refused the job and kept nothing: `data` is still ours, freed once.
            drop(unsafe { Box::from_raw(data as *mut fn(&Ctx)) });
        }
        added
    }
}

extern "C" fn run_job(ctx: RawCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the `Box<fn(&Ctx)>` of `after_this_unit`, live until `free_job`, which
    // Redis calls after this; only read here.
    let job = unsafe { *(data as *const fn(&Ctx)) };
    let ctx = Ctx(ctx);
    guarded("a job at the end of an execution unit", (), || job(&ctx));
}

extern "C" fn free_job(data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: the `Box<fn(&Ctx)>` leaked by `after_this_unit`; Redis frees it once, here.
        drop(unsafe { Box::from_raw(data as *mut fn(&Ctx)) });
    }
}
