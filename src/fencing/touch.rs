//! The command filter's part for fencing: an `INCR` or `INCRBY` of a token counter by anything
//! but the module (Redisson's fenced lock run as Lua, a script, a client) while counters may be
//! below the era's floor. The filter must not write (Redis may still queue the command in a
//! `MULTI`, postpone it in a pause, or refuse it), and does not know which database the
//! command runs in, so it rewrites the call: `INCRBY counter d`, with `d` what lifts the
//! counter from the lowest value it holds in any database to the floor plus the step
//! (`core::lock::era::incr_instead`). The counter then ends exactly where a move and the `INCR`
//! would have left it; where it moved meanwhile (a queued command, a pause) it ends higher,
//! never lower.
//!
//! The filter looks at commands while the walk runs (`super::walk`), and otherwise only at a
//! script's (`EVAL`, `EVALSHA`, `FCALL`, or the next `EXEC`, which may run one) when an era is in force
//! and the script names a counter: so a name the lost history created, absent here, starts at
//! the floor too. It stops at a 0 ms timer after the command. Such an `INCR` also opens the
//! era in the node's file (`effects::era::file`), era 0 included: the first script that names a
//! counter in an era not yet in the file is looked at for that.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use redis_module::raw;

use super::look;
use crate::core::lock::era::{self, Held};
use crate::core::{names, parse_i64, IntBuf};
use crate::ffi::events::module_ctx;
use crate::ffi::filter::{server_flags, FilterCall, Owned};
use crate::ffi::{log, Ctx, KeyKind};

/// Where the filter leaves every call as it is: a replica's stream is its primary's.
const NOT_HERE: u64 = (raw::REDISMODULE_CTX_FLAGS_SLAVE
    | raw::REDISMODULE_CTX_FLAGS_LOADING
    | raw::REDISMODULE_CTX_FLAGS_ASYNC_LOADING) as u64;

/// A script naming a counter was filtered since the last `EXEC`: perhaps queued in a `MULTI`.
static SCRIPT_SINCE_EXEC: AtomicBool = AtomicBool::new(false);

/// A script about to run (or be queued) names `key`: looked at once an era is in force, and
/// in any era not yet in the node's file (its `INCR` is the era's first fencing write).
pub fn script_key(key: &[u8]) {
    if (era::era() > 0 || !era::is_open()) && names::is_token(key) {
        SCRIPT_SINCE_EXEC.store(true, Relaxed);
        arm();
    }
}

/// `EXEC`: the scripts it runs were filtered when queued (and the look they armed is over),
/// their commands are filtered now. Only after a script that names a counter: any other
/// `EXEC` costs one flag test.
pub fn on_exec() {
    if SCRIPT_SINCE_EXEC.swap(false, Relaxed) {
        arm();
    }
}

fn arm() {
    if server_flags() & NOT_HERE != 0 || look::armed() {
        return;
    }
    // Without a context no timer could end the look: nothing is armed then.
    if let Some(ctx) = module_ctx() {
        look::arm();
        ctx.create_plain_timer(0, |_| look::disarm());
    }
}

/// A command, while the filter looks: an `INCR counter` or `INCRBY counter n` is rewritten if
/// the counter is below the floor (or absent everywhere). Every other command costs a length
/// test.
pub fn on_command(call: FilterCall, cmd: &[u8]) {
    let by = match cmd.len() {
        4 if cmd.eq_ignore_ascii_case(b"incr") && call.argc() == 2 => Some(1),
        6 if cmd.eq_ignore_ascii_case(b"incrby") && call.argc() == 3 => call.arg(2).and_then(parse_i64),
        _ => return,
    };
    let (Some(by), Some(key)) = (by, call.arg(1)) else { return };
    if !names::is_token(key) || server_flags() & NOT_HERE != 0 {
        return;
    }
    if catch_unwind(AssertUnwindSafe(|| rewrite(call, key, by))).is_err() {
        log(c"warning", "lockmod: internal error in the command filter (fencing)");
    }
}

fn rewrite(call: FilterCall, key: &[u8], by: i64) {
    let Some(ctx) = module_ctx() else { return };
    // A fencing write is coming: the era goes to the node's file first (a file is no write
    // Redis could refuse or misplace; written early, it only makes the next era higher).
    crate::effects::era::file::open(&ctx);
    if era::era() == 0 {
        return;
    }
    let held = held_everywhere(&ctx, key);
    let top = held.iter().filter_map(|h| if let Held::Int(v) = h { Some(*v) } else { None }).max();
    let floor = era::floor_for(top);
    let Some(d) = era::incr_instead(&held, floor, by) else { return };
    // The filter cannot record the era ahead of the rewritten write: a timer records it right
    // after, if no fencing write did yet (see README, "Fencing": the bound).
    if era::needs_record() {
        ctx.create_plain_timer(0, super::records::record_now);
    }
    let Some(name) = call.arg_str(1).and_then(Owned::hold) else { return };
    let mut buf = IntBuf::default();
    if call.replace_all(vec![Owned::new(b"INCRBY"), name, Owned::new(buf.format(d))]) {
        era::count_moved();
    }
}

/// What every database holds at `key` (the filter does not know the command's).
fn held_everywhere(ctx: &Ctx, key: &[u8]) -> Vec<Held> {
    let previous = ctx.selected_db();
    let name = ctx.string(key);
    let mut held = Vec::new();
    let mut db = 0;
    while ctx.select_db(db) {
        held.push(if ctx.db_size() == 0 { Held::Absent } else { held_in(ctx, &name) });
        db += 1;
    }
    ctx.select_db(previous);
    held
}

fn held_in(ctx: &Ctx, name: &crate::ffi::RStr) -> Held {
    let k = ctx.open_key(name.as_ref(), false);
    match k.kind() {
        KeyKind::Empty => Held::Absent,
        KeyKind::String => k.string_with(parse_i64).flatten().map_or(Held::Other, Held::Int),
        _ => Held::Other,
    }
}
