//! The walk that moves every token counter below the era's floor up to it, after an event
//! (`super::on_event`): [`BUDGET`] keys per tick of a 1 ms timer, database after database, so
//! the server answers clients between ticks. Each counter found below the floor is written
//! `SET counter floor` (the era recorded first, if not yet), which replicas and the AOF take as
//! they are.
//! Once every key was visited nothing is below the floor (a grant in between moved its own
//! first), and the command filter stops looking at commands.
//!
//! A small keyspace is looked at at once, by reads: if nothing is below the floor, no timer is
//! left behind (a module with a timer pending cannot be unloaded) and the filter stays off.

use std::cell::RefCell;
use std::ffi::CStr;

use crate::core::lock::era;
use crate::core::store::Store;
use crate::core::{names, parse_i64};
use crate::effects::RedisStore;
use crate::ffi::pause::writes_paused;
use crate::ffi::scan::{KeyScan, KeysWalk};
use crate::ffi::timers::{Timer, TimerId};
use crate::ffi::{Args, Ctx, KeyKind};

/// Keys visited per tick: a tick that moves every one of them stays within a few ms.
pub const BUDGET: usize = 1_000;
/// The interval between ticks.
const TICK_MS: i64 = 1;
/// How often a paused server (or one loading) is looked at again.
const PAUSED_MS: i64 = 10;

#[derive(Default)]
struct State {
    walk: Option<KeysWalk>,
    timer: Option<TimerId<Tick>>,
}

thread_local! {
    // Redis runs every module callback on its main thread.
    static STATE: RefCell<State> = RefCell::default();
}

fn with<T>(f: impl FnOnce(&mut State) -> T) -> Option<T> {
    STATE.with(|r| r.try_borrow_mut().ok().map(|mut r| f(&mut r)))
}

/// The walk's timer.
pub struct Tick;

impl Timer for Tick {
    fn latency_event(&self) -> &'static CStr {
        c"lockmod-fencing-move"
    }

    fn fire(self, ctx: &Ctx) {
        with(|s| s.timer = None);
        tick(ctx);
    }
}

fn arm(ctx: &Ctx, ms: i64) {
    if with(|s| s.timer.is_none()).unwrap_or(false) {
        let t = ctx.create_timer(ms, Tick);
        with(|s| s.timer = Some(t));
    }
}

/// Starts the walk from the first database (a walk under way starts again: the keyspace it
/// walked was replaced).
pub fn start(ctx: &Ctx) {
    with(|s| s.walk = Some(KeysWalk::new()));
    if nothing_below(ctx) {
        finish();
        return;
    }
    arm(ctx, 0);
}

/// Stops the walk (the server became a replica).
pub fn stop(ctx: &Ctx) {
    if let Some(Some(t)) = with(|s| s.timer.take()) {
        ctx.stop_timer(t);
    }
    with(|s| s.walk = None);
}

/// The module was loaded again: no timer of an earlier load is pending (Redis unloads no
/// module with one).
pub fn reload() {
    with(|s| *s = State::default());
}

/// Whether a walk is under way.
pub fn walking() -> bool {
    with(|s| s.walk.is_some()).unwrap_or(false)
}

fn finish() {
    with(|s| s.walk = None);
    era::stop_moving();
    super::look::refresh();
}

fn tick(ctx: &Ctx) {
    // A replica moves nothing (a demotion stops the walk; this is the walk's own check).
    if ctx.is_replica() {
        finish();
        return;
    }
    if writes_paused() || ctx.is_loading() {
        arm(ctx, PAUSED_MS);
        return;
    }
    let previous = ctx.selected_db();
    let more = step(ctx);
    ctx.select_db(previous);
    if more {
        arm(ctx, TICK_MS);
    } else {
        finish();
    }
}

/// One step (at most [`BUDGET`] keys, through as many empty databases as come next); true
/// while there is more.
fn step(ctx: &Ctx) -> bool {
    let Some(mut walk) = with(|s| s.walk.take()).flatten() else { return false };
    let mut found = Vec::new();
    let visited = walk.step(ctx, BUDGET, |name| {
        if names::is_token(name) {
            found.push(name.to_vec());
        }
    });
    if visited.is_none() {
        return false;
    }
    // Written after the scan's step: keys are not changed under a scan.
    for name in found {
        raise_if_below(ctx, &name);
    }
    with(|s| {
        if s.walk.is_none() {
            s.walk = Some(walk);
        }
    });
    true
}

/// Moves the counter `name` of the selected database up to the floor if it is below; true
/// if it moved. Anything but an integer string is left to the commands (their error).
pub fn raise_if_below(ctx: &Ctx, name: &[u8]) -> bool {
    let args = Args::empty();
    let mut s = RedisStore::at(ctx, &args, Ctx::now_ms());
    let Some(v) = s.get(name).ok().flatten().and_then(|v| parse_i64(&v)) else { return false };
    let floor = s.token_floor(Some(v));
    if v < floor {
        s.raise_token(name, floor);
        return true;
    }
    false
}

/// For a keyspace of at most [`BUDGET`] keys: true if no counter is below the floor, by reads
/// alone (so a small server's event leaves no timer and no filter behind).
fn nothing_below(ctx: &Ctx) -> bool {
    let previous = ctx.selected_db();
    let (mut db, mut total, mut below) = (0, 0u64, false);
    while ctx.select_db(db) {
        total += ctx.db_size();
        db += 1;
    }
    if total > BUDGET as u64 {
        ctx.select_db(previous);
        return false;
    }
    db = 0;
    while !below && ctx.select_db(db) {
        if ctx.db_size() > 0 {
            let mut scan = KeyScan::new();
            let mut found = Vec::new();
            while scan.step(ctx, BUDGET, |name| {
                if names::is_token(name) {
                    found.push(name.to_vec());
                }
            }) {}
            below = found.iter().any(|n| is_below(ctx, n));
        }
        db += 1;
    }
    ctx.select_db(previous);
    !below
}

/// Whether the counter `name` of the selected database is an integer below the floor.
fn is_below(ctx: &Ctx, name: &[u8]) -> bool {
    let key = ctx.string(name);
    let k = ctx.open_key(key.as_ref(), false);
    if k.kind() != KeyKind::String {
        return false;
    }
    match k.string_with(parse_i64).flatten() {
        Some(v) => v < era::floor_for(Some(v)),
        None => false,
    }
}
