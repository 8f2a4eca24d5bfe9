//! Which of Redisson's scripts this server's script cache holds, so an `EVALSHA` of one it
//! does not hold gets Redis' own `NOSCRIPT` (and Redisson then loads it), as without the
//! module.
//!
//! Since Redis 7.0 scripts are neither saved (RDB, AOF) nor replicated (their effects are):
//! the cache holds what `SCRIPT LOAD`, `EVAL` and `EVAL_RO` added on this server since its
//! start, less what `SCRIPT FLUSH` removed and, on servers that evict scripts `EVAL` created
//! (Redis 7.4+, Valkey 8+: at most 500, oldest first; `SCRIPT LOAD`'s stay), what an `EVAL`
//! of a new script evicted. The command filter sees each of those commands before Redis runs
//! it (or queues it in `MULTI`) but not whether it ran, so the state here is a belief that is
//! only ever wrong towards "unknown":
//! - [`present`] is true only after the cache was asked (`SCRIPT EXISTS`) and nothing that can
//!   remove a script was seen since;
//! - a command that can remove one ([`flushed`], [`eval_may_create`] once an eviction is
//!   possible) makes every row unknown; one queued in `MULTI` makes its client's `EXEC` do it
//!   again ([`on_exec`]), when it really runs;
//! - a command that can add one ([`may_load`]) turns "absent" into unknown, and once one was
//!   queued, so does every `EXEC`.
//!
//! The filter leaves an `EVALSHA` of an absent script to Lua (`NOSCRIPT`), rewrites the other
//! calls, and the rewritten command asks the cache when its row is not present (see
//! `ffi::filter::dispatch`). No `redis_module` here: the asking is `ffi::script_cache`'s.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
use std::sync::Mutex;

use super::table::COUNT;

const ABSENT: u8 = 0;
const PRESENT: u8 = 1;
const UNKNOWN: u8 = 2;

/// `Redis' LRU_LIST_LENGTH`: the most scripts `EVAL` keeps where it evicts.
pub const EVAL_SCRIPTS_KEPT: u64 = 500;
/// The most clients remembered with a queued change; beyond, every `EXEC` forgets.
const MAX_QUEUED: usize = 64;

#[allow(clippy::declare_interior_mutable_const)]
const NEW: AtomicU8 = AtomicU8::new(UNKNOWN);
/// Per table row: [`ABSENT`], [`PRESENT`] or [`UNKNOWN`]. Only the main thread touches these.
static STATE: [AtomicU8; COUNT] = [NEW; COUNT];

/// False when the filter cannot see `SCRIPT` (renamed): nothing is ever believed.
static TRACKED: AtomicBool = AtomicBool::new(true);
/// The server evicts scripts `EVAL` created.
static EVICTS: AtomicBool = AtomicBool::new(false);
/// Where it does: how many more `EVAL`s certainly evict nothing (0: unknown).
static BUDGET: AtomicU64 = AtomicU64::new(0);
/// A change was queued by a client the filter cannot name (Redis 7.0): every `EXEC` forgets.
static EVERY_EXEC: AtomicBool = AtomicBool::new(false);
/// A load may have been queued in `MULTI`: every `EXEC` turns "absent" into unknown (a wrong
/// "absent" only sends a call to Lua, but would keep it there).
static LOADS_QUEUED: AtomicBool = AtomicBool::new(false);
/// Clients that queued a removal in `MULTI`, whose `EXEC` forgets.
static QUEUED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static ANY_QUEUED: AtomicBool = AtomicBool::new(false);

/// True if row `row`'s script is known to be in the cache.
#[inline]
pub fn present(row: usize) -> bool {
    STATE.get(row).is_some_and(|s| s.load(Relaxed) == PRESENT)
}

/// True if row `row`'s script is known not to be in the cache.
#[inline]
pub fn absent(row: usize) -> bool {
    STATE.get(row).is_some_and(|s| s.load(Relaxed) == ABSENT)
}

/// Every row unknown (a script may have gone, or the filter was not looking).
pub fn forget_all() {
    for s in &STATE {
        s.store(UNKNOWN, Relaxed);
    }
    BUDGET.store(0, Relaxed);
}

