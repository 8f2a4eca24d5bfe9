//! Runs a rewritten script call: the native command, made to answer exactly what the script
//! would, or [`Outcome::Fallback`] to run the script itself.
//!
//! The native commands read and type-check everything before their first write, so any error
//! they return (a wrong type, a corrupt count) left the keyspace untouched: the script then
//! runs as sent and answers with its own error text. The same goes for states in which a
//! script version behaves differently from the module (checked here, read-only, before the
//! command runs): older fair-lock scripts fail on a queued waiter without a deadline, an
//! unlock latch holding something other than `0`/`1` is read by Lua's `tonumber`.

use super::lua_number::{lua_number, LuaNumber};
use super::rewrite::{Native, MAX_MS};
use super::stats::Cause;
use super::table::{FairVersion, Kind};
use crate::core::lock::kinds;
use crate::core::lock::rwlock::{MAX_HOLDS_PER_FIELD, MODE};
use crate::core::names;
use crate::core::{parse_i64, LockError, Reply, Result, Store};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx, Handler};

/// What a rewritten call comes to.
pub enum Outcome {
    /// The reply, as the script would have given it.
    Reply(Reply),
    /// Run the script itself (nothing was written), for this cause.
    Fallback(Cause),
}

/// Waiter deadlines this close to `now` may be judged differently by two clock readings (Redis
/// 7.0 gives a module no per-command clock): such a queue is left to the script.
const CLOCK_MARGIN_MS: f64 = 5.0;

/// Runs `kind`'s native command (`handler`) on the rewritten arguments.
pub fn run(ctx: &Ctx, args: &Args, kind: Kind, native: Native, handler: Handler) -> Outcome {
    let answered = match kind {
        Kind::Sync(k) => Some(super::sync::exec::run(ctx, args, k, native)),
        Kind::Rate(k) => Some(super::rate::exec::run(ctx, args, k)),
        _ => None,
    };
    if let Some(answered) = answered {
        return match answered {
            Ok(reply) => {
                super::stats::native(native);
                Outcome::Reply(reply)
            }
            Err(cause) => Outcome::Fallback(cause),
        };
    }
    let pre = match check(ctx, args, kind) {
        Ok(Some(Pre::Lua(cause))) => return Outcome::Fallback(cause),
        Ok(Some(pre)) => pre,
        Ok(None) => return Outcome::Fallback(Cause::ScriptState),
        Err(_) => return Outcome::Fallback(Cause::Error),
    };
    let reply = match pre {
        // A renewal answered here moved leases parked clients may wait for.
        Pre::Done(reply) => {
            crate::blocking::serve_now(ctx);
            reply
        }
        Pre::Run(seen) => match handler(ctx, args) {
            // An acquire's refusal wrote nothing: only then can a module rule have decided it.
            Ok(reply) if refused(kind, &reply) && refused_by_module_rule(ctx, args, kind) => {
                return Outcome::Fallback(Cause::ModuleRule)
            }
            Ok(reply) => convert(kind, &seen, reply),
            Err(_) => return Outcome::Fallback(Cause::Error),
        },
        Pre::Lua(cause) => return Outcome::Fallback(cause),
    };
    super::stats::native(native);
    Outcome::Reply(reply)
}

/// What the checks found before the command runs.
enum Pre {
    /// Run the native command, then convert its reply with what was seen.
    Run(Seen),
    /// Answered (by one of the script-only variants below) without the command.
    Done(Reply),
    /// Run the script itself.
    Lua(Cause),
}

/// The state the reply conversions depend on.
#[derive(Default)]
struct Seen {
    /// A read-write lock without a mode (free), and no latch answered.
    rw_free: bool,
    /// An old fair acquire by an owner that stays queued: `its deadline - wait - now`.
    queued_reply: Option<i64>,
}

