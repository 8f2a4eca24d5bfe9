//! The command layer: parse arguments, run the lock algorithm on the Redis store, reply.
//!
//! Every argument is parsed before the keyspace is touched, so bad input changes nothing.
//!
//! May import: blocking, effects, acl, ffi, core. Imported by server (the command table).

pub mod contended;
pub mod countdown;
pub mod fair;
pub mod gcra;
pub mod holds;
pub mod info;
pub mod lock;
pub mod psemaphore;
pub mod ratelimiter;
pub mod rwlock;
pub mod semaphore;

use crate::blocking;
use crate::core::lock::latch::Latch;
use crate::core::{deadline, LockError, Result};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// Parses a positive time in ms (a lease, a wait, a latch lifetime) of command `cmd`: its
/// deadline from now must be a valid expiry time ([`deadline`]), as Redis' `SET ... PX` rule.
pub fn parse_ms(b: &[u8], what: &'static str, cmd: &'static str) -> Result<i64> {
    match crate::core::parse_i64(b) {
        // The clock is read only for a time that could overflow a deadline: the server's clock
        // is far below 2^62 ms, so a smaller positive time always makes a valid one.
        Some(v) if v > 0 && v < SAFE_MS => Ok(v),
        _ => parse_ms_at(b, what, cmd, Ctx::cached_ms()),
    }
}

/// Times below this give a valid deadline from any clock reading before the year 146 million.
const SAFE_MS: i64 = 1 << 62;

/// [`parse_ms`] at `now` (the clock the command's store reads).
fn parse_ms_at(b: &[u8], what: &'static str, cmd: &'static str, now: i64) -> Result<i64> {
    let v = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
    if v <= 0 {
        return Err(LockError::NotPositive(what));
    }
    deadline(now, v).map_err(|e| e.in_command(cmd))?;
    Ok(v)
}

/// Parses a non-negative time in ms (`BLOCK 0` waits forever); a limit must end at a valid
/// expiry time, as every other time argument.
fn parse_block_ms_at(b: &[u8], cmd: &'static str, now: i64) -> Result<i64> {
    let v = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
    if v < 0 {
        return Err(LockError::NegativeTimeout);
    }
    if v > 0 {
        deadline(now, v).map_err(|e| e.in_command(cmd))?;
    }
    Ok(v)
}

/// Runs a synchronizer's write on the command's store, then serves its parked clients.
pub fn write<T>(
    ctx: &Ctx,
    args: &Args,
    cmd: &'static str,
    f: impl FnOnce(&mut RedisStore) -> crate::core::Result<T>,
) -> crate::core::Result<T> {
    write_as(ctx, args, cmd, &stats::SYNC_CALLS, f)
}

/// [`write`], counted in `calls`.
pub fn write_as<T>(
    ctx: &Ctx,
    args: &Args,
    cmd: &'static str,
    calls: &stats::Counter,
    f: impl FnOnce(&mut RedisStore) -> crate::core::Result<T>,
) -> crate::core::Result<T> {
    calls.inc();
    let mut store = RedisStore::new(ctx, args);
    let out = f(&mut store).map_err(|e| e.in_command(cmd));
    drop(store);
    blocking::serve_now(ctx);
    out
}

/// Parses a count of permits (or a latch's count): an integer, not below 0.
pub fn parse_count(b: &[u8], what: &'static str) -> Result<i64> {
    let v = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
    if v < 0 {
        return Err(LockError::Negative(what));
    }
    Ok(v)
}

/// The optional `BLOCK ms` of a synchronizer's wait, from argument `from` on.
pub fn parse_block(args: &Args, from: usize, cmd: &'static str) -> Result<Option<i64>> {
    Ok(parse_options(args, from, Accepts { block: true, ..Accepts::default() }, cmd)?.block)
}

/// Checks the number of arguments: exactly `n` (command name included).
pub fn exact(args: &Args, n: usize, cmd: &'static str) -> Result<()> {
    if args.len() != n {
        return Err(LockError::WrongArity(cmd));
    }
    Ok(())
}

/// Checks the number of arguments: at least `min` (command name included).
pub fn arity(args: &Args, min: usize, cmd: &'static str) -> Result<()> {
    if args.len() < min {
        return Err(LockError::WrongArity(cmd));
    }
    Ok(())
}

