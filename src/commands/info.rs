//! `LOCK.INFO` and `SYNC.INFO`: what a person debugging a stuck lock or synchronizer needs, in
//! one read-only command each. Both take `COUNT n` and list the same parked clients.

use crate::blocking;
use crate::core::lock::info::{self, ParkedList, DEFAULT_COUNT};
use crate::core::rate::{self, limiter};
use crate::core::sync;
use crate::core::{parse_i64, LockError, Reply, Store};
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

/// `SYNC.INFO name [COUNT n] [CLIENT id]`: `LOCK.INFO`'s sibling for the synchronizers and
/// the rate limiter (a hash `name`; `CLIENT` picks a `PER_CLIENT` limiter's state).
pub fn sync_info(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    let (count, client) = parse_sync_options(args)?;
    let key = args.bytes(1);
    let mut store = RedisStore::reader(ctx, args);
    // A rate limiter is a hash with a `type`; a lock's hash goes on to WRONGTYPE below.
    if store.hash_get(key, limiter::TYPE).is_ok_and(|t| t.is_some()) {
        let state = limiter::state_key(&mut store, key, client)?;
        let (first, total) = blocking::parked_on(ctx.selected_db(), &state, count);
        let now = Store::now(&store);
        return rate::info::info(&mut store, key, client, count, ParkedList { first: &first, total }, now);
    }
    if client.is_some() {
        return Err(LockError::Syntax);
    }
    let (first, total) = blocking::parked_on(ctx.selected_db(), key, count);
    sync::info::info(&mut store, key, count, ParkedList { first: &first, total })
}

/// The arguments after the key: nothing (the default bound) or `COUNT n`, `n` at least 1.
fn parse_count(args: &Args, cmd: &'static str) -> Result<usize, LockError> {
    match args.len() {
        2 => Ok(DEFAULT_COUNT),
        4 if args.bytes(2).eq_ignore_ascii_case(b"COUNT") => count_of(args.bytes(3)),
        3 | 4 => Err(LockError::Syntax),
        _ => Err(LockError::WrongArity(cmd)),
    }
}

fn count_of(b: &[u8]) -> Result<usize, LockError> {
    let n = parse_i64(b).ok_or(LockError::NotInteger)?;
    if n <= 0 {
        return Err(LockError::NotPositive("COUNT"));
    }
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// `SYNC.INFO`'s options: `COUNT n` and `CLIENT id`, in any order, each at most once.
fn parse_sync_options<'a>(args: &Args<'a>) -> Result<(usize, Option<&'a [u8]>), LockError> {
    let (mut count, mut client) = (None, None);
    let mut i = 2;
    while i < args.len() {
        let (word, value) = (args.bytes(i), (i + 1 < args.len()).then(|| args.bytes(i + 1)));
        match value {
            Some(v) if word.eq_ignore_ascii_case(b"COUNT") && count.is_none() => count = Some(count_of(v)?),
            Some(v) if word.eq_ignore_ascii_case(b"CLIENT") && client.is_none() => client = Some(v),
            _ => return Err(LockError::Syntax),
        }
        i += 2;
    }
    Ok((count.unwrap_or(DEFAULT_COUNT), client))
}
