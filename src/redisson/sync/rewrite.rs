//! The argument mapping of the synchronizers' bodies, pure: a recognised call's KEYS/ARGV to
//! the native command's arguments ([`plan`]) and back ([`script_call`], for running the Lua).
//!
//! A rewritten call is answered by `super::exec` itself, never by the command's parser,
//! so its arguments are the contract's positions with what the Lua gets that the contract
//! cannot carry: the client's absolute expiry `until` in `lease_ms`' place, and the client's
//! permit ids after it (`PSEMAPHORE.ACQUIRE name permits until id...`). Only the command's
//! arity, key position and flags matter to Redis.
//!
//! [`plan`] accepts a call only when every key and channel Redisson passed is exactly the one
//! the module derives from the name, the publish command is the module's, the constant
//! arguments are Redisson's (`0`/`1` messages, the no-lease expiry) and every number is a
//! canonical integer small enough that Lua's doubles and the module's integers agree.

use super::table::SyncKind;
use crate::core::parse_i64;
use crate::core::sync::names::{latch_channel, permit_timeouts, semaphore_channel};
use crate::core::sync::permits::{ID_LEN, MAX_ACQUIRE, NO_LEASE};
use crate::redisson::native::{Env, Native, Publish, A, MAX_MS};

pub use crate::core::numbers::{lua_safe_int as safe_int, LUA_SAFE};

/// The largest absolute expiry (or client clock) accepted: a zset score is a double.
const MAX_SCORE: i64 = 1 << 53;

fn count(b: &[u8]) -> bool {
    safe_int(b).is_some_and(|v| v >= 0)
}

fn score(b: &[u8]) -> bool {
    parse_i64(b).is_some_and(|v| (-MAX_SCORE..=MAX_SCORE).contains(&v))
}

fn publish_ok(p: Publish, argv: &[&[u8]], env: Env) -> bool {
    match p {
        Publish::Fixed => !env.sharded,
        Publish::Arg(i) => argv.get(i - 1).is_some_and(|c| c.eq_ignore_ascii_case(env.publish_cmd())),
    }
}

fn has(p: Publish) -> usize {
    usize::from(matches!(p, Publish::Arg(_)))
}

/// The native command of a synchronizer body.
pub fn native(k: SyncKind) -> Native {
    use SyncKind::*;
    match k {
        SemAcquire => Native::SemAcquire,
        SemRelease { .. } => Native::SemRelease,
        SemDrain => Native::SemDrain,
        TrySet { old: false, .. } | SemTrySetTtl => Native::SemTrySet,
        TrySet { old: true, .. } => Native::PsemTrySet,
        SemAdd { .. } => Native::SemAdd,
        CountDown { .. } => Native::CountdownDecr,
        TrySetCount { .. } => Native::CountdownTrySet,
        PAcquire { .. } => Native::PsemAcquire,
        PReleaseOne { .. } | PReleaseMany { .. } => Native::PsemRelease,
        PAvailable { .. } => Native::PsemAvailable,
        PAcquired { .. } => Native::PsemAcquired,
        PUpdateLease { .. } => Native::PsemUpdateLease,
        PSetPermits { .. } => Native::PsemSetPermits,
    }
}

