//! Runs a rewritten call of a synchronizer body: the core function of its native command,
//! made to answer exactly what the body would ([`answer`]), or `None` (run the body itself).
//!
//! The rule is the locks' (`crate::redisson::exec`): a rewritten call answers exactly as the script
//! would, and any doubt leaves it to Lua. Every check here reads, before the first write, so
//! a call left to Lua finds the keyspace as the client left it:
//! - a value the module does not read as an integer (the core's `NotInteger`, a wrong type):
//!   Lua's `tonumber` may read it, or the script fails with its own error;
//! - a count, or a count the call would make, beyond ±`LUA_SAFE`: the Lua computes in doubles
//!   and the server formats them (`1e+14`);
//! - the expirable semaphore's refusal names the lowest lease end as the server formats a
//!   score: a score that is not a plain integer is left to Lua.
//!
//! What stays as the docs say (docs/redisson-sync-scripts.md): the clock is the server's, not
//! the `now` in ARGV, and parked native clients are not seen (`queued_ahead` is false).

use super::rewrite::LUA_SAFE;
use super::table::SyncKind;
use crate::core::sync::countdown;
use crate::core::sync::names::{permit_timeouts, semaphore_channel};
use crate::core::sync::permits::{self, Acquire, PermitId, ID_LEN};
use crate::core::sync::semaphore;
use crate::core::sync::store::SyncStore;
use crate::core::{parse_i64, LockError, Reply, Result};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};
use crate::redisson::native::Native;
use crate::redisson::stats::Cause;

fn safe(v: i64) -> bool {
    (-LUA_SAFE..=LUA_SAFE).contains(&v)
}

/// `Some(())` if the count stored in `name`, plus `more`, stays within ±[`LUA_SAFE`].
fn fits<S: SyncStore>(s: &mut S, key: &[u8], more: i64) -> Result<Option<()>> {
    let cur = s.get_int(key)?.unwrap_or(0);
    Ok((safe(cur) && cur.checked_add(more).is_some_and(safe)).then_some(()))
}

/// The permits a reclaim at `now` would return (all of them, or at most `limit`).
fn expired<S: SyncStore>(s: &mut S, key: &[u8], limit: Option<usize>) -> Result<i64> {
    let now = s.now() as f64;
    let n = s.zset_count(&permit_timeouts(key), 0.0, now)?;
    Ok(limit.map_or(n, |l| n.min(l)) as i64)
}

/// A score as the server formats it in a script's reply, if it is a plain integer.
fn plain_score(t: f64) -> Option<i64> {
    (t.fract() == 0.0 && t.abs() < 1e15).then_some(t as i64)
}

macro_rules! lua_if {
    ($cond:expr) => {
        if $cond {
            return Ok(None);
        }
    };
}

/// The reply the body of `kind` gives for the native arguments `args` (`args[0]` the name),
/// with its writes made; `Ok(None)` or an error: nothing was written, run the body.
pub fn answer<S: SyncStore>(s: &mut S, kind: SyncKind, args: &[&[u8]]) -> Result<Option<Reply>> {
    use SyncKind::*;
    let key = args[0];
    let int = |i: usize| args.get(i).and_then(|b| parse_i64(b)).unwrap_or(0);
    Ok(Some(match kind {
        SemAcquire => {
            lua_if!(fits(s, key, 0)?.is_none());
            Reply::Int(i64::from(semaphore::acquire(s, key, int(1), false)?))
        }
        SemRelease { .. } => {
            lua_if!(fits(s, key, int(1))?.is_none());
            semaphore::release(s, key, int(1))?;
            Reply::Nil
        }
        // Any string: the Lua replies it as it is and writes 0 (`semaphore::drain` would read
        // it as a count first).
        SemDrain => {
            let Some(raw) = s.get(key)? else { return Ok(Some(Reply::Int(0))) };
            s.set(key, b"0");
            Reply::Bulk(raw)
        }
        TrySet { .. } | SemTrySetTtl => {
            // The Lua only asks whether `name` holds a string: any value refuses, unread.
            if s.get(key)?.is_some() {
                return Ok(Some(Reply::Int(0)));
            }
            let ttl = (kind == SemTrySetTtl).then(|| int(3));
            Reply::Int(i64::from(semaphore::try_set_permits(s, key, int(1), ttl)?))
        }
        SemAdd { .. } => {
            lua_if!(fits(s, key, int(1))?.is_none());
            semaphore::add_permits(s, key, int(1))?;
            Reply::Nil
        }
        CountDown { .. } => {
            if s.get_int(key)?.is_none() {
                // The Lua's `DECR` then `DEL` leave no key; their events and effects are kept.
                s.decr_by(key, 1)?;
                s.del(key);
            } else {
                countdown::count_down(s, key)?;
            }
            Reply::Nil
        }
        TrySetCount { .. } => Reply::Int(i64::from(countdown::try_set_count(s, key, int(1))?)),
        PAcquire { ids, .. } => return acquire(s, key, args, ids),
        PReleaseOne { .. } => {
            lua_if!(fits(s, key, 1)?.is_none());
            Reply::Int(permits::release_one(s, key, args[1])?.reply())
        }
        PReleaseMany { all } => {
            let more = expired(s, key, None)? + (args.len() - 1) as i64;
            lua_if!(fits(s, key, more)?.is_none());
            let ids = &args[1..];
            Reply::Int(if all { permits::release_all(s, key, ids)? } else { permits::release_each(s, key, ids)? })
        }
        PAvailable { .. } => {
            s.zset_len(&permit_timeouts(key))?;
            let more = expired(s, key, None)?;
            lua_if!(fits(s, key, more)?.is_none());
            let now = s.now();
            match permits::reclaim(s, key, now, None)? {
                Some(v) => Reply::Int(v),
                None => s.get(key)?.map_or(Reply::Int(0), Reply::Bulk),
            }
        }
        PAcquired { .. } => {
            let more = expired(s, key, None)?;
            lua_if!(fits(s, key, more)?.is_none());
            Reply::Int(permits::acquired(s, key)?)
        }
        PUpdateLease { .. } => {
            let more = expired(s, key, None)?;
            lua_if!(fits(s, key, more)?.is_none());
            Reply::Int(i64::from(permits::update_lease(s, key, args[1], int(2))?))
        }
        PSetPermits { exact, .. } => return set_permits(s, key, int(1), exact),
    }))
}

