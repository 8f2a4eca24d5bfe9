//! `LOCK.INFO`: what a person debugging a stuck lock needs, in one read-only command.

use crate::blocking;
use crate::core::info::{self, ParkedList, DEFAULT_COUNT};
use crate::core::{parse_i64, LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// `LOCK.INFO key [COUNT n]`
pub fn lock_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    let count = match args.len() {
        2 => DEFAULT_COUNT,
        4 if args.bytes(2).eq_ignore_ascii_case(b"COUNT") => {
            let n = parse_i64(args.bytes(3)).ok_or(LockError::NotInteger)?;
            if n <= 0 {
                return Err(LockError::NotPositive("COUNT"));
            }
            usize::try_from(n).unwrap_or(usize::MAX)
        }
        3 | 4 => return Err(LockError::Syntax),
        _ => return Err(LockError::WrongArity("lock.info")),
    };
    let key = args.bytes(1);
    let (first, total) = blocking::parked_on(ctx.selected_db(), key, count);
    let mut store = RedisStore::reader(ctx, args);
    info::info(&mut store, key, count, ParkedList { first: &first, total })
}