/// The native arguments of a call of `kind`, or `None` to leave it to Lua.
pub fn plan(kind: SyncKind, keys: &[&[u8]], argv: &[&[u8]], env: Env) -> Option<Vec<A>> {
    use SyncKind::*;
    let name = *keys.first()?;
    let (ch, z, lch) = (semaphore_channel(name), permit_timeouts(name), latch_channel(name));
    let keys_are = |want: &[&[u8]]| keys.len() == want.len() + 1 && keys[1..].iter().zip(want).all(|(k, w)| k == w);
    let ok = |c: bool| c.then_some(());
    let ids = |from: usize| (from..argv.len()).map(A::Argv);
    Some(match kind {
        SemAcquire => {
            ok(keys.len() == 1 && argv.len() == 1 && count(argv[0]))?;
            vec![A::Key(0), A::Argv(0)]
        }
        SemRelease { publish: p } | TrySet { publish: p, .. } => {
            ok(keys_are(&[&ch]) && argv.len() == 1 + has(p) && count(argv[0]) && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0)]
        }
        SemAdd { publish: p } => {
            ok(keys_are(&[&ch])
                && argv.len() == 1 + has(p)
                && safe_int(argv[0]).is_some()
                && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0)]
        }
        SemDrain => {
            ok(keys.len() == 1 && argv.is_empty())?;
            vec![A::Key(0)]
        }
        SemTrySetTtl => {
            let ttl = parse_i64(argv.get(2)?).is_some_and(|t| (1..=MAX_MS).contains(&t));
            ok(keys_are(&[&ch]) && argv.len() == 3 && count(argv[0]) && publish_ok(Publish::Arg(2), argv, env) && ttl)?;
            vec![A::Key(0), A::Argv(0), A::Lit(b"LEASE"), A::Argv(2)]
        }
        CountDown { publish: p } => {
            ok(keys_are(&[&lch]) && argv.len() == 1 + has(p) && argv[0] == b"0" && publish_ok(p, argv, env))?;
            vec![A::Key(0)]
        }
        TrySetCount { publish: p } => {
            let shape = argv.len() == 2 + has(p) && argv[0] == b"1" && count(argv[1]);
            ok(keys_are(&[&lch]) && shape && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(1)]
        }
        PAcquire { publish: p, ids: false } => {
            // Every public method of these releases sends one permit with one id.
            let shape = argv.len() == 5 + has(p)
                && argv[0] == b"1"
                && score(argv[1])
                && argv[2].len() == ID_LEN
                && score(argv[3])
                && argv[4] == NO_LEASE.to_string().as_bytes();
            ok(keys_are(&[&z, &ch]) && shape && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0), A::Argv(1), A::Argv(2)]
        }
        PAcquire { publish: p, ids: true } => {
            let n = parse_i64(argv.first()?).filter(|n| (1..=MAX_ACQUIRE).contains(n))? as usize;
            let shape = argv.len() == 5 + n
                && score(argv[1])
                && score(argv[2])
                && argv[3] == NO_LEASE.to_string().as_bytes()
                && argv[5..].iter().all(|id| id.len() == ID_LEN);
            ok(keys_are(&[&z, &ch]) && shape && publish_ok(p, argv, env))?;
            [A::Key(0), A::Argv(0), A::Argv(1)].into_iter().chain(ids(5)).collect()
        }
        PReleaseOne { publish: p } => {
            let shape = argv.len() == 3 + has(p) && argv[1] == b"1" && score(argv[2]);
            ok(keys_are(&[&ch, &z]) && shape && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0)]
        }
        PReleaseMany { .. } => {
            let n = parse_i64(argv.first()?).filter(|n| *n >= 1)? as usize;
            let shape = argv.len() == 3 + n && score(argv[1]);
            ok(keys_are(&[&ch, &z]) && shape && publish_ok(Publish::Arg(3), argv, env))?;
            std::iter::once(A::Key(0)).chain(ids(3)).collect()
        }
        PAvailable { publish: p } | PAcquired { publish: p } => {
            ok(keys_are(&[&z, &ch]) && argv.len() == 1 + has(p) && score(argv[0]) && publish_ok(p, argv, env))?;
            vec![A::Key(0)]
        }
        PUpdateLease { publish: p } => {
            let shape = argv.len() == 3 + has(p) && score(argv[1]) && score(argv[2]);
            ok(keys_are(&[&z, &ch]) && shape && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0), A::Argv(1)]
        }
        PSetPermits { publish: p, .. } => {
            ok(keys_are(&[&ch, &z]) && argv.len() == 1 + has(p) && count(argv[0]) && publish_ok(p, argv, env))?;
            vec![A::Key(0), A::Argv(0)]
        }
    })
}

type Call = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The KEYS and ARGV Redisson sent, rebuilt from the native arguments (after the command
/// name) of a call [`plan`] made. `now` stands for the client's clock, which the native
/// arguments do not carry (the module uses the server's).
pub fn script_call(kind: SyncKind, native: &[&[u8]], env: Env, now: i64) -> Option<Call> {
    use SyncKind::*;
    let name = native.first()?.to_vec();
    let arg = |i: usize| native.get(i).map(|b| b.to_vec());
    let (ch, z, lch) = (semaphore_channel(&name), permit_timeouts(&name), latch_channel(&name));
    let pubcmd = env.publish_cmd().to_vec();
    let with_pub = |p: Publish, mut argv: Vec<Vec<u8>>| {
        if matches!(p, Publish::Arg(_)) {
            argv.push(pubcmd.clone());
        }
        argv
    };
    let now = now.to_string().into_bytes();
    let nl = NO_LEASE.to_string().into_bytes();
    let rest = |from: usize| native.iter().skip(from).map(|b| b.to_vec());
    Some(match kind {
        SemAcquire => (vec![name], vec![arg(1)?]),
        SemRelease { publish: p } | TrySet { publish: p, .. } | SemAdd { publish: p } => {
            (vec![name, ch], with_pub(p, vec![arg(1)?]))
        }
        SemDrain => (vec![name], vec![]),
        SemTrySetTtl => (vec![name, ch], vec![arg(1)?, pubcmd, arg(3)?]),
        CountDown { publish: p } => (vec![name, lch], with_pub(p, vec![b"0".to_vec()])),
        TrySetCount { publish: p } => (vec![name, lch], with_pub(p, vec![b"1".to_vec(), arg(1)?])),
        PAcquire { publish: p, ids: false } => {
            (vec![name, z, ch], with_pub(p, vec![arg(1)?, arg(2)?, arg(3)?, now, nl]))
        }
        PAcquire { ids: true, .. } => {
            let argv = [arg(1)?, arg(2)?, now, nl, pubcmd].into_iter().chain(rest(3)).collect();
            (vec![name, z, ch], argv)
        }
        PReleaseOne { publish: p } => (vec![name, ch, z], with_pub(p, vec![arg(1)?, b"1".to_vec(), now])),
        PReleaseMany { .. } => {
            let n = (native.len() - 1).to_string().into_bytes();
            (vec![name, ch, z], [n, now, pubcmd].into_iter().chain(rest(1)).collect())
        }
        PAvailable { publish: p } | PAcquired { publish: p } => (vec![name, z, ch], with_pub(p, vec![now])),
        PUpdateLease { publish: p } => (vec![name, z, ch], with_pub(p, vec![arg(1)?, arg(2)?, now])),
        PSetPermits { publish: p, .. } => (vec![name, ch, z], with_pub(p, vec![arg(1)?])),
    })
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