/// `tryAcquire` of the expirable semaphore: the client's ids and absolute expiry.
fn acquire<S: SyncStore>(s: &mut S, key: &[u8], args: &[&[u8]], with_ids: bool) -> Result<Option<Reply>> {
    let n = parse_i64(args[1]).unwrap_or(0);
    let until = parse_i64(args[2]).unwrap_or(0);
    let ids: Vec<PermitId> = args[3..].iter().filter_map(|id| <PermitId>::try_from(*id).ok()).collect();
    lua_if!(ids.len() as i64 != n || n < 1 || args[3..].iter().any(|id| id.len() != ID_LEN));
    let z = permit_timeouts(key);
    s.zset_len(&z)?;
    let more = expired(s, key, Some(n as usize))?;
    lua_if!(fits(s, key, more)?.is_none());
    // The refusal names the lowest score left after the reclaim, one of the first n + 1.
    let first = s.zset_range_by_score(&z, f64::NEG_INFINITY, f64::INFINITY, Some(n as usize + 1))?;
    lua_if!(first.iter().any(|(_, t)| plain_score(*t).is_none()));
    let mut next = ids.iter().copied();
    let got = permits::acquire(s, key, n, until, false, || next.next().unwrap_or([0; ID_LEN]))?;
    Ok(Some(match got {
        Acquire::Granted(_) if with_ids => Reply::Bulk(b"OK".to_vec()),
        Acquire::Granted(_) => Reply::Bulk(args[3].to_vec()),
        Acquire::Refused { next_expiry: Some(t) } => Reply::Bulk(format!(":{}", t as i64).into_bytes()),
        Acquire::Refused { next_expiry: None } => Reply::Nil,
    }))
}

/// `setPermits`: the older bodies compare a number with a string, never equal, so an
/// unchanged total still runs `INCRBY 0` and publishes.
fn set_permits<S: SyncStore>(s: &mut S, key: &[u8], n: i64, exact: bool) -> Result<Option<Reply>> {
    if let Some(cur) = s.get_int(key)? {
        let held = s.zset_count(&permit_timeouts(key), 0.0, f64::INFINITY)? as i64;
        let total = cur.checked_add(held);
        lua_if!(!safe(cur) || !total.is_some_and(safe) || !total.and_then(|t| n.checked_sub(t)).is_some_and(safe));
        if total == Some(n) && !exact {
            s.incr_by(key, 0)?;
            s.publish(&semaphore_channel(key), n.to_string().as_bytes());
            return Ok(Some(Reply::Nil));
        }
    }
    permits::set_permits(s, key, n)?;
    Ok(Some(Reply::Nil))
}

/// Why a call whose native answer failed with `e` runs as Lua: a `name` holding a value Lua's
/// `tonumber` reads as a number where the module reads no integer (`" 3"`, `"2.0"`) is a
/// state the script handles its own way (`ScriptState`); anything else (another type, a
/// non-number) ends in the script's own error (`Error`).
pub fn cause_of<S: SyncStore>(s: &mut S, key: &[u8], e: &LockError) -> Cause {
    let lua_reads = *e == LockError::NotInteger
        && s.get(key).ok().flatten().is_some_and(|v| crate::redisson::lua_number::lua_reads_number(&v));
    if lua_reads {
        Cause::ScriptState
    } else {
        Cause::Error
    }
}

/// True for the bodies whose native command gives permits a lease, or reclaims them: the
/// semaphore's reclaim timer is re-armed after them.
pub fn leases(native: Native) -> bool {
    matches!(
        native,
        Native::PsemAcquire
            | Native::PsemRelease
            | Native::PsemUpdateLease
            | Native::PsemAvailable
            | Native::PsemAcquired
            | Native::PsemSetPermits
    )
}

/// Runs a rewritten call of `kind` on the command's store: the reply, or the cause for which
/// the body runs itself (nothing was written). Parked clients are then served, and an
/// expirable semaphore's reclaim timer re-armed, as after the native command.
pub fn run(ctx: &Ctx, args: &Args, kind: SyncKind, native: Native) -> std::result::Result<Reply, Cause> {
    let native_args: Vec<&[u8]> = (1..args.len()).map(|i| args.bytes(i)).collect();
    let mut store = RedisStore::new(ctx, args);
    let out = answer(&mut store, kind, &native_args).map_err(|e| cause_of(&mut store, args.bytes(1), &e));
    drop(store);
    let reply = match out {
        Ok(Some(reply)) => reply,
        Ok(None) => return Err(Cause::ScriptState),
        Err(cause) => return Err(cause),
    };
    stats::SYNC_CALLS.inc();
    crate::blocking::serve_now(ctx);
    if leases(native) {
        crate::blocking::reclaim::arm(ctx, &(ctx.selected_db(), args.bytes(1).to_vec()));
    }
    Ok(reply)
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
