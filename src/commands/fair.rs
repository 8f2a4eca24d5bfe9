//! `FAIRLOCK.*`: the fair lock, layout- and reply-compatible with Redisson's `RedissonFairLock`.

use super::{arity, parse_ms, parse_options, Accepts};
use crate::blocking::{self, Request};
use crate::core::lock::fair;
use crate::core::{LockError, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `FAIRLOCK.ACQUIRE key owner lease wait [NOQUEUE] [BLOCK ms] [TOKEN]`
pub fn fairlock_acquire(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "fairlock.acquire";
    arity(args, 5, CMD)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let wait = parse_ms(args.bytes(4), "wait", CMD)?;
    let opts = parse_options(args, 5, Accepts { block: true, noqueue: true, token: true, ..Accepts::default() }, CMD)?;
    // A parked waiter is served from its queue place: it cannot wait without one.
    if opts.noqueue && opts.block.is_some() {
        return Err(LockError::Syntax);
    }
    let req = Request::Fair { owner, lease, wait, noqueue: opts.noqueue, token: opts.token };
    blocking::acquire(ctx, args, key, owner, req, opts.block)
}

/// `FAIRLOCK.UNLOCK key owner lease [LATCH request_id latch_ms]`
pub fn fairlock_unlock(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "fairlock.unlock";
    arity(args, 4, CMD)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let opts = parse_options(args, 4, Accepts { latch: true, ..Accepts::default() }, CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = fair::unlock(&mut store, key, owner, lease, opts.latch).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(_)) = reply {
        stats::RELEASED.inc();
    }
    blocking::serve_now(ctx);
    reply
}

/// `FAIRLOCK.CANCEL key owner wait`
pub fn fairlock_cancel(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "fairlock.cancel";
    if args.len() != 4 {
        return Err(LockError::WrongArity(CMD));
    }
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let wait = parse_ms(args.bytes(3), "wait", CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = fair::cancel(&mut store, key, owner, wait);
    drop(store);
    // The waiter behind may now be first in line for a free lock.
    blocking::serve_now(ctx);
    reply
}

/// `FAIRLOCK.RENEW key owner lease`
pub fn fairlock_renew(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "fairlock.renew";
    if args.len() != 4 {
        return Err(LockError::WrongArity(CMD));
    }
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = fair::renew(&mut store, key, owner, lease).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::RENEWED.inc();
    }
    // A new lease moves the expiry that parked clients wait for.
    blocking::serve_now(ctx);
    reply
}

/// `FAIRLOCK.FORCEUNLOCK key`
pub fn fairlock_forceunlock(ctx: &Ctx, args: &Args) -> Result {
    if args.len() != 2 {
        return Err(LockError::WrongArity("fairlock.forceunlock"));
    }
    let mut store = RedisStore::new(ctx, args);
    let reply = fair::force_unlock(&mut store, args.bytes(1));
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::FORCED.inc();
    }
    blocking::serve_now(ctx);
    reply
}