/// The read-only checks of `kind`: `Ok(None)` (a state the script handles its own way), a
/// [`Pre::Lua`] or an error means run the script instead.
fn check(ctx: &Ctx, args: &Args, kind: Kind) -> Result<Option<Pre>> {
    let key = args.bytes(1);
    let mut s = RedisStore::new(ctx, args);
    let mut seen = Seen::default();
    if module_rule_applies(&mut s, kind, key)? {
        return Ok(Some(Pre::Lua(Cause::ModuleRule)));
    }
    let plain = match kind {
        // The Lua's meaning on any hash: the field is there, so the lease is reset. The native
        // `LOCK.RENEW` refuses a read-write lock's hash, where the write lock's watchdog sends
        // this body for `owner:write`.
        Kind::LockRenew { task } => {
            let renewed = renew_field(&mut s, key, args.bytes(2), args.bytes(3))?;
            if renewed == 1 {
                stats::RENEWED.inc();
            }
            return Ok(Some(Pre::Done(wrap(task, renewed))));
        }
        // A counter at -2 would grant token -1: `[-1, -1]`, which also means "refused".
        Kind::LockAcquireFenced { token_reply: false } => {
            s.get(&names::token(key))?.and_then(|v| parse_i64(&v)) != Some(-2)
        }
        Kind::LockUnlock { latch: true, .. } | Kind::FairUnlock { latch: true, strict: false, .. } => {
            latch_plain(&mut s, key, args.bytes(5))?
        }
        Kind::RwUnlockRead { latch, free_is_one, .. } | Kind::RwUnlockWrite { latch, free_is_one, .. } => {
            let request = args.bytes(6);
            let answered_by_latch = latch && s.get(&names::unlock_latch(key, request))?.is_some();
            seen.rw_free = free_is_one && !answered_by_latch && s.hash_get(key, MODE)?.is_none();
            !latch || latch_plain(&mut s, key, request)?
        }
        Kind::RwRenewAll { task, shadowed } => {
            let renewed = renew_all(&mut s, key, args.bytes(2), args.bytes(3), shadowed)?;
            if renewed == Some(1) {
                stats::RENEWED.inc();
            }
            return Ok(renewed.map(|n| Pre::Done(wrap(task, n))));
        }
        // 4.4+ renews only the owner's read holds, and only if it reads. Its Lua does not
        // look at the mode: on a hash without one (a reentrant lock's) it renews what
        // `RWLOCK.RENEW` refuses.
        Kind::RwRenewOwner => match s.hash_get(key, args.bytes(2))? {
            None => return Ok(Some(Pre::Done(wrap(true, 0)))),
            Some(v) => parse_i64(&v).is_some_and(|c| c <= MAX_HOLDS_PER_FIELD) && s.hash_get(key, MODE)?.is_some(),
        },
        Kind::FairAcquire(v) => {
            let owner = args.bytes(2);
            if v == FairVersion::Old {
                let Some(purged) = strict_purge(&mut s, key)? else { return Ok(None) };
                let wait = parse_i64(args.bytes(4)).unwrap_or(0) as f64;
                if !purged.iter().any(|p| p == owner) {
                    if let Some(at) = s.zset_score(&names::fair_timeouts(key), owner)? {
                        seen.queued_reply = Some((at - wait - s.now() as f64) as i64);
                    }
                }
            }
            v == FairVersion::Head || tail_has_deadline(&mut s, key, owner)?
        }
        Kind::FairTry { strict: true } | Kind::FairForceUnlock { strict: true, .. } => {
            strict_purge(&mut s, key)?.is_some()
        }
        Kind::FairUnlock { latch, strict: true, .. } => {
            (!latch || latch_plain(&mut s, key, args.bytes(5))?) && strict_purge(&mut s, key)?.is_some()
        }
        _ => true,
    };
    if !plain {
        return Ok(None);
    }
    Ok(Some(Pre::Run(seen)))
}

