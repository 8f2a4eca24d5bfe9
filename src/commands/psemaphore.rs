//! `PSEMAPHORE.*`: the expirable semaphore, layout- and reply-compatible with Redisson's
//! `RPermitExpirableSemaphore` (`core::sync::permits`). A permit's lease ends on the server's
//! clock, written as an absolute score; the module's timer (`blocking::reclaim`) returns it then.

use super::{arity, exact, parse_block, parse_count, parse_ms, write};
use crate::blocking::{self, Request};
use crate::core::sync::permits;
use crate::core::{deadline, parse_i64, LockError, Reply};
use crate::effects::stats;
use crate::ffi::{Args, Ctx};

type Result = std::result::Result<Reply, LockError>;

/// A lease in ms: positive, or 0 for a permit that never expires (Redisson's `acquire()`
/// without a lease).
fn parse_lease(b: &[u8], cmd: &'static str) -> crate::core::Result<i64> {
    match parse_i64(b) {
        Some(0) => Ok(0),
        _ => parse_ms(b, "lease", cmd),
    }
}

/// The absolute expiry of a lease given now (0: none).
fn until(lease: i64, cmd: &'static str) -> crate::core::Result<i64> {
    if lease == 0 {
        return Ok(permits::NO_LEASE);
    }
    deadline(Ctx::cached_ms(), lease).map_err(|e| e.in_command(cmd))
}

/// Re-arms the semaphore's reclaim timer after a command that gave a permit a lease.
fn arm(ctx: &Ctx, key: &[u8]) {
    blocking::reclaim::arm(ctx, &(ctx.selected_db(), key.to_vec()));
}

/// `PSEMAPHORE.TRYSETPERMITS name permits`
pub fn psemaphore_trysetpermits(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.trysetpermits";
    exact(args, 3, CMD)?;
    let key = args.bytes(1);
    let n = parse_count(args.bytes(2), "permits")?;
    let set = write(ctx, args, CMD, |s| permits::try_set_permits(s, key, n))?;
    Ok(Reply::Int(i64::from(set)))
}

/// `PSEMAPHORE.SETPERMITS name permits`
pub fn psemaphore_setpermits(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.setpermits";
    exact(args, 3, CMD)?;
    let key = args.bytes(1);
    let n = parse_count(args.bytes(2), "permits")?;
    write(ctx, args, CMD, |s| permits::set_permits(s, key, n))?;
    Ok(Reply::Simple("OK".into()))
}

/// `PSEMAPHORE.ACQUIRE name permits lease_ms [BLOCK ms]`
pub fn psemaphore_acquire(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.acquire";
    arity(args, 4, CMD)?;
    let n = parse_count(args.bytes(2), "permits")?;
    if n > permits::MAX_ACQUIRE {
        return Err(LockError::NotInteger);
    }
    let lease = parse_lease(args.bytes(3), CMD)?;
    let block = parse_block(args, 4, CMD)?;
    stats::SYNC_CALLS.inc();
    blocking::acquire_sync(ctx, args, args.bytes(1), Request::Permits { permits: n, lease }, block)
}

/// `PSEMAPHORE.RELEASE name id [id ...]`
pub fn psemaphore_release(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.release";
    arity(args, 3, CMD)?;
    let key = args.bytes(1);
    let ids: Vec<Vec<u8>> =
        (2..args.len()).map(|i| permits::parse_id(args.bytes(i))).collect::<std::result::Result<_, _>>()?;
    let refs: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
    write(ctx, args, CMD, |s| permits::release(s, key, &refs)).map(Reply::Int)
}

/// `PSEMAPHORE.UPDATELEASE name id lease_ms`
pub fn psemaphore_updatelease(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.updatelease";
    exact(args, 4, CMD)?;
    let key = args.bytes(1);
    let id = permits::parse_id(args.bytes(2))?;
    let at = until(parse_lease(args.bytes(3), CMD)?, CMD)?;
    let updated = write(ctx, args, CMD, |s| permits::update_lease(s, key, &id, at))?;
    arm(ctx, key);
    Ok(Reply::Int(i64::from(updated)))
}

/// `PSEMAPHORE.AVAILABLE name`
pub fn psemaphore_available(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.available";
    exact(args, 2, CMD)?;
    let key = args.bytes(1);
    write(ctx, args, CMD, |s| permits::available(s, key)).map(Reply::Int)
}

/// `PSEMAPHORE.ACQUIRED name`
pub fn psemaphore_acquired(ctx: &Ctx, args: &Args) -> Result {
    const CMD: &str = "psemaphore.acquired";
    exact(args, 2, CMD)?;
    let key = args.bytes(1);
    write(ctx, args, CMD, |s| permits::acquired(s, key)).map(Reply::Int)
}
