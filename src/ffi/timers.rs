//! Module timers, generic over what a timer carries. The code that owns the work names it with
//! a type implementing [`Timer`]; a trampoline monomorphised for that type fires it. So this
//! file knows nothing of what timers do, and imports none of the code it calls back: the
//! wake-up path (`src/blocking/`) calls down into ffi, never the other way round.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::os::raw::c_void;

use redis_module::raw;

use super::latency::timed;
use super::log::guarded;
use super::{Ctx, RawCtx, OK};

/// What a timer carries, and what it does when it fires.
pub trait Timer: Sized + 'static {
    /// The latency event its run is reported under: timers do the module's O(N) background
    /// work, so each kind of work is its own event.
    fn latency_event(&self) -> &'static CStr;

    /// The timer fired: run its work, on the main thread, with the timer's context.
    fn fire(self, ctx: &Ctx);
}

/// A module timer's id, typed by what the timer carries: [`Ctx::stop_timer`] takes back data
/// of exactly the type [`Ctx::create_timer`] gave Redis.
pub struct TimerId<T>(u64, PhantomData<fn() -> T>);

impl<T> Clone for TimerId<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for TimerId<T> {}

impl<T> PartialEq for TimerId<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<T> std::fmt::Debug for TimerId<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TimerId({})", self.0)
    }
}

impl Ctx {
    /// Runs `data.fire()` once, `ms` from now.
    pub fn create_timer<T: Timer>(&self, ms: i64, data: T) -> TimerId<T> {
        let data = Box::into_raw(Box::new(data)) as *mut c_void;
        // SAFETY: ownership of `data` (a `Box<T>`) passes to the timer; `on_timer::<T>`, the
        // callback given with it, or `stop_timer` with this `TimerId<T>` takes it back.
        let id = unsafe { api!(RedisModule_CreateTimer)(self.0, ms.max(0), Some(on_timer::<T>), data) };
        TimerId(id, PhantomData)
    }

    /// Cancels a timer that has not fired, dropping its data. False if it already fired.
    pub fn stop_timer<T: Timer>(&self, id: TimerId<T>) -> bool {
        let mut data: *mut c_void = std::ptr::null_mut();
        // SAFETY: on success Redis returns the data pointer we created in `create_timer` for
        // this id, a `Box<T>` (the id's type says so), which we own again and free here once.
        unsafe {
            if api!(RedisModule_StopTimer)(self.0, id.0, &mut data) != OK {
                return false;
            }
            if !data.is_null() {
                drop(Box::from_raw(data as *mut T));
            }
        }
        true
    }
}

impl Ctx {
    /// Runs `f` once, `ms` from now: for a quick probe, not reported to the latency monitor
    /// (a panic in `f` is logged, never unwound into Redis).
    pub fn create_plain_timer(&self, ms: i64, f: fn(&Ctx)) {
        let data = Box::into_raw(Box::new(f)) as *mut c_void;
        // SAFETY: a live module context; ownership of `data` (a `Box<fn(&Ctx)>`) passes to the
        // timer, and `on_plain_timer` takes it back. Redis refuses to unload the module while
        // the timer is armed.
        unsafe { api!(RedisModule_CreateTimer)(self.0, ms.max(0), Some(on_plain_timer), data) };
    }
}

extern "C" fn on_plain_timer(ctx: RawCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the `Box<fn(&Ctx)>` leaked by `create_plain_timer`; a fired timer's
    // data comes back exactly once, here.
    let f = *unsafe { Box::from_raw(data as *mut fn(&Ctx)) };
    let ctx = Ctx(ctx);
    guarded("a timer", (), || f(&ctx));
}

extern "C" fn on_timer<T: Timer>(ctx: RawCtx, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the `Box<T>` leaked by `create_timer::<T>`, which armed this very
    // instance of the callback; a fired timer's data comes back exactly once, here.
    let data = *unsafe { Box::from_raw(data as *mut T) };
    let ctx = Ctx(ctx);
    let event = data.latency_event();
    timed(ctx.0, event, || guarded("a timer", (), || data.fire(&ctx)));
}
