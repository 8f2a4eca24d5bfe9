//! `SYNC.INFO`: a synchronizer's state and its parked clients, in one read-only command
//! (`LOCK.INFO`'s sibling).

use crate::blocking;
use crate::core::info::{ParkedList, DEFAULT_COUNT};
use crate::core::{parse_i64, sync_info, LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// `SYNC.INFO name [COUNT n]`
pub fn sync_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
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
        _ => return Err(LockError::WrongArity("sync.info")),
    };
    let key = args.bytes(1);
    let (first, total) = blocking::parked_on(ctx.selected_db(), key, count);
    let mut store = RedisStore::reader(ctx, args);
    sync_info::info(&mut store, key, count, ParkedList { first: &first, total })
}
