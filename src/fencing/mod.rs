//! Fencing tokens that never go back (issue 35): what the module does when grants may have
//! been lost. The arithmetic and the node's era are `crate::core::lock::era`; a grant's own move is
//! `crate::core::lock::fencing` on the store (`crate::effects`).
//!
//! - **An event** ([`on_event`]): this server became a writable primary with a keyspace that
//!   may be behind grants made elsewhere or before: a replica promoted (`REPLICAOF NO ONE`,
//!   `FAILOVER`, Sentinel, a cluster failover or takeover), a load at start-up or by `DEBUG
//!   RELOAD`, a `MODULE LOAD` into a server with data. It starts an era one above every era
//!   recorded in the keyspace and known here ([`records::largest`]), records it at once if the
//!   keyspace held a record (else the era's first fencing write records it, ahead of itself),
//!   and starts the walk.
//! - **The walk** ([`walk`]) moves every counter below the era's floor up to it, a bounded
//!   number of keys per 1 ms tick, so that no event stalls the server: about 3 s per
//!   million keys, the server answering clients between ticks.
//! - **Before the walk gets there**, every grant moves its own counter first: the module's
//!   commands and Redisson's bodies run natively through `core::lock::fencing`; Redisson's Lua
//!   (or any `INCR`/`INCRBY` of a counter) through the command filter ([`touch`]), which looks at
//!   commands only while the walk runs, and at a script's commands when a script names a
//!   counter (so a name the lost history created starts above it too).
//!
//! - **The node's file** (`effects::era::file`): the keyspace's record is lost with its history
//!   (a restart from a snapshot older than the last event, twice in a row), so each node also
//!   keeps the largest era it opened in a file in its `dir`, written durably before the era's
//!   first fencing write and read at every event: an event goes above both. A module loaded
//!   into an empty keyspace reads it too ([`on_load`]): a restart with nothing to load starts
//!   the era above the file's.
//!
//! Nothing is written on a replica or while loading: a demoted primary stops its walk
//! ([`on_demoted`]) and takes its new primary's history as it comes.
//!
//! May import: effects, ffi, core. Imported by server.

pub mod look;
pub mod records;
pub mod touch;
pub mod walk;

use crate::core::lock::era;
use crate::ffi::{log, Ctx};

/// Why an era starts, for the log.
#[derive(Clone, Copy, Debug)]
pub enum Event {
    Promoted,
    Loaded,
    ModuleLoaded,
}

/// This server may have lost grants and takes writes: a new era, recorded, and the walk.
/// (A replica, or a server still loading, does nothing: its primary's history rules.)
pub fn on_event(ctx: &Ctx, why: Event) {
    if ctx.is_replica() || ctx.is_loading() {
        return;
    }
    // The event's own stall (the records looked up, the walk started), for the latency monitor.
    crate::ffi::latency::timed(ctx.raw(), c"lockmod-fencing-event", || start_era(ctx, why));
}

fn start_era(ctx: &Ctx, why: Event) {
    let recorded = records::largest(ctx);
    // The node's own file: every era this node opened, even one its keyspace lost.
    let file = crate::effects::era::file::read();
    let next = era::next(era::known().max(file.unwrap_or(0)), recorded);
    era::begin(next);
    look::refresh();
    // A history that recorded an era, or a node with a file, uses fencing: its new era goes
    // to the file and the keyspace now, ahead of anything. Elsewhere the first fencing write
    // of the era does both, ahead of itself, so a server that never fenced anything is not
    // written to.
    if recorded > 0 || file.is_some() {
        crate::effects::era::file::open(ctx);
        records::record_now(ctx);
    }
    let file = file.map_or("none".to_string(), |f| f.to_string());
    log(
        c"notice",
        &format!(
            "lockmod: fencing era {next} ({why:?}; largest recorded {recorded}, era file {file}): token counters \
             move to {}",
            era::floor(next)
        ),
    );
    walk::start(ctx);
}

/// The module loaded into an empty keyspace (a start-up, before any load; or a `MODULE LOAD`):
/// if the node's file says it fenced before, the era above the file's is in force from now,
/// so a restart with nothing to load (a crash before the first snapshot, no AOF) does not
/// count from 1 again. It is provisional: a load that follows starts one above the file and
/// the keyspace's record, which is this era unless the record is higher.
fn start_from_file(ctx: &Ctx) {
    if ctx.is_replica() {
        return;
    }
    let Some(file) = crate::effects::era::file::read() else { return };
    let next = era::next(file, 0);
    era::begin_provisional(next);
    log(c"notice", &format!("lockmod: fencing era {next} (era file {file}, nothing loaded yet)"));
}

/// `CONFIG SET dir`, or a new `lockmod.fencing-era-file`: the era goes to the new place now.
pub fn on_era_file_moved(ctx: &Ctx) {
    crate::effects::era::file::moved(ctx);
}

/// A new `lockmod.fencing-era-file` (also at load, before anything is open: nothing then).
pub fn on_era_file_set() {
    if let Some(ctx) = crate::ffi::events::module_ctx() {
        crate::effects::era::file::moved(&ctx);
    }
}

/// This server became a replica: it moves nothing (its primary's history replaces its own).
pub fn on_demoted(ctx: &Ctx) {
    walk::stop(ctx);
    era::stop_moving();
    look::refresh();
}

/// `SWAPDB` under a walk: the database it walks was replaced, and a scan keeps no promise across
/// that; the walk starts again.
pub fn on_swapdb(ctx: &Ctx) {
    if era::moving() {
        walk::start(ctx);
    }
}

/// `FLUSHALL` or `FLUSHDB` may have taken the era's record: the next fencing write records it
/// again, ahead of itself.
pub fn on_flushed() {
    era::forget_record();
}

/// The module was loaded: nothing from an earlier load holds; into a server with data it is
/// an event (the module missed the load, and its era).
pub fn on_load(ctx: &Ctx) {
    era::reset();
    walk::reload();
    look::disarm();
    let prev = ctx.selected_db();
    let mut db = 0;
    let mut data = false;
    while !data && ctx.select_db(db) {
        data = ctx.db_size() > 0;
        db += 1;
    }
    ctx.select_db(prev);
    if data {
        on_event(ctx, Event::ModuleLoaded);
    } else {
        start_from_file(ctx);
    }
}
