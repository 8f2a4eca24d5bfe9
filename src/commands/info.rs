//! `LOCK.INFO` and `SYNC.INFO`: what a person debugging a stuck lock or synchronizer needs, in
//! one read-only command each. Both take `COUNT n` and list the same parked clients.

use crate::blocking;
use crate::core::info::{self, ParkedList, DEFAULT_COUNT};
use crate::core::{parse_i64, sync_info, LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// `LOCK.INFO key [COUNT n]`
pub fn lock_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    let count = parse_count(args, "lock.info")?;
    let key = args.bytes(1);
    let (first, total) = blocking::parked_on(ctx.selected_db(), key, count);
    let mut store = RedisStore::reader(ctx, args);
    info::info(&mut store, key, count, ParkedList { first: &first, total })
}

/// `SYNC.INFO name [COUNT n]`: `LOCK.INFO`'s sibling for the synchronizers.
pub fn sync_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    let count = parse_count(args, "sync.info")?;
    let key = args.bytes(1);
    let (first, total) = blocking::parked_on(ctx.selected_db(), key, count);
    let mut store = RedisStore::reader(ctx, args);
    sync_info::info(&mut store, key, count, ParkedList { first: &first, total })
}

/// The arguments after the key: nothing (the default bound) or `COUNT n`, `n` at least 1.
fn parse_count(args: &Args, cmd: &'static str) -> Result<usize, LockError> {
    match args.len() {
        2 => Ok(DEFAULT_COUNT),
        4 if args.bytes(2).eq_ignore_ascii_case(b"COUNT") => {
            let n = parse_i64(args.bytes(3)).ok_or(LockError::NotInteger)?;
            if n <= 0 {
                return Err(LockError::NotPositive("COUNT"));
            }
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        }
        3 | 4 => Err(LockError::Syntax),
        _ => Err(LockError::WrongArity(cmd)),
    }
}