/// True if the native command would apply one of the module's own rules here, which the
/// script does not know, so the two would answer differently: the call is left to Lua.
///
/// - One name, one kind: the reentrant and fair commands refuse a read-write lock's hash (the
///   scripts count the caller's field in it, or delete it), and the read-write commands refuse
///   a hash without a mode (the scripts add a mode to it).
/// - A fair queue is not jumped: a free name whose fair queue has a live waiter is refused to
///   the reentrant and read-write acquires (the scripts do not look at the queue).
/// - Writers are not starved: a new reader is refused while a writer is parked with `BLOCK`
///   (Redisson's clients cannot see parked writers, and its script grants the read).
///
/// None of these states arises while one lock class alone uses a name, so Redisson's calls in
/// ordinary use all still run natively (tests/redisson/redisson_states.rs checks both).
///
/// The acquires are checked after the native command, and only when it refused
/// ([`refused_by_module_rule`]): the script grants wherever the command grants, with the same
/// writes, and a refusal writes nothing, so the usual grant pays for no second look.
fn module_rule_applies(s: &mut RedisStore, kind: Kind, key: &[u8]) -> Result<bool> {
    Ok(match kind {
        Kind::LockUnlock { .. }
        | Kind::LockForceUnlock { .. }
        | Kind::FairAcquire(_)
        | Kind::FairTry { .. }
        | Kind::FairUnlock { .. }
        | Kind::FairForceUnlock { .. } => kinds::is_rwlock(s, key),
        _ => false,
    })
}

/// Whether the native reply of an acquire is a refusal (nil, or `[-1, token]`, is a grant).
fn refused(kind: Kind, reply: &Reply) -> bool {
    let acquire = matches!(kind, Kind::LockAcquire | Kind::LockAcquireFenced { .. } | Kind::RwRead | Kind::RwWrite);
    acquire
        && match reply {
            Reply::Nil => false,
            Reply::Array(v) => !matches!(v.as_slice(), [Reply::Int(-1), Reply::Int(t)] if *t != -1),
            _ => true,
        }
}

/// After an acquire's refusal: whether a module rule made it (see [`module_rule_applies`]),
/// where the script would have granted. An unreadable state (an error) is no module rule.
fn refused_by_module_rule(ctx: &Ctx, args: &Args, kind: Kind) -> bool {
    let key = args.bytes(1);
    let mut s = RedisStore::new(ctx, args);
    let rule = |s: &mut RedisStore| -> Result<bool> {
        Ok(match kind {
            Kind::LockAcquire | Kind::LockAcquireFenced { .. } => {
                kinds::is_rwlock(s, key) || (!s.exists(key) && kinds::fair_queue_ahead(s, key)?.is_some())
            }
            Kind::RwRead | Kind::RwWrite if s.hash_get(key, MODE)?.is_none() => {
                s.exists(key) || kinds::fair_queue_ahead(s, key)?.is_some()
            }
            Kind::RwRead => crate::blocking::writer_waits(ctx, key),
            _ => false,
        })
    };
    rule(&mut s).unwrap_or(false)
}

/// Redisson's reentrant renewal, as its Lua does it on any hash: if `field` is there, the
/// lock's lease is reset to `lease` (1), else nothing (0). Another type is an error (the
/// script's `WRONGTYPE`, from running it).
fn renew_field<S: Store>(s: &mut S, key: &[u8], field: &[u8], lease: &[u8]) -> Result<i64> {
    let lease = parse_i64(lease).filter(|l| (1..=MAX_MS).contains(l)).ok_or(LockError::NotInteger)?;
    if s.hash_get(key, field)?.is_none() {
        return Ok(0);
    }
    let at = s.now() + lease;
    s.pexpire_at(key, at);
    Ok(1)
}

