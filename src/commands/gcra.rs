//! `GCRA` and `CL.THROTTLE`: rate limiting on one string key, the theoretical arrival time
//! (`core::rate::gcra`). `GCRA` stands in for Redis' own command of that name where the server has
//! none (Redisson's `RGcra` calls it); `CL.THROTTLE` for redis-cell's, with its replies.

use crate::blocking;
use crate::core::rate::gcra::{request, Cell, Gcra, Limiter};
use crate::core::{parse_i64, LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// `GCRA key max_burst tokens_per_period period [TOKENS n]`
pub fn gcra(ctx: &Ctx, args: &Args) -> Result {
    // Redis' order: the count first, then each argument in turn, `TOKENS` last.
    if !(5..=7).contains(&args.len()) {
        return Err(LockError::WrongArity("gcra"));
    }
    let limit = Gcra::max_burst(args.bytes(2))?;
    let tokens_per_period = Gcra::count(args.bytes(3))?;
    let period = Gcra::period(args.double(4))?;
    let tokens = if args.len() == 5 {
        1
    } else if !args.bytes(5).eq_ignore_ascii_case(b"TOKENS") {
        return Err(LockError::Syntax);
    } else if args.len() == 6 {
        return Err(LockError::Invalid("Missing TOKENS value"));
    } else {
        Gcra::count(args.bytes(6))?
    };
    run(ctx, args, &Gcra { limit, tokens_per_period, period, tokens })
}

/// `CL.THROTTLE key max_burst count period [quantity]`
pub fn cl_throttle(ctx: &Ctx, args: &Args) -> Result {
    if !(5..=6).contains(&args.len()) {
        return Err(LockError::WrongArity("cl.throttle"));
    }
    let int = |i: usize| parse_i64(args.bytes(i)).ok_or(LockError::NotInteger);
    let (max_burst, count, period) = (int(2)?, int(3)?, int(4)?);
    let quantity = if args.len() == 6 { int(5)? } else { 1 };
    run(ctx, args, &Cell::new(max_burst, count, period, quantity)?)
}

/// Runs one request on the key (argument 1) and replies the verdict's five integers.
fn run<L: Limiter>(ctx: &Ctx, args: &Args, limiter: &L) -> Result {
    let mut store = RedisStore::new(ctx, args);
    let verdict = request(&mut store, args.bytes(1), limiter)?;
    drop(store);
    // A write may replace a lock's key (any type): whoever was parked on it is served.
    if verdict.tat.is_some() {
        blocking::serve_now(ctx);
    }
    Ok(verdict.reply())
}
