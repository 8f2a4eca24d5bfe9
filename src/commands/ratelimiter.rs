//! `RATELIMITER.*`: Redisson's `RRateLimiter` on its own keys (`core::rate::limiter`). Every
//! change that gives permits back serves the clients parked on the state before the command
//! returns; the window's clock is the server's unless `NOW` gives it.

use super::{arity, parse_block_ms_at, parse_ms, write_as};
use crate::blocking::{self, Request};
use crate::core::rate::limiter::{self, Mode, Settings};
use crate::core::{parse_i64, LockError, Reply, Store};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// The largest `NOW`: a score (a double) holds every ms up to it exactly.
const MAX_NOW: i64 = 1 << 53;

/// What each command accepts after its positional arguments.
#[derive(Clone, Copy, Default)]
struct Accepts {
    client: bool,
    now: bool,
    block: bool,
    keep_alive: bool,
    /// `KEEPSTATE`, `XX` (`SETRATE`).
    set_only: bool,
}

/// The options, in any order, each at most once.
#[derive(Default)]
struct Options<'a> {
    client: Option<&'a [u8]>,
    now: Option<i64>,
    block: Option<i64>,
    keep_alive: Option<i64>,
    keep_state: bool,
    xx: bool,
}

fn parse_now(b: &[u8]) -> crate::core::Result<i64> {
    let v = parse_i64(b).ok_or(LockError::NotInteger)?;
    if !(0..=MAX_NOW).contains(&v) {
        return Err(LockError::NowRange);
    }
    Ok(v)
}

fn parse_options<'a>(
    args: &Args<'a>,
    from: usize,
    accepts: Accepts,
    cmd: &'static str,
) -> crate::core::Result<Options<'a>> {
    let mut o = Options::default();
    let mut i = from;
    while i < args.len() {
        let word = args.bytes(i);
        let value = (i + 1 < args.len()).then(|| args.bytes(i + 1));
        let is = |w: &[u8]| word.eq_ignore_ascii_case(w);
        match value {
            Some(v) if accepts.client && is(b"CLIENT") && o.client.is_none() => o.client = Some(v),
            Some(v) if accepts.now && is(b"NOW") && o.now.is_none() => o.now = Some(parse_now(v)?),
            Some(v) if accepts.block && is(b"BLOCK") && o.block.is_none() => {
                o.block = Some(parse_block_ms_at(v, cmd, Ctx::cached_ms())?);
            }
            Some(v) if accepts.keep_alive && is(b"KEEPALIVE") && o.keep_alive.is_none() => {
                o.keep_alive = Some(parse_ms(v, "keepalive", cmd)?);
            }
            _ if accepts.set_only && is(b"KEEPSTATE") && !o.keep_state => {
                o.keep_state = true;
                i += 1;
                continue;
            }
            _ if accepts.set_only && is(b"XX") && !o.xx => {
                o.xx = true;
                i += 1;
                continue;
            }
            _ => return Err(LockError::Syntax),
        }
        i += 2;
    }
    if o.now.is_some() && o.block.is_some() {
        return Err(LockError::NowWithBlock);
    }
    Ok(o)
}

/// `name OVERALL|PER_CLIENT rate interval_ms` and the options after them.
fn parse_settings<'a>(
    args: &Args<'a>,
    accepts: Accepts,
    cmd: &'static str,
) -> crate::core::Result<(Settings, Options<'a>)> {
    arity(args, 5, cmd)?;
    let mode = match args.bytes(2) {
        w if w.eq_ignore_ascii_case(b"OVERALL") => Mode::Overall,
        w if w.eq_ignore_ascii_case(b"PER_CLIENT") => Mode::PerClient,
        _ => return Err(LockError::Syntax),
    };
    let rate = parse_i64(args.bytes(3)).ok_or(LockError::NotInteger)?;
    if rate <= 0 {
        return Err(LockError::NotPositive("rate"));
    }
    let interval = parse_ms(args.bytes(4), "interval", cmd)?;
    let o = parse_options(args, 5, Accepts { keep_alive: true, ..accepts }, cmd)?;
    let keep_alive = o.keep_alive.unwrap_or(0);
    if keep_alive != 0 && keep_alive < interval {
        return Err(LockError::KeepAliveShort);
    }
    Ok((Settings { mode, rate, interval, keep_alive }, o))
}

