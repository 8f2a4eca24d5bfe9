//! Asking the server's script cache about Redisson's scripts (`super::cache`): at load, and
//! from a rewritten call whose script is not known to be there (`super::dispatch`).

use redis_module::raw;

use super::cache;
use super::table::ROWS;
use crate::ffi::script_cache::{exists, info_field, script_named};
use crate::ffi::{log, Ctx};

/// Module load (`OnLoad`: at server start, or `MODULE LOAD` after scripts were loaded): asks
/// the cache about every script once.
pub fn init(ctx: &Ctx) {
    let named = script_named(ctx);
    let evicts = info_field(ctx, "stats", "evicted_scripts").is_some();
    cache::reset(named, evicts);
    if !named {
        log(
            c"notice",
            "lockmod: SCRIPT is renamed, so the script cache cannot be followed: Redisson's scripts run as Lua",
        );
        return;
    }
    learn_all(ctx);
}

/// Asks the cache about every row (and its size where the server evicts).
pub fn learn_all(ctx: &Ctx) {
    let shas: Vec<&str> = ROWS.iter().map(|r| r.sha).collect();
    if let Some(answers) = exists(ctx, &shas) {
        answers.into_iter().enumerate().for_each(|(row, a)| cache::learned(row, a));
    }
    learn_size(ctx);
}

fn learn_size(ctx: &Ctx) {
    if cache::budget_unknown() {
        if let Some(n) = info_field(ctx, "memory", "number_of_cached_scripts") {
            cache::learned_size(n);
        }
    }
}

/// Whether row `row`'s script is in the cache now (`None`: could not ask). Remembered unless
/// inside a transaction, where a change queued before this call may run after it.
pub fn holds(ctx: &Ctx, row: usize) -> Option<bool> {
    let in_cache = *exists(ctx, &[ROWS.get(row)?.sha])?.first()?;
    if ctx.flags() & u64::from(raw::REDISMODULE_CTX_FLAGS_MULTI) == 0 {
        cache::learned(row, in_cache);
        learn_size(ctx);
    }
    Some(in_cache)
}
