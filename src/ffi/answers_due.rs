//! When Redis writes the answers of the clients a module unblocked, and how the module runs
//! its own code right before that moment.
//!
//! An answer handed to Redis (`RM_UnblockClient`) is written only when Redis handles unblocked
//! clients (`moduleHandleBlockedClients`, in `beforeSleep`). What a timeout of the client
//! (the BLOCK time running out, `CLIENT UNBLOCK ... TIMEOUT`) does to an answer waiting there
//! depends on the release (read in each one's `src/module.c`, `blocked.c`, `server.c`):
//!
//! - Redis 7.0: the timeout callback is skipped and the answer dropped: no reply at all. The
//!   `EVENTLOOP` before-sleep event fires right before `moduleHandleBlockedClients`.
//! - Redis 7.2 and Valkey 7.2: the same, and the server then trips its own assertion
//!   (`c->duration == 0` in `resetClient`; redis/redis#13015, fixed in 7.4). The event fires
//!   after `moduleHandleBlockedClients`, so it is no help.
//! - Redis 7.4+, Valkey 8+: the timeout is ignored and the answer written.
//!
//! So before 7.4 an answer must not wait in Redis' list while a command may run: the code that
//! answers keeps the client parked until [`before_answers_written`]'s hook, which runs right
//! before Redis writes answers, with no command in between: on 7.0 from the event, on 7.2 from
//! a handle of the module's own in Redis' list ([`super::handover`]).

use std::cell::Cell;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use redis_module::raw;

use super::handover;
use super::latency::timed;
use super::log::{guarded, log};
use super::{Ctx, RawCtx, OK};

/// How the server treats an answer racing a timeout, and where the module's hook runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerOrder {
    /// Redis 7.0: the `EVENTLOOP` before-sleep event, right before answers are written.
    BeforeSleepEvent,
    /// Redis 7.2, Valkey 7.2: a handle of the module's own, released at once ([`handover`]).
    Handover,
    /// Redis 7.4+, Valkey 8+: the answer goes to Redis at once.
    Immediate,
}

/// The order of a server of version `version` (`RM_GetServerVersion`: 0x00MMmmpp). A release
/// candidate carries the version before its release (7.2's are 7.1.24x, 7.4's 7.3.24x); Valkey
/// reports its own (7.2.x, 8.x), and Valkey 7.2 is Redis 7.2.4's code on this path.
pub const fn order_of(version: i32) -> AnswerOrder {
    if version < 0x0007_0100 {
        AnswerOrder::BeforeSleepEvent
    } else if version < 0x0007_0300 {
        AnswerOrder::Handover
    } else {
        AnswerOrder::Immediate
    }
}

/// The environment variable that makes a later server take Redis 7.2's path: `handover`. For
/// tests: CI has no 7.2 binary, and this runs 7.2's code on Valkey 9 there. Ignored (and
/// logged) where the server cannot take it: Redis 7.0 has no calls that may block.
pub const ORDER_ENV: &str = "LOCKMOD_TEST_ANSWER_ORDER";

/// 0: not known yet, then 1 + the order's index in [`ORDERS`].
static ORDER: AtomicU8 = AtomicU8::new(0);
const ORDERS: [AnswerOrder; 3] = [AnswerOrder::BeforeSleepEvent, AnswerOrder::Handover, AnswerOrder::Immediate];

fn store(order: AnswerOrder) -> AnswerOrder {
    let n = ORDERS.iter().position(|o| *o == order).unwrap_or(2);
    ORDER.store(n as u8 + 1, Relaxed);
    order
}