/// The native reply as the script gives it.
fn convert(kind: Kind, seen: &Seen, reply: Reply) -> Reply {
    match (kind, reply) {
        // The fenced lock's nil/PTTL form counts tokens without replying them.
        (Kind::LockAcquireFenced { token_reply: false }, Reply::Array(v)) => match v.as_slice() {
            // `[-1, -1]` is a refusal by a lock without expiry (`check` ruled out token -1).
            [Reply::Int(-1), Reply::Int(t)] if *t != -1 => Reply::Nil,
            [ttl, _] => ttl.clone(),
            _ => Reply::Array(v),
        },
        (Kind::LockRenew { task: true }, Reply::Int(n)) => wrap(true, n),
        (Kind::RwUnlockRead { .. } | Kind::RwUnlockWrite { .. }, Reply::Nil) if seen.rw_free => Reply::Int(1),
        (Kind::RwRenewOwner, Reply::Int(n)) => wrap(true, n),
        (Kind::FairAcquire(FairVersion::Old), Reply::Int(n)) => Reply::Int(seen.queued_reply.unwrap_or(n)),
        // `acquireFailed`'s script returns nothing.
        (Kind::FairCancel, _) => Reply::Nil,
        (_, r) => r,
    }
}

/// A batched renewal's reply for its one lock: `{n}`.
fn wrap(task: bool, n: i64) -> Reply {
    if task {
        Reply::Array(vec![Reply::Int(n)])
    } else {
        Reply::Int(n)
    }
}

/// True if the unlock latch is absent or holds `0`/`1`, which Lua's `tonumber` and the native
/// command read alike.
fn latch_plain<S: Store>(s: &mut S, key: &[u8], request: &[u8]) -> Result<bool> {
    Ok(match s.get(&names::unlock_latch(key, request))? {
        None => true,
        Some(v) => v == b"0" || v == b"1",
    })
}

/// The waiters a pre-3.32 purge pops (their deadline passed), or `None` if it would raise a
/// Lua error on a head waiter without a deadline, or meet one too close to call.
fn strict_purge<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
    let (queue, deadlines) = (names::fair_queue(key), names::fair_timeouts(key));
    let now = s.now() as f64;
    let mut purged = Vec::new();
    let mut i = 0;
    while let Some(head) = s.list_index(&queue, i)? {
        match s.zset_score(&deadlines, &head)? {
            None => return Ok(None),
            Some(at) if (at - now).abs() <= CLOCK_MARGIN_MS => return Ok(None),
            Some(at) if at < now => purged.push(head),
            Some(_) => break,
        }
        i += 1;
    }
    Ok(Some(purged))
}

/// False if the queue's tail is another waiter without a deadline: 3.17-3.44 raise a Lua error
/// there when they queue `owner`.
fn tail_has_deadline<S: Store>(s: &mut S, key: &[u8], owner: &[u8]) -> Result<bool> {
    Ok(match s.list_index(&names::fair_queue(key), -1)? {
        Some(tail) if tail != owner => s.zset_score(&names::fair_timeouts(key), &tail)?.is_some(),
        _ => true,
    })
}

/// Redisson's read-lock renewal before 4.4: if `owner` reads, renew the lock and every read
/// hold of every holder (Lua walks each field whose value is a number). `None`: run the
/// script (a count the module would read differently, or one the shadowed 3.44-3.52 body
/// fails on: its inner loop index replaces the lock index, so a count of 2 or more ends in
/// a Lua error after the lock was already renewed).
fn renew_all<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: &[u8], shadowed: bool) -> Result<Option<i64>> {
    let Some(lease) = parse_i64(lease).filter(|l| (1..=MAX_MS).contains(l)) else { return Ok(None) };
    if s.hash_get(key, owner)?.is_none() {
        return Ok(Some(0));
    }
    let entries = s.hash_entries(key)?;
    let mut holds = Vec::new();
    if entries.len() > 1 {
        for (field, value) in entries {
            match lua_number(&value) {
                LuaNumber::Int(n) if n > MAX_HOLDS_PER_FIELD || (shadowed && n >= 2) => return Ok(None),
                LuaNumber::Int(n) => holds.push((field, n)),
                LuaNumber::NotANumber => {}
                LuaNumber::Unsure => return Ok(None),
            }
        }
    }
    let at = s.now() + lease;
    s.pexpire_at(key, at);
    for (field, n) in holds {
        for i in (1..=n).rev() {
            s.read_hold_expire(key, &field, i, at);
        }
    }
    Ok(Some(1))
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