/// Module load: nothing known or queued. `tracked`: the filter sees `SCRIPT` by that name;
/// `evicts`: the server evicts the scripts `EVAL` created.
pub fn reset(tracked: bool, evicts: bool) {
    forget_all();
    TRACKED.store(tracked, Relaxed);
    EVICTS.store(evicts, Relaxed);
    EVERY_EXEC.store(false, Relaxed);
    LOADS_QUEUED.store(false, Relaxed);
    if let Ok(mut q) = QUEUED.lock() {
        q.clear();
    }
    ANY_QUEUED.store(false, Relaxed);
}

/// False where `SCRIPT` is renamed: the filter cannot see a flush, nor the module ask the
/// cache, so every script runs as Lua.
#[inline]
pub fn tracked() -> bool {
    TRACKED.load(Relaxed)
}

/// The cache was asked about `row`, outside a transaction: its answer holds until the filter
/// sees a change.
pub fn learned(row: usize, in_cache: bool) {
    if TRACKED.load(Relaxed) {
        if let Some(s) = STATE.get(row) {
            s.store(if in_cache { PRESENT } else { ABSENT }, Relaxed);
        }
    }
}

/// The cache holds `cached` scripts (asked outside a transaction): where `EVAL` evicts, that
/// many fewer than 500 `EVAL`s evict nothing.
pub fn learned_size(cached: u64) {
    BUDGET.store(EVAL_SCRIPTS_KEPT.saturating_sub(cached), Relaxed);
}

/// True where the cache's size must be asked again before the budget can be trusted.
pub fn budget_unknown() -> bool {
    EVICTS.load(Relaxed) && BUDGET.load(Relaxed) == 0
}

/// `SCRIPT LOAD` of row `row`'s body, or an `EVAL` of it left to Lua: it may be in the cache
/// (now, or at the `EXEC` of `client`, the caller and whether it is in `MULTI`).
pub fn may_load(row: usize, client: impl FnOnce() -> Option<(u64, bool)>) {
    if let Some(s) = STATE.get(row) {
        let _ = s.compare_exchange(ABSENT, UNKNOWN, Relaxed, Relaxed);
    }
    if !matches!(client(), Some((_, false))) {
        LOADS_QUEUED.store(true, Relaxed);
    }
}

fn unabsent_all() {
    for s in &STATE {
        let _ = s.compare_exchange(ABSENT, UNKNOWN, Relaxed, Relaxed);
    }
}

/// `SCRIPT FLUSH` seen. `client`: the caller and whether it is in `MULTI` (`None`: unknown).
pub fn flushed(client: Option<(u64, bool)>) {
    forget_all();
    queued(client);
}

/// An `EVAL`/`EVAL_RO` left to Redis (it may create a script). Where the server evicts, it
/// spends the budget, and once that is spent, or when it is only queued, a script may go.
pub fn eval_may_create(client: impl FnOnce() -> Option<(u64, bool)>) {
    if !EVICTS.load(Relaxed) {
        return;
    }
    match BUDGET.load(Relaxed) {
        0 => forget_all(),
        n => BUDGET.store(n - 1, Relaxed),
    }
    queued(client());
}

fn queued(client: Option<(u64, bool)>) {
    match client {
        Some((_, false)) => {}
        Some((id, true)) => {
            let Ok(mut q) = QUEUED.lock() else { return EVERY_EXEC.store(true, Relaxed) };
            if q.contains(&id) {
                return;
            }
            if q.len() >= MAX_QUEUED {
                EVERY_EXEC.store(true, Relaxed);
            } else {
                q.push(id);
                ANY_QUEUED.store(true, Relaxed);
            }
        }
        None => EVERY_EXEC.store(true, Relaxed),
    }
}

/// `EXEC` seen (before it runs): if it may run a queued change, every row is unknown until
/// asked again after it. `client` names the caller (`None`: unknown).
pub fn on_exec(client: impl FnOnce() -> Option<(u64, bool)>) {
    if EVERY_EXEC.load(Relaxed) {
        return forget_all();
    }
    if LOADS_QUEUED.load(Relaxed) {
        unabsent_all();
    }
    if !ANY_QUEUED.load(Relaxed) {
        return;
    }
    let Some((id, _)) = client() else { return forget_all() };
    let Ok(mut q) = QUEUED.lock() else { return forget_all() };
    if let Some(i) = q.iter().position(|c| *c == id) {
        q.swap_remove(i);
        ANY_QUEUED.store(!q.is_empty(), Relaxed);
        drop(q);
        forget_all();
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
