//! `COUNTDOWN.*`: the count-down latch, layout- and reply-compatible with Redisson's
//! `RCountDownLatch` (`core::sync::countdown`). Every client parked in `COUNTDOWN.AWAIT` is
//! answered when the latch opens.

use super::{arity, exact, parse_block, parse_count, write};
use crate::blocking::{self, Request};
use crate::core::sync::countdown;
use crate::core::{LockError, Reply};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `COUNTDOWN.TRYSETCOUNT name count`
pub fn countdown_trysetcount(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "countdown.trysetcount";
    exact(args, 3, CMD)?;
    let key = args.bytes(1);
    let count = parse_count(args.bytes(2), "count")?;
    let set = write(ctx, args, CMD, |s| countdown::try_set_count(s, key, count))?;
    Ok(Reply::Int(i64::from(set)))
}

/// `COUNTDOWN.DECR name`
pub fn countdown_decr(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "countdown.decr";
    exact(args, 2, CMD)?;
    let key = args.bytes(1);
    write(ctx, args, CMD, |s| countdown::count_down(s, key)).map(|c| Reply::Int(c.left()))
}

/// `COUNTDOWN.COUNT name`
pub fn countdown_count(ctx: &Ctx, args: &Args) -> Result {
    exact(args, 2, "countdown.count")?;
    stats::SYNC_CALLS.inc();
    countdown::count(&mut RedisStore::reader(ctx, args), args.bytes(1)).map(Reply::Int)
}

/// `COUNTDOWN.AWAIT name [BLOCK ms]`
pub fn countdown_await(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "countdown.await";
    arity(args, 2, CMD)?;
    let block = parse_block(args, 2, CMD)?;
    stats::SYNC_CALLS.inc();
    blocking::acquire_sync(ctx, args, args.bytes(1), Request::Latch, block)
}