/// Runs a rate limiter write on the command's store, then serves its parked clients.
fn write<T>(
    ctx: &Ctx,
    args: &Args,
    cmd: &'static str,
    f: impl FnOnce(&mut RedisStore) -> crate::core::Result<T>,
) -> crate::core::Result<T> {
    write_as(ctx, args, cmd, &stats::RATE_CALLS, f)
}

/// `RATELIMITER.TRYSETRATE name OVERALL|PER_CLIENT rate interval_ms [KEEPALIVE ms]`
pub fn ratelimiter_trysetrate(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "ratelimiter.trysetrate";
    let (set, _) = parse_settings(args, Accepts::default(), CMD)?;
    let name = args.bytes(1);
    write(ctx, args, CMD, |s| limiter::try_set_rate(s, name, &set)).map(|b| Reply::Int(i64::from(b)))
}

/// `RATELIMITER.SETRATE name OVERALL|PER_CLIENT rate interval_ms [KEEPALIVE ms] [KEEPSTATE]
/// [XX] [CLIENT id] [NOW ms]`
pub fn ratelimiter_setrate(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "ratelimiter.setrate";
    let (set, o) =
        parse_settings(args, Accepts { client: true, now: true, set_only: true, ..Accepts::default() }, CMD)?;
    let name = args.bytes(1);
    let done = write(ctx, args, CMD, |s| {
        let now = o.now.unwrap_or_else(|| s.now());
        limiter::set_rate(s, name, &set, o.client, o.keep_state, o.xx, now)
    })?;
    Ok(Reply::Int(i64::from(done)))
}

/// A permit count argument: 1 to 2^32-1.
fn parse_permits(b: &[u8]) -> crate::core::Result<i64> {
    let n = parse_i64(b).ok_or(LockError::NotInteger)?;
    limiter::check_permits(n)?;
    Ok(n)
}

/// `RATELIMITER.ACQUIRE name permits [CLIENT id] [NOW ms] [BLOCK ms]`
pub fn ratelimiter_acquire(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "ratelimiter.acquire";
    arity(args, 3, CMD)?;
    let name = args.bytes(1);
    let permits = parse_permits(args.bytes(2))?;
    let o = parse_options(args, 3, Accepts { client: true, now: true, block: true, ..Accepts::default() }, CMD)?;
    stats::RATE_CALLS.inc();
    // The FIFO a client parks in is its state's (the value key): read only when it may park,
    // or someone is parked already and may be ahead of it.
    let key = if o.block.is_some() || blocking::any_parked() {
        limiter::state_key(&mut RedisStore::reader(ctx, args), name, o.client).map_err(|e| e.in_command(CMD))?
    } else {
        name.to_vec()
    };
    let req = Request::RateLimit { name, client: o.client, permits, now: o.now };
    blocking::acquire_sync(ctx, args, &key, req, o.block)
}

/// `RATELIMITER.AVAILABLE name [CLIENT id] [NOW ms]`
pub fn ratelimiter_available(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "ratelimiter.available";
    arity(args, 2, CMD)?;
    let name = args.bytes(1);
    let o = parse_options(args, 2, Accepts { client: true, now: true, ..Accepts::default() }, CMD)?;
    write(ctx, args, CMD, |s| {
        let now = o.now.unwrap_or_else(|| s.now());
        limiter::available(s, name, o.client, now)
    })
    .map(Reply::Int)
}

/// `RATELIMITER.RELEASE name permits [CLIENT id] [NOW ms]`
pub fn ratelimiter_release(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "ratelimiter.release";
    arity(args, 3, CMD)?;
    let name = args.bytes(1);
    let permits = parse_permits(args.bytes(2))?;
    let o = parse_options(args, 3, Accepts { client: true, now: true, ..Accepts::default() }, CMD)?;
    write(ctx, args, CMD, |s| {
        let now = o.now.unwrap_or_else(|| s.now());
        limiter::release(s, name, o.client, permits, now)
    })
    .map(Reply::Int)
}
