//! `LOCK.*`: the reentrant lock, layout- and reply-compatible with Redisson's `RLock`.

use super::{arity, parse_ms, parse_options, Accepts};
use crate::blocking::{self, Request};
use crate::core::lock::reentrant;
use crate::core::{LockError, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `LOCK.ACQUIRE key owner lease [BLOCK ms] [TOKEN]`
pub fn lock_acquire(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "lock.acquire";
    arity(args, 4, CMD)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let opts = parse_options(args, 4, Accepts { block: true, token: true, ..Accepts::default() }, CMD)?;
    let req = Request::Lock { owner, lease, token: opts.token };
    blocking::acquire(ctx, args, key, owner, req, opts.block)
}

/// `LOCK.UNLOCK key owner lease [LATCH request_id latch_ms]`
pub fn lock_unlock(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "lock.unlock";
    arity(args, 4, CMD)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let opts = parse_options(args, 4, Accepts { latch: true, ..Accepts::default() }, CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = reentrant::unlock(&mut store, key, owner, lease, opts.latch).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(_)) = reply {
        stats::RELEASED.inc();
    }
    blocking::serve_now(ctx);
    reply
}

/// `LOCK.RENEW key owner lease`
pub fn lock_renew(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "lock.renew";
    if args.len() != 4 {
        return Err(LockError::WrongArity(CMD));
    }
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = reentrant::renew(&mut store, key, owner, lease).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::RENEWED.inc();
    }
    // A new lease moves the expiry that parked clients wait for.
    blocking::serve_now(ctx);
    reply
}

/// `LOCK.FORCEUNLOCK key`
pub fn lock_forceunlock(ctx: &Ctx, args: &Args) -> Result {
    if args.len() != 2 {
        return Err(LockError::WrongArity("lock.forceunlock"));
    }
    let mut store = RedisStore::new(ctx, args);
    let reply = reentrant::force_unlock(&mut store, args.bytes(1));
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::FORCED.inc();
    }
    blocking::serve_now(ctx);
    reply
}
