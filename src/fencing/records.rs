//! The era's record in the keyspace (`core::names::era_key`): the largest one a server holds,
//! read at an event, and a new era's record written as soon as the server takes writes.

use crate::core::lock::era;
use crate::core::names::era_key;
use crate::core::parse_i64;
use crate::core::slots::SLOTS;
use crate::effects::RedisStore;
use crate::ffi::pause::writes_paused;
use crate::ffi::scan::KeyScan;
use crate::ffi::{Args, Ctx};

/// The largest era recorded in this server's keyspace (0: none): the era key in every
/// database, or in a cluster (one database) under every slot's tag, wherever it came from.
pub fn largest(ctx: &Ctx) -> i64 {
    let prev = ctx.selected_db();
    let mut best = 0;
    if ctx.in_cluster() {
        if ctx.select_db(0) && ctx.db_size() > 0 {
            for slot in 0..SLOTS as u16 {
                best = best.max(read(ctx, &era_key(Some(slot))));
            }
        }
    } else {
        let mut db = 0;
        while ctx.select_db(db) {
            if ctx.db_size() > 0 {
                best = best.max(read(ctx, &era_key(None)));
            }
            db += 1;
        }
    }
    ctx.select_db(prev);
    best
}

/// The era recorded under `key` in the selected database (0 if none, or not a number).
fn read(ctx: &Ctx, key: &[u8]) -> i64 {
    let name = ctx.string(key);
    ctx.open_key(name.as_ref(), false).string_with(parse_i64).flatten().unwrap_or(0).max(0)
}

/// Records the era in force now, if it is not recorded and the server takes writes: in
/// database 0, or in a cluster in the slot of database 0's first key (a new primary's keys
/// are in the slots it takes over; with no key at all, the first fencing write records it).
pub fn record_now(ctx: &Ctx) {
    if !era::needs_record() || ctx.is_replica() || ctx.is_loading() || writes_paused() {
        return;
    }
    let prev = ctx.selected_db();
    if ctx.select_db(0) {
        let anchor = if ctx.in_cluster() { first_key(ctx) } else { Some(Vec::new()) };
        if let Some(anchor) = anchor {
            let args = Args::empty();
            RedisStore::at(ctx, &args, Ctx::now_ms()).record_era(&anchor);
        }
    }
    ctx.select_db(prev);
}

/// The name of a key of the selected database, if it has any.
fn first_key(ctx: &Ctx) -> Option<Vec<u8>> {
    if ctx.db_size() == 0 {
        return None;
    }
    let mut first: Option<Vec<u8>> = None;
    let mut scan = KeyScan::new();
    loop {
        let more = scan.step(ctx, 1, |name| {
            if first.is_none() {
                first = Some(name.to_vec());
            }
        });
        if first.is_some() || !more {
            return first;
        }
    }
}
