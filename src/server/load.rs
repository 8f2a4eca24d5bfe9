//! The module's `OnLoad`: checks the server, registers the commands, configs, metadata, the
//! command filter, events and `INFO`, handing each layer's callbacks to `ffi`.
use std::ffi::CStr;

use redis_module::{redis_module, Context, RedisString, Status};

use crate::command_fn;
use crate::commands::{
    contended, countdown, fair, gcra, holds, info, lock, psemaphore, ratelimiter, rwlock, semaphore,
};
use crate::ffi::{self, CommandFn};

/// (name, handler, flags): every command takes the lock key as its only declared key.
/// Names are lowercase, as Redis' own: the metadata sets each command's arity, so Redis
/// checks it first and names the command in its error as registered. An acquire accepts
/// `BLOCK`, so it is `blocking` and, as BLPOP, not `fast`.
fn command_table() -> Vec<(&'static CStr, CommandFn, &'static CStr)> {
    vec![
        (c"lock.acquire", command_fn!(lock::lock_acquire), c"write deny-oom blocking"),
        (c"lock.unlock", command_fn!(lock::lock_unlock), c"write fast"),
        (c"lock.renew", command_fn!(lock::lock_renew), c"write fast"),
        (c"lock.forceunlock", command_fn!(lock::lock_forceunlock), c"write fast"),
        (c"rwlock.rlock", command_fn!(rwlock::rwlock_rlock), c"write deny-oom blocking"),
        (c"rwlock.wlock", command_fn!(rwlock::rwlock_wlock), c"write deny-oom blocking"),
        // O(read holds): the largest remaining lease over them (indexed, built once).
        (c"rwlock.unlock", command_fn!(rwlock::rwlock_unlock), c"write"),
        // O(the owner's read holds).
        (c"rwlock.renew", command_fn!(rwlock::rwlock_renew), c"write"),
        (c"rwlock.forceunlock", command_fn!(rwlock::rwlock_forceunlock), c"write fast"),
        // O(waiters): a grant moves every queued waiter's deadline.
        (c"fairlock.acquire", command_fn!(fair::fairlock_acquire), c"write deny-oom blocking"),
        (c"fairlock.unlock", command_fn!(fair::fairlock_unlock), c"write"),
        (c"fairlock.cancel", command_fn!(fair::fairlock_cancel), c"write"),
        (c"fairlock.renew", command_fn!(fair::fairlock_renew), c"write fast"),
        (c"fairlock.forceunlock", command_fn!(fair::fairlock_forceunlock), c"write"),
        // O(holders + waiters): not `fast`. Read-only, so it runs on a replica.
        (c"lock.info", command_fn!(info::lock_info), c"readonly"),
        // A client settling a lost reply asks these; read-only, so replicas answer too.
        (c"lock.holds", command_fn!(holds::lock_holds), c"readonly fast"),
        (c"rwlock.holds", command_fn!(holds::rwlock_holds), c"readonly fast"),
        (c"fairlock.holds", command_fn!(holds::fairlock_holds), c"readonly fast"),
    ]
}

/// The synchronizers (issue 26), as the locks: a take that may wait is `deny-oom blocking`
/// and not `fast`; what returns permits or counts down is `write` only (it must work when
/// memory is full); the expirable semaphore's reclaim of expired permits is O(expired).
fn sync_command_table() -> Vec<(&'static CStr, CommandFn, &'static CStr)> {
    vec![
        (c"semaphore.trysetpermits", command_fn!(semaphore::semaphore_trysetpermits), c"write deny-oom fast"),
        (c"semaphore.acquire", command_fn!(semaphore::semaphore_acquire), c"write deny-oom blocking"),
        (c"semaphore.release", command_fn!(semaphore::semaphore_release), c"write fast"),
        (c"semaphore.addpermits", command_fn!(semaphore::semaphore_addpermits), c"write deny-oom fast"),
        (c"semaphore.drain", command_fn!(semaphore::semaphore_drain), c"write fast"),
        (c"semaphore.available", command_fn!(semaphore::semaphore_available), c"readonly fast"),
        (c"psemaphore.trysetpermits", command_fn!(psemaphore::psemaphore_trysetpermits), c"write deny-oom fast"),
        (c"psemaphore.setpermits", command_fn!(psemaphore::psemaphore_setpermits), c"write deny-oom fast"),
        (c"psemaphore.acquire", command_fn!(psemaphore::psemaphore_acquire), c"write deny-oom blocking"),
        (c"psemaphore.release", command_fn!(psemaphore::psemaphore_release), c"write"),
        (c"psemaphore.updatelease", command_fn!(psemaphore::psemaphore_updatelease), c"write"),
        (c"psemaphore.available", command_fn!(psemaphore::psemaphore_available), c"write"),
        (c"psemaphore.acquired", command_fn!(psemaphore::psemaphore_acquired), c"write"),
        (c"countdown.trysetcount", command_fn!(countdown::countdown_trysetcount), c"write deny-oom fast"),
        (c"countdown.decr", command_fn!(countdown::countdown_decr), c"write fast"),
        (c"countdown.count", command_fn!(countdown::countdown_count), c"readonly fast"),
        (c"countdown.await", command_fn!(countdown::countdown_await), c"readonly blocking"),
        // O(COUNT): not `fast`. Read-only, so it runs on a replica.
        (c"sync.info", command_fn!(info::sync_info), c"readonly"),
    ]
}

