//! Parking a client: it waits in the registry, with its expiry timer, its lock polled and, for
//! a fair waiter, its queue place kept alive, until a grant, its timeout or its disconnect.

use super::registry::{watch_lock, with};
use super::request::Request;
use super::serve::arm_expiry;
use super::waiter::{Parked, Waiter};
use super::{poll, priority};
use crate::acl::Access;
use crate::core::{LockError, Reply, Result};
use crate::effects::stats;
use crate::ffi::Ctx;

/// Parks the client until `req` is granted on `key`, for up to `block_ms` (0 = no limit).
/// Returns `refused` unchanged where the client cannot block (MULTI, scripts).
pub fn park(ctx: &Ctx, key: &[u8], req: Request, block_ms: i64, refused: Reply) -> Result<Reply> {
    // On a (writable) replica nothing may be granted from outside a command: never parked.
    if !ctx.can_block() || ctx.is_replica() {
        return Ok(refused);
    }
    crate::ffi::events::watch_keyspace(ctx);
    let who = Access::caller().who(ctx);
    let Some(bc) = ctx.block_client::<Parked>(priority::block_limit(block_ms)) else { return Ok(refused) };
    let id = (ctx.selected_db(), key.to_vec());
    let client = ctx.client_id();
    stats::PARKED.inc();
    let sync = req.is_sync();
    let permits = matches!(req, Request::Permits { .. });
    if sync {
        stats::SYNC_PARKED.inc();
    }
    let fair = matches!(req, Request::Fair { .. }).then(|| req.owner().to_vec());
    let also = super::windows::watched(&(ctx.selected_db(), key.to_vec()), &req);
    if matches!(req, Request::RateLimit { .. }) {
        stats::RATE_PARKED.inc();
    }
    let waiter = Waiter { client, bc, req, who, since: Ctx::now_ms() };
    with(|r| {
        if !r.locks.contains_key(&id) {
            watch_lock(r, &id);
        }
        r.locks.entry(id.clone()).or_default().push_back(&id, waiter)
    });
    arm_expiry(ctx, &id);
    poll::parked(ctx, &id, also);
    // Held permits may have been taken by others (Redisson's Lua) with no timer of ours.
    if permits {
        super::reclaim::arm(ctx, &id);
    }
    if let Some(owner) = fair {
        super::fair::waiters::parked(ctx, &id, &owner);
    }
    Err(LockError::Blocked)
}
