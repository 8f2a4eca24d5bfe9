//! `RWLOCK.*`: the read-write lock, layout- and reply-compatible with Redisson's
//! `RReadWriteLock`.

use super::{arity, parse_ms, parse_options, Accepts};
use crate::blocking::{self, Request};
use crate::core::lock::rwlock::{self, Side};
use crate::core::{LockError, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `READ` or `WRITE`, in any case.
fn parse_side(b: &[u8]) -> std::result::Result<Side, LockError> {
    if b.eq_ignore_ascii_case(b"READ") {
        Ok(Side::Read)
    } else if b.eq_ignore_ascii_case(b"WRITE") {
        Ok(Side::Write)
    } else {
        Err(LockError::Syntax)
    }
}

/// `RWLOCK.RLOCK key owner lease [BLOCK ms]`
pub fn rwlock_rlock(ctx: &Ctx, args: &Args) -> Result {
    acquire(ctx, args, "rwlock.rlock", Side::Read)
}

/// `RWLOCK.WLOCK key owner lease [BLOCK ms] [TOKEN]`
pub fn rwlock_wlock(ctx: &Ctx, args: &Args) -> Result {
    acquire(ctx, args, "rwlock.wlock", Side::Write)
}

fn acquire(ctx: &Ctx, args: &Args, cmd: &'static str, side: Side) -> Result {
    arity(args, 4, cmd)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", cmd)?;
    // Fencing guards a writer: a reader's token would fence nothing.
    let token = side == Side::Write;
    let opts = parse_options(args, 4, Accepts { block: true, token, ..Accepts::default() }, cmd)?;
    let req = match side {
        Side::Read => Request::Read { owner, lease },
        Side::Write => Request::Write { owner, lease, token: opts.token },
    };
    blocking::acquire(ctx, args, key, owner, req, opts.block)
}

/// `RWLOCK.UNLOCK key owner READ|WRITE lease [LATCH request_id latch_ms]`
pub fn rwlock_unlock(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "rwlock.unlock";
    arity(args, 5, CMD)?;
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let side = parse_side(args.bytes(3))?;
    let lease = parse_ms(args.bytes(4), "lease", CMD)?;
    let opts = parse_options(args, 5, Accepts { latch: true, ..Accepts::default() }, CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = rwlock::unlock(&mut store, key, owner, side, lease, opts.latch).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(_)) = reply {
        stats::RELEASED.inc();
    }
    blocking::serve_now(ctx);
    reply
}

/// `RWLOCK.RENEW key owner lease`
pub fn rwlock_renew(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "rwlock.renew";
    if args.len() != 4 {
        return Err(LockError::WrongArity(CMD));
    }
    let (key, owner) = (args.bytes(1), args.bytes(2));
    let lease = parse_ms(args.bytes(3), "lease", CMD)?;
    let mut store = RedisStore::new(ctx, args);
    let reply = rwlock::renew(&mut store, key, owner, lease).map_err(|e| e.in_command(CMD));
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::RENEWED.inc();
    }
    // A new lease moves the expiry that parked clients wait for.
    blocking::serve_now(ctx);
    reply
}

/// `RWLOCK.FORCEUNLOCK key READ|WRITE`
pub fn rwlock_forceunlock(ctx: &Ctx, args: &Args) -> Result {
    if args.len() != 3 {
        return Err(LockError::WrongArity("rwlock.forceunlock"));
    }
    let side = parse_side(args.bytes(2))?;
    let mut store = RedisStore::new(ctx, args);
    let reply = rwlock::force_unlock(&mut store, args.bytes(1), side);
    drop(store);
    if let Ok(Reply::Int(1)) = reply {
        stats::FORCED.inc();
    }
    blocking::serve_now(ctx);
    reply
}
