//! The command layer: parse arguments, run the lock algorithm on the Redis store, reply.
//!
//! Every argument is parsed before the keyspace is touched, so bad input changes nothing.

pub mod fair;
pub mod holds;
pub mod info;
pub mod lock;
pub mod rwlock;

use crate::core::{Latch, LockError, Result};
use crate::ffi::Args;

/// Parses a positive time in ms (a lease, a wait, a latch lifetime).
pub fn parse_ms(b: &[u8], what: &'static str) -> Result<i64> {
    let v = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
    if v <= 0 {
        return Err(LockError::NotPositive(what));
    }
    Ok(v)
}

/// Parses a non-negative time in ms (`BLOCK 0` waits forever).
pub fn parse_block_ms(b: &[u8]) -> Result<i64> {
    let v = crate::core::parse_i64(b).ok_or(LockError::NotInteger)?;
    if v < 0 {
        return Err(LockError::NotPositive("timeout"));
    }
    Ok(v)
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

/// Parses the options from argument `from` on. Unknown, repeated or incomplete: syntax error.
pub fn parse_options<'a>(args: &Args<'a>, from: usize, accepts: Accepts) -> Result<Options<'a>> {
    let mut o = Options::default();
    let mut i = from;
    while i < args.len() {
        let word = args.bytes(i);
        if accepts.block && word.eq_ignore_ascii_case(b"BLOCK") && o.block.is_none() {
            let ms = args.bytes(i + 1);
            if i + 1 >= args.len() {
                return Err(LockError::Syntax);
            }
            o.block = Some(parse_block_ms(ms)?);
            i += 2;
        } else if accepts.latch && word.eq_ignore_ascii_case(b"LATCH") && o.latch.is_none() {
            if i + 2 >= args.len() {
                return Err(LockError::Syntax);
            }
            let ttl_ms = parse_ms(args.bytes(i + 2), "latch time")?;
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
