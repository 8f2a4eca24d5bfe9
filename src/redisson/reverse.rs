//! The mapping back: the KEYS and ARGV a recognised call was made with, rebuilt from the
//! native command's arguments, for running the script itself (`exec::Outcome::Fallback`).

use super::rewrite::Env;
use super::table::{Kind, Publish};
use crate::core::lock::rwlock::Side;
use crate::core::names;

type Call = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The KEYS and ARGV Redisson sent, rebuilt from the native arguments (after the command
/// name) of a call [`plan`] made: what the module runs as the script itself when the native
/// command cannot answer exactly as the Lua would. `now` stands for the fair lock's
/// `currentTime`, which the native arguments do not carry (the module uses its own clock).
pub fn script_call(kind: Kind, native: &[&[u8]], env: Env, now: i64) -> Option<Call> {
    let now_ms = now;
    let v = |b: &[u8]| b.to_vec();
    let arg = |i: usize| native.get(i).map(|b| b.to_vec());
    let name = arg(0)?;
    let pubcmd = |p: Publish| match p {
        Publish::Fixed => None,
        Publish::Arg(_) => Some(v(env.publish_cmd())),
    };
    // An unlock's tail: the publish command when Redisson passes it, then with `latch` (native
    // `LATCH request latch_ms` after `at` positional arguments) the latch key and its TTL.
    let unlock = |mut keys: Vec<Vec<u8>>, mut argv: Vec<Vec<u8>>, p: Publish, latch: bool, at: usize| {
        argv.extend(pubcmd(p));
        if latch {
            keys.push(names::unlock_latch(&name, native.get(at + 1)?));
            argv.push(arg(at + 2)?);
        }
        Some((keys, argv))
    };
    let now = now.to_string().into_bytes();
    let call = match kind {
        Kind::LockAcquire | Kind::LockRenew { .. } => (vec![name.clone()], vec![arg(2)?, arg(1)?]),
        Kind::LockAcquireFenced { .. } => (vec![name.clone(), names::token(&name)], vec![arg(2)?, arg(1)?]),
        Kind::LockUnlock { publish, latch } => {
            let keys = vec![name.clone(), names::lock_channel(&name)];
            unlock(keys, vec![v(b"0"), arg(2)?, arg(1)?], publish, latch, 3)?
        }
        Kind::LockForceUnlock { publish } => {
            unlock(vec![name.clone(), names::lock_channel(&name)], vec![v(b"0")], publish, false, 0)?
        }
        Kind::RwRead => {
            let owner = arg(1)?;
            let keys = vec![name.clone(), names::read_timeout_prefix(&name, &owner)];
            (keys, vec![arg(2)?, owner.clone(), names::write_field(&owner)])
        }
        Kind::RwWrite => (vec![name.clone()], vec![arg(2)?, names::write_field(native.get(1)?)]),
        Kind::RwUnlockRead { publish, latch, .. } => {
            let owner = arg(1)?;
            let keys = vec![
                name.clone(),
                names::rwlock_channel(&name),
                names::read_timeout_prefix(&name, &owner),
                names::key_prefix(&name),
            ];
            unlock(keys, vec![v(b"0"), owner], publish, latch, 4)?
        }
        Kind::RwUnlockWrite { publish, latch, .. } => {
            let keys = vec![name.clone(), names::rwlock_channel(&name)];
            unlock(keys, vec![v(b"1"), arg(3)?, names::write_field(native.get(1)?)], publish, latch, 4)?
        }
        Kind::RwForceUnlock { side, publish } => {
            let argv = vec![v(if side == Side::Read { b"0" } else { b"1" })];
            unlock(vec![name.clone(), names::rwlock_channel(&name)], argv, publish, false, 0)?
        }
        Kind::RwRenewAll { .. } => (vec![name.clone(), names::key_prefix(&name)], vec![arg(2)?, arg(1)?]),
        Kind::RwRenewOwner => (vec![name.clone(), names::key_prefix(&name)], vec![arg(2)?, v(b"1"), arg(1)?]),
        Kind::FairAcquire(_) | Kind::FairTry { .. } => {
            let keys = vec![name.clone(), names::fair_queue(&name), names::fair_timeouts(&name)];
            let argv = if matches!(kind, Kind::FairTry { .. }) {
                vec![arg(2)?, arg(1)?, now, arg(3)?]
            } else {
                vec![arg(2)?, arg(1)?, arg(3)?, now]
            };
            (keys, argv)
        }
        Kind::FairUnlock { publish, latch, .. } => {
            let keys =
                vec![name.clone(), names::fair_queue(&name), names::fair_timeouts(&name), names::lock_channel(&name)];
            unlock(keys, vec![v(b"0"), arg(2)?, arg(1)?, now], publish, latch, 3)?
        }
        Kind::FairForceUnlock { publish, .. } => {
            let keys =
                vec![name.clone(), names::fair_queue(&name), names::fair_timeouts(&name), names::lock_channel(&name)];
            unlock(keys, vec![v(b"0"), now], publish, false, 0)?
        }
        Kind::FairCancel => (vec![names::fair_queue(&name), names::fair_timeouts(&name)], vec![arg(1)?, arg(2)?]),
        Kind::Sync(k) => super::sync::rewrite::script_call(k, native, env, now_ms)?,
        Kind::Rate(k) => super::rate::rewrite::script_call(k, native)?,
        Kind::Lua(_) => return None,
    };
    Some(call)
}
