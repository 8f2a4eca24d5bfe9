//! `LOCK.HOLDS`, `FAIRLOCK.HOLDS`, `RWLOCK.HOLDS`: how many holds an owner has. Read-only and
//! O(1), so a client can settle a lost acquire or unlock reply by asking, on a replica too.

use crate::core::{holds, LockError, Reply};
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
    holds::holds(&mut RedisStore::new(ctx, args), key, owner).map(Reply::Int)
}

/// `FAIRLOCK.HOLDS key owner`
pub fn fairlock_holds(ctx: &Ctx, args: &Args) -> Result {
    let (key, owner) = key_owner(args, "fairlock.holds")?;
    holds::holds(&mut RedisStore::new(ctx, args), key, owner).map(Reply::Int)
}

/// `RWLOCK.HOLDS key owner`
pub fn rwlock_holds(ctx: &Ctx, args: &Args) -> Result {
    let (key, owner) = key_owner(args, "rwlock.holds")?;
    let (reads, writes) = holds::rw_holds(&mut RedisStore::new(ctx, args), key, owner)?;
    Ok(Reply::Array(vec![Reply::Int(reads), Reply::Int(writes)]))
}