/// Decides this server's order at load, from its version and [`ORDER_ENV`].
pub fn init() -> AnswerOrder {
    // SAFETY: no arguments; returns the server's version as 0x00MMmmpp.
    let version = unsafe { api!(RedisModule_GetServerVersion)() };
    let order = order_of(version);
    match std::env::var(ORDER_ENV) {
        Err(_) => store(order),
        Ok(v) if v == "handover" && order != AnswerOrder::BeforeSleepEvent => store(AnswerOrder::Handover),
        Ok(v) => {
            log(c"warning", &format!("lockmod: {ORDER_ENV}={v} ignored here (only `handover`, on Redis 7.2 or later)"));
            store(order)
        }
    }
}

/// This server's [`AnswerOrder`] ([`init`]'s, or the version's if not loaded through it).
pub fn answer_order() -> AnswerOrder {
    match ORDER.load(Relaxed) {
        n @ 1..=3 => ORDERS[n as usize - 1],
        // SAFETY: no arguments; returns the server's version as 0x00MMmmpp.
        _ => store(order_of(unsafe { api!(RedisModule_GetServerVersion)() })),
    }
}

/// What `INFO lockmod` shows as `lockmod_answer_order`.
pub fn answer_order_name() -> &'static str {
    match answer_order() {
        AnswerOrder::BeforeSleepEvent => "before-sleep-event",
        AnswerOrder::Handover => "handover",
        AnswerOrder::Immediate => "immediate",
    }
}

/// Whether an answer must wait for [`before_answers_written`]'s hook (see the file's notes).
pub fn answers_wait() -> bool {
    answer_order() != AnswerOrder::Immediate
}

/// A hook of [`before_answers_written`]: true if it handed answers to Redis.
pub type SleepHook = fn(&Ctx) -> bool;

/// Runs `hook` once, right before Redis next writes the answers of unblocked clients (with no
/// command in between); the hook says whether it handed answers to Redis. False if Redis
/// refused (the caller then hands its answer over at once). `ctx` must belong to the module (a
/// command, timer or callback context).
pub fn before_answers_written(ctx: &Ctx, hook: SleepHook) -> bool {
    match answer_order() {
        AnswerOrder::BeforeSleepEvent => before_next_sleep(ctx, hook),
        AnswerOrder::Handover => {
            if !handover::arm(ctx, hook) {
                // A context that cannot call the module's command: a timer's can.
                RETRY.with(|r| r.set(Some(hook)));
                ctx.create_plain_timer(0, handover_from_timer);
            }
            true
        }
        AnswerOrder::Immediate => false,
    }
}

thread_local! {
    /// The hook a timer arms the handle for ([`before_answers_written`]).
    static RETRY: Cell<Option<SleepHook>> = const { Cell::new(None) };
    /// The hook of [`before_next_sleep`], while the event is subscribed.
    static HOOK: Cell<Option<SleepHook>> = const { Cell::new(None) };
    /// The hook is to run at the next sleep.
    static DUE: Cell<bool> = const { Cell::new(false) };
    /// The hook is running: the event must not be unsubscribed now (Redis reads its listener
    /// after the call, so freeing it from inside would be a use after free).
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// The timer of [`before_answers_written`] on 7.2. A timer's context always has a client to
/// call with; were the call refused anyway (the module's command gone), the hook runs now, as
/// on a server without the race, rather than leave clients unanswered.
fn handover_from_timer(ctx: &Ctx) {
    let Some(hook) = RETRY.with(|r| r.take()) else { return };
    if !handover::arm(ctx, hook) {
        log(c"warning", "lockmod: could not call lockmod.handover: answers handed to Redis at once");
        hook(ctx);
    }
}

/// Runs `hook` once, at the next sleep of the event loop (Redis 7.0: right before it writes the
/// answers of unblocked clients). False if Redis refused.
///
/// The event (`EVENTLOOP`, which Redis fires before and after every sleep, a context made and
/// freed each time) is subscribed only until the hook has run: it is dropped when Redis frees
/// the first answer handed over (right after the hook, outside the event), or by a 0 ms timer
/// when the hook handed none.
///
/// The event loop is woken, so that it does not sleep before the hook runs: a call made in
/// `beforeSleep` after the event (a command of a client Redis just unblocked, run by
/// `processUnblockedClients`) would otherwise leave its answer until the next timer, 5 to
/// 100 ms later.
fn before_next_sleep(ctx: &Ctx, hook: SleepHook) -> bool {
    if !DUE.with(|d| d.replace(true)) {
        // SAFETY: a main-thread call with a callback of the signature Redis expects and no
        // data. It writes a byte to the module pipe, so the next poll returns at once.
        unsafe { api!(RedisModule_EventLoopAddOneShot)(Some(wake), std::ptr::null_mut()) };
    }
    if HOOK.with(Cell::get).is_some() {
        return true;
    }
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
    // SAFETY: a live context of this module; the callback has the signature Redis expects.
    let ok = unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, event, Some(on_event_loop)) } == OK;
    if ok {
        HOOK.with(|h| h.set(Some(hook)));
    } else {
        DUE.with(|d| d.set(false));
    }
    ok
}