/// Commands that stand in for another's of the same name: Redis' `GCRA` (held out of its 8.8
/// release; Redisson's `RGcra` calls it) and redis-cell's `CL.THROTTLE`. Each is registered
/// only where the server has no command of that name, its own or another module's
/// ([`register_stand_ins`]). O(1) and `fast`, as Redis' `GCRA`.
fn stand_in_table() -> Vec<(&'static CStr, CommandFn, &'static CStr)> {
    vec![
        (c"gcra", command_fn!(gcra::gcra), c"write deny-oom fast"),
        (c"cl.throttle", command_fn!(gcra::cl_throttle), c"write deny-oom fast"),
    ]
}

/// Registers each stand-in the server lacks, asking it by `COMMAND INFO` first: `RM_CreateCommand`
/// fails on a name that is taken, and loading must not fail beside a server that has its own
/// `GCRA` (Redis built with it) or a `CL.THROTTLE` (redis-cell loaded first). Where `COMMAND`
/// cannot be run, a refused registration is taken for such a name, and logged.
fn register_stand_ins(ctx: &Context) {
    // `RGcra`'s bodies run natively only on the module's own `GCRA` (the one their Lua calls).
    crate::redisson::rate::rewrite::set_gcra_is_ours(false);
    for (name, f, flags) in stand_in_table() {
        let shown = name.to_string_lossy().to_uppercase();
        match ffi::lookup::server_has_command(&ffi::Ctx(ctx.ctx), name) {
            Some(true) => {
                ctx.log_notice(&format!("lockmod: the server has its own {shown}: lockmod's is not registered"))
            }
            known => {
                if ffi::create_command(ctx, name, f, flags, 1, 1, 1) {
                    if name == c"gcra" {
                        crate::redisson::rate::rewrite::set_gcra_is_ours(true);
                    }
                } else {
                    let why = if known.is_none() { "COMMAND INFO could not say whether it exists" } else { "refused" };
                    ctx.log_warning(&format!("lockmod: {shown} not registered ({why})"));
                }
            }
        }
    }
}

