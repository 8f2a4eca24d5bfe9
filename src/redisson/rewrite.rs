//! The argument mapping, pure: a recognised script's KEYS/ARGV to the native command's
//! arguments ([`plan`]; `super::reverse` maps them back, for running the Lua itself).
//!
//! [`plan`] accepts a call only when every key and channel Redisson passed is exactly the one
//! the module derives from the lock name (so a `NameMapper`, a custom channel or a key prefix
//! leave the call to Lua), every time is a positive integer the native parser takes, the unlock
//! message is the one the module publishes, and the publish command is the way the module
//! publishes (`lockmod.pubsub`). Anything else: `None`, and the script runs as sent.

pub use super::native::{Env, Native, A, MAX_MS};
use super::table::{Kind, Publish};
use crate::core::lock::rwlock::Side;
use crate::core::names;
use crate::core::parse_i64;

/// The native command the scripts of a kind become (`None`: left to Lua).
pub fn native_of(kind: Kind) -> Option<Native> {
    Some(match kind {
        Kind::LockAcquire | Kind::LockAcquireFenced { .. } => Native::LockAcquire,
        Kind::LockUnlock { .. } => Native::LockUnlock,
        Kind::LockRenew { .. } => Native::LockRenew,
        Kind::LockForceUnlock { .. } => Native::LockForceUnlock,
        Kind::RwRead => Native::RwRlock,
        Kind::RwWrite => Native::RwWlock,
        Kind::RwUnlockRead { .. } | Kind::RwUnlockWrite { .. } => Native::RwUnlock,
        Kind::RwRenewAll { .. } | Kind::RwRenewOwner => Native::RwRenew,
        Kind::RwForceUnlock { .. } => Native::RwForceUnlock,
        Kind::FairAcquire(_) | Kind::FairTry { .. } => Native::FairAcquire,
        Kind::FairUnlock { .. } => Native::FairUnlock,
        Kind::FairCancel => Native::FairCancel,
        Kind::FairForceUnlock { .. } => Native::FairForceUnlock,
        Kind::Sync(k) => super::sync::rewrite::native(k),
        Kind::Rate(k) => super::rate::rewrite::native(k),
        Kind::Lua(_) => return None,
    })
}

/// Whether a call of `kind` can run natively on this server at all (`RGcra`'s bodies need
/// the module's own `GCRA`).
pub fn runs_here(kind: Kind) -> bool {
    match kind {
        Kind::Rate(k) => super::rate::rewrite::runs_here(k),
        _ => true,
    }
}

/// What a recognised call becomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub native: Native,
    pub args: Vec<A>,
}

/// A time the native command parses exactly as Redis' `PEXPIRE`/`SET PX` does.
fn ms(b: &[u8]) -> bool {
    parse_i64(b).is_some_and(|v| (1..=MAX_MS).contains(&v))
}

/// The part of a key Redis Cluster hashes: the first non-empty `{...}`, or the whole key.
pub fn slot_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// Every key hashes like the lock name: otherwise the Lua gets `CROSSSLOT` in a cluster.
fn same_slot(name: &[u8], keys: &[&[u8]]) -> bool {
    let part = slot_part(name);
    keys.iter().all(|k| slot_part(k) == part)
}

/// The script publishes the way the module does. A command passed as an argument is compared
/// without regard to case, as Lua's `redis.call` looks it up: Redisson sends `PUBLISH`, ports
/// of it that reuse its scripts may send `publish`.
fn publish_ok(p: Publish, argv: &[&[u8]], env: Env) -> bool {
    match p {
        Publish::Fixed => !env.sharded,
        Publish::Arg(i) => argv.get(i - 1).is_some_and(|c| c.eq_ignore_ascii_case(env.publish_cmd())),
    }
}

/// ARGV's length for a script with these optional trailing parts.
fn argc(base: usize, publish: Publish, latch: bool) -> usize {
    base + usize::from(matches!(publish, Publish::Arg(_))) + usize::from(latch)
}

/// The request id of a latch key `redisson_unlock_latch:{name}:<id>`.
fn latch_request(name: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let prefix = names::unlock_latch(name, b"");
    key.strip_prefix(prefix.as_slice()).map(|r| r.to_vec())
}

/// `owner` from `owner:write`.
fn writer(field: &[u8]) -> Option<Vec<u8>> {
    field.strip_suffix(b":write").filter(|o| *o != b"mode").map(|o| o.to_vec())
}

