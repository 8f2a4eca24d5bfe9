//! Fencing eras: why a token never goes back after a failover, a split brain or a restart.
//!
//! A fencing counter (`redisson_lock_token:{name}`) reaches replicas asynchronously and disk at
//! the last snapshot, so a node that takes over (a promoted replica, a restart, `DEBUG RELOAD`)
//! may hold a counter behind grants that were made and lost. Tokens are therefore read as
//! `era * 2^32 + n`: every event where grants may have been lost starts a new era, one above
//! every era this node's history has used, and every counter moves up to the new era's floor
//! (`era << 32`) before any grant on its name. The lost grants were below that floor as long
//! as fewer than 2^32 of them were made on the name in one era: the bound.
//!
//! The era is the one piece of state beyond the counters: a counter that the lost history
//! *created* is simply absent here, and must still start above it. So the era in force is
//! kept in memory here and recorded in the keyspace (the era key, `names::era_key`) by the
//! first fencing write of the era, before that write: whatever holds a grant of an era (a
//! replica, the AOF, a snapshot) holds its record too, so the next event, which starts from
//! the largest era recorded, goes above it.
//!
//! A keyspace record can be lost with the history it records (a restart from a snapshot taken
//! before it), so the node also keeps its own: a file in the server's `dir`
//! (`crate::effects::era::file`), written durably before the era's first fencing write
//! ([`is_open`]), and read at every event. An era begun from the file alone at load
//! ([`begin_provisional`]) is not yet used: an event that follows before any fencing write may
//! start it again rather than the one above ([`known`]).
//!
//! This file is the pure part: the arithmetic ([`floor`], [`era_of`], [`next`],
//! [`incr_instead`]) and the node's state, kept in atomics as `config` keeps the configs
//! (Redis runs the module on its main thread; every access is relaxed). The walk that moves
//! every counter and what reacts to events are `crate::fencing`; the record is written by the
//! store (`crate::effects`).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

/// The bits of a token below its era: up to `2^32 - 1` grants per name per era.
pub const ERA_SHIFT: u32 = 32;
/// The largest era: its floor still fits a counter (`i64`), with room for `2^32 - 1` grants.
pub const MAX_ERA: i64 = (1 << 31) - 1;

/// The least value a counter holds in `era`.
pub const fn floor(era: i64) -> i64 {
    let era = if era < 0 {
        0
    } else if era > MAX_ERA {
        MAX_ERA
    } else {
        era
    };
    era << ERA_SHIFT
}

/// The era a counter value belongs to (0 for a value below 2^32, a negative one included).
pub const fn era_of(v: i64) -> i64 {
    if v < 0 {
        0
    } else {
        v >> ERA_SHIFT
    }
}

/// The era an event starts: one above both the era this node knew and the largest era
/// recorded in the keyspace it now serves (at [`MAX_ERA`] it stays there: no room is left).
pub fn next(known: i64, recorded: i64) -> i64 {
    known.max(recorded).max(0).saturating_add(1).min(MAX_ERA)
}

/// What one database holds at a counter's name, for [`incr_instead`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    Absent,
    Int(i64),
    /// A string that is not an integer, or another type: `INCR` fails there anyway.
    Other,
}

/// For `INCR`/`INCRBY counter by` (a Lua fenced lock's grant, or a client's), when the command
/// filter cannot write (it must not: Redis may queue, postpone or refuse the command it
/// filters) and does not know the database the command runs in: the amount to add instead,
/// so that the counter ends at least `floor + by` in every database `held` describes, or
/// `None` to let the command run as sent (nothing below the floor, no floor, a negative step,
/// an overflow). An absent counter counts only if it is absent everywhere: in one database of
/// many it is the usual case of a name used in another (see README's bound).
pub fn incr_instead(held: &[Held], floor: i64, by: i64) -> Option<i64> {
    if floor <= 0 || by < 1 {
        return None;
    }
    let lowest = held.iter().filter_map(|h| if let Held::Int(v) = h { Some(*v) } else { None }).min();
    let base = match lowest {
        Some(v) if v >= floor => return None,
        Some(v) => v,
        None if held.iter().all(|h| *h == Held::Absent) => 0,
        None => return None,
    };
    floor.checked_add(by)?.checked_sub(base).filter(|d| *d > by)
}

// -- the node's state ----------------------------------------------------------------------

/// The era in force on this node (0: none yet, tokens are plain counts).
static ERA: AtomicI64 = AtomicI64::new(0);
/// True once the era in force is recorded in this node's keyspace (its history).
static RECORDED: AtomicBool = AtomicBool::new(true);
/// True while counters may still be below the era's floor: the walk has not visited them all.
static MOVING: AtomicBool = AtomicBool::new(false);
/// True once the era in force is open: its file written (or tried) before a fencing write.
static OPEN: AtomicBool = AtomicBool::new(false);
/// True while the era in force was begun from the file at load and nothing was written in it.
static PROVISIONAL: AtomicBool = AtomicBool::new(false);
/// Counters moved up to a floor (the walk's and the grants'), for `INFO lockmod`.
static MOVED: AtomicU64 = AtomicU64::new(0);
/// Events that started an era, for `INFO lockmod`.
static EVENTS: AtomicU64 = AtomicU64::new(0);

