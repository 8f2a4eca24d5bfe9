//! `LOCK.INFO`: what a person debugging a stuck lock needs, in one read-only command.

use crate::blocking;
use crate::core::{info, LockError, Reply};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// `LOCK.INFO key`
pub fn lock_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    if args.len() != 2 {
        return Err(LockError::WrongArity("lock.info"));
    }
    let key = args.bytes(1);
    let parked = blocking::parked_on(ctx.selected_db(), key);
    let mut store = RedisStore::reader(ctx, args);
    info::info(&mut store, key, &parked)
}
