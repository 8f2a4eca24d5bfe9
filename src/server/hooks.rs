//! What the module does when Redis calls it back, put together from the layers that own each
//! reaction: the command filter's hooks and the keyspace and server events' hooks, handed to
//! `ffi` at load. Only this floor sees every layer, so only here are they composed.

use crate::fencing::{self, Event};
use crate::ffi::events::{EventHooks, Swap};
use crate::ffi::filter::{FilterCall, FilterHooks, Form};
use crate::ffi::Ctx;
use crate::{acl, blocking, core, effects, redisson, watch};

/// The command filter's hooks.
pub static FILTER: FilterHooks = FilterHooks {
    acl: on_acl,
    exec: on_exec,
    reset_stats: super::info::reset,
    script: redisson::learn::on_script,
    eval: on_eval,
    other: on_other,
    timeout_key,
    fencing: fencing::touch::on_command,
    token_key: fencing::touch::script_key,
};

/// The keyspace and server events' hooks.
pub static EVENTS: EventHooks = EventHooks { key_gone, flushed, swapped, dir_changed: fencing::on_era_file_moved };

/// `ACL ...`: what is known of users may no longer hold.
fn on_acl(call: FilterCall, name: &[u8]) {
    acl::on_command(name, call.arg(1), || call.client());
}

/// `EXEC`: it may run a queued ACL change, commands filtered when they were queued, and a
/// queued `SCRIPT FLUSH`.
fn on_exec(call: FilterCall, name: &[u8]) {
    acl::on_command(name, None, || call.client());
    if let Some(ctx) = crate::ffi::events::module_ctx() {
        blocking::reclaim::find::on_exec(&ctx);
    }
    if watch::active() {
        watch::filter::on_exec();
        if let Some(ctx) = crate::ffi::events::module_ctx() {
            blocking::recheck_all(&ctx);
        }
    }
    if core::config::redisson_native() {
        redisson::cache::on_exec(|| call.client());
    }
    fencing::touch::on_exec();
}

fn on_eval(call: FilterCall, form: Form) {
    redisson::filter::rewrite(call, form);
}

/// What a hit of the watch filter means for parked clients: the lock is served after the
/// command, from a 0 ms timer.
static HITS: watch::filter::Hits = watch::filter::Hits { changed: name_changed, all_changed };

fn on_other(call: FilterCall, name: &[u8]) {
    watch::filter::on_command(call, name, &HITS);
}

/// A `ZADD` to a key named `...:timeout`, or a script naming one: perhaps a lease the module
/// did not write.
fn timeout_key(key: &[u8]) {
    if let Some(ctx) = crate::ffi::events::module_ctx() {
        blocking::reclaim::find::noticed(&ctx, key);
    }
}

fn name_changed(name: &[u8]) {
    if let Some(ctx) = crate::ffi::events::module_ctx() {
        blocking::name_changed(&ctx, name);
    }
}

fn all_changed() {
    if let Some(ctx) = crate::ffi::events::module_ctx() {
        blocking::recheck_all(&ctx);
    }
}

/// An `expired` or `evicted` event.
fn key_gone(ctx: &Ctx, event: &[u8], db: i32, key: &[u8]) {
    effects::stats::on_key_event(event, db, key);
    watch::hold_index::on_key_gone(db, event, key);
    blocking::on_key_gone(ctx, key);
}

/// FLUSHALL or FLUSHDB.
fn flushed(ctx: &Ctx) {
    watch::hold_index::clear();
    blocking::on_flush(ctx);
    fencing::on_flushed();
}

/// SWAPDB, loading or a role change: the keyspace the read-hold index mirrors was replaced.
fn swapped(ctx: &Ctx, swap: Swap) {
    watch::hold_index::clear();
    // Leases nobody armed a timer for here: loaded, swapped in, or the primary's until now.
    if swap.swapdb || swap.loaded || swap.now_primary {
        blocking::reclaim::find::scan_all(ctx);
    }
    // Locks with parked clients may be free in the database swapped in: serve them.
    if swap.swapdb {
        blocking::on_flush(ctx);
        fencing::on_swapdb(ctx);
    }
    // No lock may be granted on a replica: release every parked client with an error.
    if swap.now_replica {
        blocking::on_demoted(ctx);
        fencing::on_demoted(ctx);
    }
    // Grants may have been lost with the history before (a failover, a restart): token
    // counters move to a new era. (A replica's load, a full sync, is its primary's history.)
    if swap.now_primary {
        fencing::on_event(ctx, Event::Promoted);
    } else if swap.loaded {
        fencing::on_event(ctx, Event::Loaded);
    }
}
