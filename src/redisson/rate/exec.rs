//! Runs a rewritten call of a rate-limiter body: the body's own semantics on the store
//! (`crate::core::rate::bodies`, `crate::core::rate::body_settings`), or the cause for which
//! the body runs as Lua (nothing was written).
//!
//! The rule is the locks' (`crate::redisson::exec`): a rewritten call answers exactly as the script
//! would, and any doubt leaves it to Lua. Here the answers are the bodies' own (not
//! `RATELIMITER.*`'s, which fix Redisson's numbers), so every state a Redisson client can
//! meet is answered natively, except where the body fails (its error text is the Lua's:
//! `Cause::Error`) or reads a value the module does not read the same way (`Cause::
//! ScriptState`). What stays as the docs say (docs/redisson-ratelimiter-scripts.md): parked
//! native clients are not seen (the Lua grants past them), and the window's clock is ARGV's.

use super::table::RateKind;
use crate::core::rate::bodies;
use crate::core::rate::bodies::{Answer, Five, Why};
use crate::core::rate::body_settings as settings;
use crate::core::rate::body_settings::{Cond, ExpireOp};
use crate::core::rate::store::RateStore;
use crate::core::{parse_i64, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};
use crate::redisson::stats::Cause;

fn int(b: &[u8]) -> Result<i64, Why> {
    parse_i64(b).ok_or(Why::Odd)
}

fn five<'a>(keys: &[&'a [u8]]) -> Result<Five<'a>, Why> {
    Five::of(keys).ok_or(Why::Odd)
}

/// The reply body `kind` gives for `keys` and `argv` (as sent, checked by
/// `super::rewrite::plan`), with its writes made; or why the Lua must give it.
pub fn answer<S: RateStore>(s: &mut S, kind: RateKind, keys: &[&[u8]], argv: &[&[u8]]) -> Answer {
    use RateKind::*;
    match kind {
        Acquire(body) => bodies::acquire(s, &five(keys)?, body, int(argv[0])?, int(argv[1])?, argv[2]),
        Available => bodies::available(s, &five(keys)?, int(argv[0])?),
        Release => bodies::release(s, &five(keys)?, int(argv[0])?),
        TrySet(v) => settings::try_set_rate(s, keys[0], argv, v),
        SetRate(v) => settings::set_rate(s, keys, argv, v),
        SetOrUpdate => settings::set_or_update(s, &five(keys)?, argv),
        Expire | ExpireAt => {
            let ms = int(argv[0])?;
            let op = if kind == Expire { ExpireOp::After(ms) } else { ExpireOp::At(ms) };
            settings::expire_keys(s, keys, op, Cond::parse(argv[1]).ok_or(Why::Odd)?)
        }
        ClearExpire => settings::expire_keys(s, keys, ExpireOp::Persist, Cond::Always),
        GcraTrySet => settings::gcra_try_set(s, keys[0], argv),
        GcraSet => settings::gcra_set(s, keys[0], keys[1], argv),
        GcraAcquire => settings::gcra_acquire(s, keys[0], keys[1], argv[0]),
    }
}

/// Runs a rewritten call of `kind` on the command's store: the reply, or the cause for which
/// the body runs itself. Clients parked on the limiter are then served, as after the native
/// commands (a body's release or new rate may let them through).
pub fn run(ctx: &Ctx, args: &Args, kind: RateKind) -> Result<Reply, Cause> {
    let native: Vec<&[u8]> = (1..args.len()).map(|i| args.bytes(i)).collect();
    let (nk, na) = (kind.keys(), kind.argv());
    let Some(all) = native.get(..nk + na) else { return Err(Cause::Arguments) };
    let (keys, argv) = all.split_at(nk);
    let mut store = RedisStore::new(ctx, args);
    let out = answer(&mut store, kind, keys, argv);
    drop(store);
    let reply = out.map_err(|why| match why {
        Why::Fails => Cause::Error,
        Why::Odd => Cause::ScriptState,
    })?;
    if !kind.gcra() {
        stats::RATE_CALLS.inc();
    }
    if let RateKind::Acquire(_) = kind {
        if reply == Reply::Nil { &stats::RATE_GRANTED } else { &stats::RATE_REFUSED }.inc();
    }
    crate::blocking::serve_now(ctx);
    Ok(reply)
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
