//! `LOCK.CONTENDED`: who waits on what, across the keyspace, in one read-only command.

use crate::acl::Access;
use crate::blocking;
use crate::core::access::{KeyUse, Need};
use crate::core::contended::{self, Worst, DEFAULT_COUNT};
use crate::core::{parse_i64, LockError, Reply};
use crate::effects::{stats, RedisStore};
use crate::ffi::{Args, Ctx};

/// `LOCK.CONTENDED [COUNT n] [BY WAIT|WAITERS]`: the names with parked clients, worst first,
/// that the caller may read (a name it may not is left out, as if nobody waited on it).
pub fn lock_contended(ctx: &Ctx, args: &Args) -> Result<Reply, LockError> {
    let (count, by) = parse_options(args)?;
    let mut all = blocking::contended();
    contended::rank(&mut all, by);
    let mut access = Access::caller();
    let mut shown = Vec::with_capacity(count.min(all.len()));
    for c in all {
        if shown.len() == count {
            break;
        }
        if access.allows(ctx, &[Need::Key(c.name.clone(), KeyUse::Read)]) {
            shown.push(c);
        }
    }
    let now = Ctx::now_ms();
    let home = ctx.selected_db();
    let mut out = Vec::with_capacity(shown.len());
    for c in &shown {
        // Each name is read in its own database; the caller's is selected again after.
        if c.db != ctx.selected_db() && !ctx.select_db(c.db) {
            continue;
        }
        let held_ms = stats::held_since(c.db, &c.name).map(|since| now - since);
        let mut store = RedisStore::reader(ctx, args);
        let described = contended::describe(&mut store, c, held_ms);
        drop(store);
        match described {
            Ok(r) => out.push(r),
            Err(e) => {
                ctx.select_db(home);
                return Err(e);
            }
        }
    }
    if ctx.selected_db() != home {
        ctx.select_db(home);
    }
    Ok(Reply::Array(out))
}

/// `COUNT n` (at least 1) and `BY WAIT|WAITERS`, in any order, each at most once.
fn parse_options(args: &Args) -> Result<(usize, Worst), LockError> {
    let (mut count, mut by) = (None, None);
    let mut i = 1;
    while i < args.len() {
        let word = args.bytes(i);
        let Some(value) = (i + 1 < args.len()).then(|| args.bytes(i + 1)) else { return Err(LockError::Syntax) };
        if word.eq_ignore_ascii_case(b"COUNT") && count.is_none() {
            let n = parse_i64(value).ok_or(LockError::NotInteger)?;
            if n <= 0 {
                return Err(LockError::NotPositive("COUNT"));
            }
            count = Some(usize::try_from(n).unwrap_or(usize::MAX));
        } else if word.eq_ignore_ascii_case(b"BY") && by.is_none() {
            by = Some(if value.eq_ignore_ascii_case(b"WAIT") {
                Worst::Wait
            } else if value.eq_ignore_ascii_case(b"WAITERS") {
                Worst::Waiters
            } else {
                return Err(LockError::Syntax);
            });
        } else {
            return Err(LockError::Syntax);
        }
        i += 2;
    }
    Ok((count.unwrap_or(DEFAULT_COUNT), by.unwrap_or(Worst::Wait)))
}