/// The wake-up of [`before_next_sleep`]: the poll has returned, which was all it was for.
extern "C" fn wake(_data: *mut c_void) {}

/// Redis freed an answer: on 7.0 the hook that handed it over has run (Redis handles
/// unblocked clients after the event), so the event can go. Not from inside the event.
pub fn answer_freed(ctx: &Ctx) {
    if IN_HOOK.with(Cell::get) || DUE.with(Cell::get) || HOOK.with(Cell::get).is_none() {
        return;
    }
    let event = raw::RedisModuleEvent { id: raw::REDISMODULE_EVENT_EVENTLOOP, dataver: 1 };
    // SAFETY: a live context of this module, outside the event's own callback (checked
    // above); a null callback removes the listener.
    if unsafe { api!(RedisModule_SubscribeToServerEvent)(ctx.0, event, None) } == OK {
        HOOK.with(|h| h.set(None));
    }
}

extern "C" fn on_event_loop(ctx: RawCtx, _eid: raw::RedisModuleEvent, subevent: u64, _data: *mut c_void) {
    if subevent != raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP || !DUE.with(|d| d.replace(false)) {
        return;
    }
    let Some(hook) = HOOK.with(Cell::get) else { return };
    let ctx = Ctx(ctx);
    IN_HOOK.with(|h| h.set(true));
    let handed = timed(ctx.0, c"lockmod-answers", || guarded("the before-sleep hook", false, || hook(&ctx)));
    IN_HOOK.with(|h| h.set(false));
    if !handed {
        ctx.create_plain_timer(0, answer_freed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn each_release_has_the_order_its_source_shows() {
        for (version, want) in [
            (0x0006_09f0, AnswerOrder::BeforeSleepEvent), // 7.0-rc1 (6.9.240)
            (0x0007_0000, AnswerOrder::BeforeSleepEvent), // 7.0.0
            (0x0007_000f, AnswerOrder::BeforeSleepEvent), // 7.0.15, Debian's
            (0x0007_01f0, AnswerOrder::Handover),         // 7.2-rc1 (7.1.240)
            (0x0007_0200, AnswerOrder::Handover),         // 7.2.0
            (0x0007_0204, AnswerOrder::Handover),         // 7.2.4
            (0x0007_0206, AnswerOrder::Handover),         // 7.2.6, the last 7.2
            (0x0007_0207, AnswerOrder::Handover),         // Valkey 7.2.7
            (0x0007_03f0, AnswerOrder::Immediate),        // 7.4-rc1 (7.3.240): has the fix
            (0x0007_0401, AnswerOrder::Immediate),        // 7.4.1
            (0x0008_0001, AnswerOrder::Immediate),        // Valkey 8.0.1, Redis 8
            (0x0009_0102, AnswerOrder::Immediate),        // Valkey 9.1.2
        ] {
            assert_eq!(order_of(version), want, "{version:#x}");
        }
    }
}