/// The era in force.
#[inline]
pub fn era() -> i64 {
    ERA.load(Relaxed)
}

/// The floor of the era in force (0 before any event): an absent counter, or one below it,
/// starts there before a grant.
#[inline]
pub fn current_floor() -> i64 {
    floor(era())
}

/// The floor a grant on a counter holding `v` starts from. While counters move, one already
/// past the era in force (a counter set by hand, an era key deleted) shows the node's history
/// went further than recorded: the era rises above the counter's first, so the counter moves
/// above whatever its own lost grants reached, and the record says so.
pub fn floor_for(v: Option<i64>) -> i64 {
    let era = era();
    if era == 0 {
        return 0;
    }
    if let Some(v) = v {
        if moving() && era_of(v) > era && era < MAX_ERA {
            raise(era_of(v).saturating_add(1).min(MAX_ERA));
        }
    }
    current_floor()
}

/// An event starts `era`: counters move from now on, and the first fencing write records it.
pub fn begin(era: i64) {
    ERA.store(era.clamp(0, MAX_ERA), Relaxed);
    RECORDED.store(era <= 0, Relaxed);
    MOVING.store(era > 0, Relaxed);
    OPEN.store(false, Relaxed);
    PROVISIONAL.store(false, Relaxed);
    EVENTS.fetch_add(1, Relaxed);
}

/// The module loaded into an empty keyspace on a node whose file says it fenced up to `era - 1`
/// (a restart with nothing to load, or before the load): `era` is in force, nothing moves (no
/// counter is here), and an event before its first fencing write may start it again ([`known`]).
pub fn begin_provisional(era: i64) {
    begin(era);
    MOVING.store(false, Relaxed);
    PROVISIONAL.store(true, Relaxed);
}

/// The era an event must go above for this process's sake: the era in force, unless it was
/// begun from the file at load and nothing was written in it (the file's era, which the event
/// reads too, is then the bound).
pub fn known() -> i64 {
    if PROVISIONAL.load(Relaxed) {
        0
    } else {
        era()
    }
}

/// The era in force rises to `era` (while moving, past a counter found above it).
fn raise(era: i64) {
    if era > ERA.load(Relaxed) {
        ERA.store(era, Relaxed);
        RECORDED.store(false, Relaxed);
        OPEN.store(false, Relaxed);
    }
}

/// Whether the era in force is open: its file was written (or the write tried) since it
/// began. Every fencing write asks first (one relaxed load).
#[inline]
pub fn is_open() -> bool {
    OPEN.load(Relaxed)
}

/// The era in force is open: from now on its fencing writes go ahead without asking the file.
pub fn opened() {
    OPEN.store(true, Relaxed);
    PROVISIONAL.store(false, Relaxed);
}

/// Whether a fencing write must record the era first.
#[inline]
pub fn needs_record() -> bool {
    !RECORDED.load(Relaxed)
}

/// The era is recorded (written, and propagated before the write that needed it).
pub fn recorded() {
    RECORDED.store(true, Relaxed);
}

/// The record may be gone (`FLUSHALL`, `FLUSHDB`): the next fencing write records it again.
pub fn forget_record() {
    if era() > 0 {
        RECORDED.store(false, Relaxed);
    }
}

/// Whether counters may still be below the floor.
#[inline]
pub fn moving() -> bool {
    MOVING.load(Relaxed)
}

/// Every counter was visited (or the node stopped being a primary): nothing moves any more.
pub fn stop_moving() {
    MOVING.store(false, Relaxed);
}

/// A counter moved up to a floor.
pub fn count_moved() {
    MOVED.fetch_add(1, Relaxed);
}

/// (counters moved, events), for `INFO lockmod`.
pub fn counts() -> (u64, u64) {
    (MOVED.load(Relaxed), EVENTS.load(Relaxed))
}

/// `CONFIG RESETSTAT`: the two counters of [`counts`] back to 0 (the era and its state stay).
pub fn reset_counts() {
    MOVED.store(0, Relaxed);
    EVENTS.store(0, Relaxed);
}

/// The module was loaded (again): nothing from before may be trusted, the era included (a
/// `MODULE LOAD` into a server with data starts one from the keyspace's record).
pub fn reset() {
    ERA.store(0, Relaxed);
    RECORDED.store(true, Relaxed);
    MOVING.store(false, Relaxed);
    OPEN.store(false, Relaxed);
    PROVISIONAL.store(false, Relaxed);
}

#[cfg(test)]
#[path = "era_tests.rs"]
mod tests;