/// The lock name behind a fair queue key, as the module would name it: `x` for
/// `redisson_lock_queue:{x}`, or the rest when it has its own tag.
fn fair_name(queue: &[u8]) -> Option<Vec<u8>> {
    let rest = queue.strip_prefix(b"redisson_lock_queue:")?;
    let inner = rest.strip_prefix(b"{").and_then(|r| r.strip_suffix(b"}"));
    let name = match inner {
        Some(i) if !i.contains(&b'{') && !i.contains(&b'}') => i,
        _ if rest.contains(&b'{') => rest,
        _ => return None,
    };
    (names::fair_queue(name) == queue).then(|| name.to_vec())
}

fn lit_side(side: Side) -> A {
    A::Lit(match side {
        Side::Read => b"READ",
        Side::Write => b"WRITE",
    })
}

/// The latch arguments, after checking `KEYS[k]` is this lock's latch key.
fn latch_args(name: &[u8], keys: &[&[u8]], k: usize, ms_arg: usize, argv: &[&[u8]]) -> Option<Vec<A>> {
    let req = latch_request(name, keys.get(k)?)?;
    ms(argv.get(ms_arg)?).then(|| vec![A::Lit(b"LATCH"), A::Own(req), A::Argv(ms_arg)])
}

/// The native form of a call of a recognised script, or `None` to leave it to Lua.
pub fn plan(kind: Kind, keys: &[&[u8]], argv: &[&[u8]], env: Env) -> Option<Plan> {
    let native = native_of(kind)?;
    let name = *keys.first()?;
    // A synchronizer body's KEYS hold its channel: outside a cluster it may hash anywhere
    // (the latch's channel is always braced, so a name with its own tag moves it).
    if (env.cluster || !matches!(kind, Kind::Sync(_))) && !same_slot(name, keys) {
        return None;
    }
    let n =
        |want: &[Vec<u8>]| keys.len() == want.len() + 1 && keys[1..].iter().zip(want).all(|(k, w)| *k == w.as_slice());
    let args = match kind {
        Kind::LockAcquire | Kind::LockRenew { .. } => {
            (keys.len() == 1 && argv.len() == 2 && ms(argv[0])).then_some(())?;
            vec![A::Key(0), A::Argv(1), A::Argv(0)]
        }
        Kind::LockAcquireFenced { .. } => {
            (n(&[names::token(name)]) && argv.len() == 2 && ms(argv[0])).then_some(())?;
            vec![A::Key(0), A::Argv(1), A::Argv(0), A::Lit(b"TOKEN")]
        }
        Kind::LockUnlock { publish, latch } => {
            let ok = argv.len() == argc(3, publish, latch)
                && argv[0] == b"0"
                && ms(argv[1])
                && publish_ok(publish, argv, env)
                && keys.len() == 2 + usize::from(latch)
                && keys[1] == names::lock_channel(name);
            ok.then_some(())?;
            let mut a = vec![A::Key(0), A::Argv(2), A::Argv(1)];
            if latch {
                a.extend(latch_args(name, keys, 2, 4, argv)?);
            }
            a
        }
        Kind::LockForceUnlock { publish } => {
            let ok = argv.len() == argc(1, publish, false)
                && argv[0] == b"0"
                && publish_ok(publish, argv, env)
                && n(&[names::lock_channel(name)]);
            ok.then_some(())?;
            vec![A::Key(0)]
        }
        Kind::RwRead => {
            let ok = argv.len() == 3
                && ms(argv[0])
                && argv[1] != b"mode"
                && argv[2] == names::write_field(argv[1])
                && n(&[names::read_timeout_prefix(name, argv[1])]);
            ok.then_some(())?;
            vec![A::Key(0), A::Argv(1), A::Argv(0)]
        }
        Kind::RwWrite => {
            (keys.len() == 1 && argv.len() == 2 && ms(argv[0])).then_some(())?;
            vec![A::Key(0), A::Own(writer(argv[1])?), A::Argv(0)]
        }
        Kind::RwUnlockRead { publish, latch, .. } => {
            let ok = argv.len() == argc(2, publish, latch)
                && argv[0] == b"0"
                && argv[1] != b"mode"
                && publish_ok(publish, argv, env)
                && keys.len() == 4 + usize::from(latch)
                && keys[1] == names::rwlock_channel(name)
                && keys[2] == names::read_timeout_prefix(name, argv[1])
                && keys[3] == names::key_prefix(name);
            ok.then_some(())?;
            // The read unlock takes no lease; the native parser wants one and ignores it.
            let mut a = vec![A::Key(0), A::Argv(1), A::Lit(b"READ"), A::Lit(b"1")];
            if latch {
                a.extend(latch_args(name, keys, 4, 3, argv)?);
            }
            a
        }
        Kind::RwUnlockWrite { publish, latch, .. } => {
            let ok = argv.len() == argc(3, publish, latch)
                && argv[0] == b"1"
                && ms(argv[1])
                && publish_ok(publish, argv, env)
                && keys.len() == 2 + usize::from(latch)
                && keys[1] == names::rwlock_channel(name);
            ok.then_some(())?;
            let mut a = vec![A::Key(0), A::Own(writer(argv[2])?), A::Lit(b"WRITE"), A::Argv(1)];
            if latch {
                a.extend(latch_args(name, keys, 2, 4, argv)?);
            }
            a
        }
        Kind::RwForceUnlock { side, publish } => {
            let message: &[u8] = if side == Side::Read { b"0" } else { b"1" };
            let ok = argv.len() == argc(1, publish, false)
                && argv[0] == message
                && publish_ok(publish, argv, env)
                && n(&[names::rwlock_channel(name)]);
            ok.then_some(())?;
            vec![A::Key(0), lit_side(side)]
        }
        Kind::RwRenewAll { .. } => {
            let ok = argv.len() == 2 && ms(argv[0]) && argv[1] != b"mode" && n(&[names::key_prefix(name)]);
            ok.then_some(())?;
            vec![A::Key(0), A::Argv(1), A::Argv(0)]
        }
        Kind::RwRenewOwner => {
            let ok = argv.len() == 3
                && ms(argv[0])
                && argv[1] == b"1"
                && argv[2] != b"mode"
                && n(&[names::key_prefix(name)]);
            ok.then_some(())?;
            vec![A::Key(0), A::Argv(2), A::Argv(0)]
        }
        Kind::FairAcquire(_) | Kind::FairTry { .. } => {
            let (wait, now) = if matches!(kind, Kind::FairTry { .. }) { (3, 2) } else { (2, 3) };
            let ok = argv.len() == 4
                && ms(argv[0])
                && ms(argv[wait])
                && parse_i64(argv[now]).is_some()
                && n(&[names::fair_queue(name), names::fair_timeouts(name)]);
            ok.then_some(())?;
            let mut a = vec![A::Key(0), A::Argv(1), A::Argv(0), A::Argv(wait)];
            if matches!(kind, Kind::FairTry { .. }) {
                a.push(A::Lit(b"NOQUEUE"));
            }
            a
        }
        Kind::FairUnlock { publish, latch, .. } => {
            let ok = argv.len() == argc(4, publish, latch)
                && argv[0] == b"0"
                && ms(argv[1])
                && parse_i64(argv[3]).is_some()
                && publish_ok(publish, argv, env)
                && keys.len() == 4 + usize::from(latch)
                && keys[1] == names::fair_queue(name)
                && keys[2] == names::fair_timeouts(name)
                && keys[3] == names::lock_channel(name);
            ok.then_some(())?;
            let mut a = vec![A::Key(0), A::Argv(2), A::Argv(1)];
            if latch {
                a.extend(latch_args(name, keys, 4, 5, argv)?);
            }
            a
        }
        Kind::FairForceUnlock { publish, .. } => {
            let ok = argv.len() == argc(2, publish, false)
                && argv[0] == b"0"
                && parse_i64(argv[1]).is_some()
                && publish_ok(publish, argv, env)
                && n(&[names::fair_queue(name), names::fair_timeouts(name), names::lock_channel(name)]);
            ok.then_some(())?;
            vec![A::Key(0)]
        }
        Kind::FairCancel => {
            let lock = fair_name(name)?;
            let ok = keys.len() == 2 && keys[1] == names::fair_timeouts(&lock) && argv.len() == 2 && ms(argv[1]);
            ok.then_some(())?;
            vec![A::Own(lock), A::Argv(0), A::Argv(1)]
        }
        Kind::Sync(k) => super::sync::rewrite::plan(k, keys, argv, env)?,
        Kind::Rate(k) => super::rate::rewrite::plan(k, keys, argv)?,
        Kind::Lua(_) => return None,
    };
    Some(Plan { native, args })
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
