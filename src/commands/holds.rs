//! `LOCK.HOLDS`, `FAIRLOCK.HOLDS`, `RWLOCK.HOLDS`: how many holds an owner has. Read-only and
//! O(1), so a client can settle a lost acquire or unlock reply by asking, on a replica too.
//! A hold whose grant's reply was dropped, waiting for writes to resume to be given back, is
//! not counted (`blocking::held_back`): the client was told it has no such hold.

use crate::blocking::held_back;
use crate::core::lock::holds;
use crate::core::{LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// The key and owner of a `*.HOLDS key owner` call.
fn key_owner<'a>(args: &'a Args, cmd: &'static str) -> std::result::Result<(&'a [u8], &'a [u8]), LockError> {
    if args.len() != 3 {
        return Err(LockError::WrongArity(cmd));
    }
    Ok((args.bytes(1), args.bytes(2)))
}

/// `LOCK.HOLDS key owner`
pub fn lock_holds(ctx: &Ctx, args: &Args) -> Result {
    let (key, owner) = key_owner(args, "lock.holds")?;
    let n = holds::holds(&mut RedisStore::new(ctx, args), key, owner)?;
    Ok(Reply::Int((n - held_back(ctx, key, owner).holds).max(0)))
}

/// `FAIRLOCK.HOLDS key owner`
pub fn fairlock_holds(ctx: &Ctx, args: &Args) -> Result {
    let (key, owner) = key_owner(args, "fairlock.holds")?;
    let n = holds::holds(&mut RedisStore::new(ctx, args), key, owner)?;
    Ok(Reply::Int((n - held_back(ctx, key, owner).holds).max(0)))
}

/// `RWLOCK.HOLDS key owner`
pub fn rwlock_holds(ctx: &Ctx, args: &Args) -> Result {
    let (key, owner) = key_owner(args, "rwlock.holds")?;
    let (reads, writes) = holds::rw_holds(&mut RedisStore::new(ctx, args), key, owner)?;
    let back = held_back(ctx, key, owner);
    Ok(Reply::Array(vec![Reply::Int((reads - back.reads).max(0)), Reply::Int((writes - back.writes).max(0))]))
}