/// The rate limiter (issue 30): an acquire that may wait is `deny-oom blocking`; a release must
/// work when memory is full; what walks the window (the grants that leave it) is not `fast`.
fn ratelimiter_command_table() -> Vec<(&'static CStr, CommandFn, &'static CStr)> {
    vec![
        (c"ratelimiter.trysetrate", command_fn!(ratelimiter::ratelimiter_trysetrate), c"write deny-oom fast"),
        (c"ratelimiter.setrate", command_fn!(ratelimiter::ratelimiter_setrate), c"write deny-oom"),
        (c"ratelimiter.acquire", command_fn!(ratelimiter::ratelimiter_acquire), c"write deny-oom blocking"),
        (c"ratelimiter.available", command_fn!(ratelimiter::ratelimiter_available), c"write"),
        (c"ratelimiter.release", command_fn!(ratelimiter::ratelimiter_release), c"write"),
    ]
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let missing = ffi::missing_apis();
    if !missing.is_empty() {
        ctx.log_warning(&format!("lockmod needs Redis 7.0 or later; missing {missing:?}"));
        return Status::Err;
    }
    // A mistyped option must not be ignored: the module takes no arguments at all, and says
    // so before it registers anything.
    if let Some(arg) = args.first() {
        ctx.log_warning(&super::config::unknown_argument(&arg.to_string_lossy(), args.len()));
        return Status::Err;
    }
    install_panic_hook();
    // Verdicts on users from before an unload may be stale.
    crate::acl::forget_all();
    let tracked = ffi::acl::acl_and_exec_named(&ffi::Ctx(ctx.ctx));
    if !tracked {
        ctx.log_notice("lockmod: ACL or EXEC is renamed: each command's caller is looked up and checked");
    }
    crate::acl::set_tracked(tracked);
    // Commands that change nothing must not abort WATCH or invalidate cached keys.
    ffi::modified::opt_out(ctx);
    if !ffi::info::register(ctx, super::info::info_fields, super::info::info_dicts)
        || !ffi::filter::register(ctx, &super::hooks::FILTER)
    {
        ctx.log_warning("lockmod: could not register the INFO section or the command filter");
        return Status::Err;
    }
    // The configs' load sets `lockmod.fencing-era-file`, which writes the era in force if it
    // is open: an earlier load's era is not this load's (`fencing::on_load` starts anew).
    crate::core::lock::era::reset();
    if !ffi::config::register(ctx, crate::redisson::strings::on_scripts_set, crate::fencing::on_era_file_set) {
        ctx.log_warning("lockmod: could not register or load the module configs");
        return Status::Err;
    }
    if !crate::redisson::strings::register(ctx) {
        ctx.log_warning("lockmod: could not prepare the Redisson script rewrite");
        return Status::Err;
    }
    // Which of Redisson's scripts the server has cached (a `MODULE LOAD` after them).
    crate::redisson::cache_probe::init(&ffi::Ctx(ctx.ctx));
    // After a MODULE UNLOAD the keyspace changed unseen: nothing remembered may be trusted.
    crate::watch::hold_index::reload();
    crate::watch::names::reset();
    crate::effects::stats::forget_all();
    crate::blocking::poll::reload();
    crate::blocking::reclaim::reload();
    crate::effects::rate_windows::forget_all();
    crate::blocking::reclaim::find::reload();
    // The wake-up path hears of the module's own writes through `effects::served`.
    crate::blocking::register();
    // The calls the filter rewrote run through `redisson` when their command is dispatched.
    ffi::command::on_rewritten(crate::redisson::dispatch::run_rewritten);
    if !ffi::events::subscribe(ctx, &super::hooks::EVENTS) {
        ctx.log_warning("lockmod: could not subscribe to keyspace and flush events");
        return Status::Err;
    }
    for (name, f, flags) in command_table().into_iter().chain(sync_command_table()).chain(ratelimiter_command_table()) {
        if !ffi::create_command(ctx, name, f, flags, 1, 1, 1) {
            ctx.log_warning(&format!("lockmod: could not register {name:?}"));
            return Status::Err;
        }
    }
    // Keyless (it lists names across the keyspace, filtered by the caller's ACL itself), so no
    // key positions: Redis Cluster runs it on the node asked. Read-only: a replica answers too.
    // O(names with parked clients): not `fast`.
    if !ffi::create_command(
        ctx,
        c"lock.contended",
        command_fn!(contended::lock_contended),
        c"readonly allow-stale",
        0,
        0,
        0,
    ) {
        ctx.log_warning("lockmod: could not register lock.contended");
        return Status::Err;
    }
    register_stand_ins(ctx);
    // Redis 7.2 (Valkey 7.2): the module's own command that lets it answer parked clients
    // safely there (`ffi::handover`; `ffi::answers_due` says which path this server takes).
    // Without it BLOCK could crash that server: no load.
    if ffi::answers_due::init() == ffi::answers_due::AnswerOrder::Handover && !ffi::handover::register(ctx) {
        ctx.log_warning("lockmod: could not register lockmod.handover, which Redis 7.2 needs");
        return Status::Err;
    }
    // Every row, by name: rows of commands registered elsewhere (or not yet) take effect
    // only where the command exists.
    let rows = super::metadata::COMMANDS.iter().chain(super::metadata::sync::COMMANDS);
    for meta in rows.chain(super::metadata::gcra::COMMANDS).chain(super::metadata::ratelimiter::COMMANDS) {
        if !ffi::metadata::apply(ctx, meta, super::metadata::SINCE) {
            ctx.log_warning(&format!("lockmod: Redis rejected the metadata of {}", meta.name));
            return Status::Err;
        }
    }
    // Leases already in the keyspace (a `MODULE LOAD` into a server with data; at start-up the
    // walk runs after loading, when the event loop does).
    crate::blocking::reclaim::find::scan_all(&ffi::Ctx(ctx.ctx));
    // Fencing counters of a server with data move to a new era: the module saw none of the
    // loads or failovers before it (at start-up the keyspace is still empty here).
    crate::fencing::on_load(&ffi::Ctx(ctx.ctx));
    ctx.log_notice(&super::config::loaded_line());
    Status::Ok
}

/// A panic is caught at the command boundary and answered with an error; the hook makes
/// sure the reason reaches the server log, where an operator will look.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        ffi::log(c"warning", &format!("lockmod: {info}"));
    }));
}

redis_module! {
    name: "lockmod",
    version: super::version::MODULE_VERSION,
    allocator: (crate::ffi::alloc::CountingAlloc, crate::ffi::alloc::CountingAlloc),
    data_types: [],
    init: init,
    commands: [],
}
