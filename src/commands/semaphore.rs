//! `SEMAPHORE.*`: the semaphore, layout- and reply-compatible with Redisson's `RSemaphore`
//! (`core::sync::semaphore`). Every change that adds permits serves the clients parked on it, in
//! arrival order, before the command returns.

use super::{arity, exact, parse_block, parse_count, parse_ms, write};
use crate::blocking::{self, Request};
use crate::core::sync::semaphore;
use crate::core::{parse_i64, LockError, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `SEMAPHORE.TRYSETPERMITS name permits [LEASE ms]`
pub fn semaphore_trysetpermits(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "semaphore.trysetpermits";
    arity(args, 3, CMD)?;
    let key = args.bytes(1);
    let permits = parse_count(args.bytes(2), "permits")?;
    let lease = match args.len() {
        3 => None,
        5 if args.bytes(3).eq_ignore_ascii_case(b"LEASE") => Some(parse_ms(args.bytes(4), "lease", CMD)?),
        _ => return Err(LockError::Syntax),
    };
    let set = write(ctx, args, CMD, |s| semaphore::try_set_permits(s, key, permits, lease))?;
    Ok(Reply::Int(i64::from(set)))
}

/// `SEMAPHORE.ACQUIRE name permits [BLOCK ms]`
pub fn semaphore_acquire(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "semaphore.acquire";
    arity(args, 3, CMD)?;
    let permits = parse_count(args.bytes(2), "permits")?;
    let block = parse_block(args, 3, CMD)?;
    stats::SYNC_CALLS.inc();
    blocking::acquire_sync(ctx, args, args.bytes(1), Request::Semaphore { permits }, block)
}

/// `SEMAPHORE.RELEASE name permits`
pub fn semaphore_release(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "semaphore.release";
    exact(args, 3, CMD)?;
    let key = args.bytes(1);
    let permits = parse_count(args.bytes(2), "permits")?;
    write(ctx, args, CMD, |s| semaphore::release(s, key, permits)).map(Reply::Int)
}

/// `SEMAPHORE.ADDPERMITS name delta`
pub fn semaphore_addpermits(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "semaphore.addpermits";
    exact(args, 3, CMD)?;
    let key = args.bytes(1);
    let delta = parse_i64(args.bytes(2)).ok_or(LockError::NotInteger)?;
    write(ctx, args, CMD, |s| semaphore::add_permits(s, key, delta)).map(Reply::Int)
}

/// `SEMAPHORE.DRAIN name`
pub fn semaphore_drain(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "semaphore.drain";
    exact(args, 2, CMD)?;
    let key = args.bytes(1);
    write(ctx, args, CMD, |s| semaphore::drain(s, key)).map(Reply::Int)
}

/// `SEMAPHORE.AVAILABLE name`
pub fn semaphore_available(ctx: &Ctx, args: &Args) -> Result {
    exact(args, 2, "semaphore.available")?;
    stats::SYNC_CALLS.inc();
    semaphore::available(&mut RedisStore::reader(ctx, args), args.bytes(1)).map(Reply::Int)
}