/// The options a command accepts after its positional arguments.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Accepts {
    pub block: bool,
    pub latch: bool,
    pub token: bool,
    pub noqueue: bool,
}

/// Options given after the positional arguments, in any order, each at most once.
#[derive(Default, Debug)]
pub struct Options<'a> {
    /// `BLOCK ms`: park until acquired, at most `ms` (0 = no limit).
    pub block: Option<i64>,
    /// `LATCH request_id latch_ms`.
    pub latch: Option<Latch<'a>>,
    /// `TOKEN`: reply a fencing token.
    pub token: bool,
    /// `NOQUEUE`: try the fair lock without joining its queue.
    pub noqueue: bool,
}

/// Parses the options of command `cmd` from argument `from` on. Unknown, repeated or
/// incomplete: syntax error.
pub fn parse_options<'a>(args: &Args<'a>, from: usize, accepts: Accepts, cmd: &'static str) -> Result<Options<'a>> {
    let mut o = Options::default();
    if from >= args.len() {
        // No options (the usual call): no clock read.
        return Ok(o);
    }
    let now = Ctx::cached_ms();
    let mut i = from;
    while i < args.len() {
        let word = args.bytes(i);
        if accepts.block && word.eq_ignore_ascii_case(b"BLOCK") && o.block.is_none() {
            let ms = args.bytes(i + 1);
            if i + 1 >= args.len() {
                return Err(LockError::Syntax);
            }
            o.block = Some(parse_block_ms_at(ms, cmd, now)?);
            i += 2;
        } else if accepts.latch && word.eq_ignore_ascii_case(b"LATCH") && o.latch.is_none() {
            if i + 2 >= args.len() {
                return Err(LockError::Syntax);
            }
            let ttl_ms = parse_ms_at(args.bytes(i + 2), "latch time", cmd, now)?;
            o.latch = Some(Latch { request_id: args.bytes(i + 1), ttl_ms });
            i += 3;
        } else if accepts.token && word.eq_ignore_ascii_case(b"TOKEN") && !o.token {
            o.token = true;
            i += 1;
        } else if accepts.noqueue && word.eq_ignore_ascii_case(b"NOQUEUE") && !o.noqueue {
            o.noqueue = true;
            i += 1;
        } else {
            return Err(LockError::Syntax);
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    #[rustfmt::skip]
    const TIMES: &[(&str, std::result::Result<i64, &str>)] = &[
        // argument,               parsed or error line
        ("1",                      Ok(1)),
        ("9223370336854775807",    Ok(9_223_370_336_854_775_807)), // now + it = i64::MAX
        ("9223370336854775808",    Err("ERR invalid expire time in 'lock.acquire' command")),
        ("9223372036854775807",    Err("ERR invalid expire time in 'lock.acquire' command")),
        ("0",                      Err("ERR lease must be a positive integer")),
        ("-5",                     Err("ERR lease must be a positive integer")),
        ("9223372036854775808",    Err("ERR value is not an integer or out of range")),
    ];

    #[test]
    fn a_time_whose_deadline_passes_the_largest_expiry_is_redis_own_error() {
        for (arg, want) in TIMES {
            let got = parse_ms_at(arg.as_bytes(), "lease", "lock.acquire", NOW).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{arg}");
        }
    }

    #[test]
    fn a_block_timeout_is_zero_or_a_valid_deadline_and_a_negative_one_says_what_is_valid() {
        assert_eq!(parse_block_ms_at(b"0", "lock.acquire", NOW), Ok(0));
        assert_eq!(parse_block_ms_at(b"250", "lock.acquire", NOW), Ok(250));
        let neg = parse_block_ms_at(b"-1", "lock.acquire", NOW).map_err(|e| e.to_string());
        assert_eq!(neg, Err("ERR timeout must be a non-negative integer (ms; 0 waits without a limit)".into()));
        let huge = parse_block_ms_at(b"9223372036854775807", "rwlock.rlock", NOW).map_err(|e| e.to_string());
        assert_eq!(huge, Err("ERR invalid expire time in 'rwlock.rlock' command".into()));
    }
}
