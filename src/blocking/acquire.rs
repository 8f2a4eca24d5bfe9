//! An acquire command's way through the wake-up path: one try, then parking when `BLOCK` is
//! given.

use super::priority;
use super::request::{attempt_as, Attempt, Request};
use super::serve::{park, serve_now};
use crate::core::{Reply, Result};
use crate::effects::stats;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// An acquire command: granted now if it can be, else parked when `block` is given (the
/// timeout in ms, 0 = no limit), else the refusal.
/// `owner` is the command's own argument (`req` borrows it; a client that parks keeps a copy).
pub fn acquire(
    ctx: &Ctx,
    args: &Args,
    key: &[u8],
    owner: &[u8],
    req: Request<&[u8]>,
    block: Option<i64>,
) -> Result<Reply> {
    let writers = priority::writers_ahead(ctx, key, &req);
    let mut store = RedisStore::new(ctx, args);
    let outcome = attempt_as(&mut store, key, owner, &req, writers).map_err(|e| e.in_command(req.command()));
    drop(store);
    // A fair acquire may have purged or joined the queue of a lock others are parked on.
    serve_now(ctx);
    match (outcome?, block) {
        (Attempt::Granted(reply), _) => Ok(reply),
        (Attempt::Refused(reply), block) => {
            stats::REFUSED.inc();
            match block {
                Some(ms) => park(ctx, key, req.to_owned(), ms, reply),
                None => Ok(reply),
            }
        }
    }
}
