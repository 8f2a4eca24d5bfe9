//! When a rate limiter's parked clients may next be served with nobody writing: the moment its
//! oldest live grant leaves the window (`core::rate::limiter::next_wake`). The lock's expiry
//! timer (`serve::arm_expiry`) is armed for the earlier of that moment and the key's own TTL,
//! so each parked state has one timer, re-armed after every serve.

use super::reclaim::in_db;
use super::registry::with;
use super::request::Request;
use super::waiter::LockId;
use crate::core::rate::limiter;
use crate::core::sync::names::{limiter_permits, limiter_value};
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

/// The limiter and client id of the rate limiter waiter first in `id`'s queue, if it is one.
fn front(id: &LockId) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    with(|r| {
        r.locks.get(id).and_then(|q| q.iter().next()).and_then(|w| match &w.req {
            Request::RateLimit { name, client, .. } => Some((name.clone(), client.clone())),
            _ => None,
        })
    })
    .flatten()
}

/// For a rate limiter's parked clients: when its oldest live grant leaves the window (absolute
/// ms, server clock). None for anything else, or a window with nothing live.
pub(super) fn window_expiry(ctx: &Ctx, id: &LockId) -> Option<i64> {
    let (name, client) = front(id)?;
    in_db(ctx, id.0, || {
        let args = Args::empty();
        let now = Ctx::now_ms();
        let mut store = RedisStore::at(ctx, &args, now).read_only();
        // An error (the limiter deleted, a key of another type): no time to wait for; the
        // poll or a write serves the waiters, who then get the error.
        limiter::next_wake(&mut store, &name, client.as_deref(), now).ok().flatten()
    })
    .flatten()
}

/// The keys besides `id`'s own (the state's value key) whose changes may let a parked rate
/// limiter client through: the limiter's hash and the state's grants. The poll watches them.
pub(super) fn watched(id: &LockId, req: &Request) -> Vec<Vec<u8>> {
    let Request::RateLimit { name, client, .. } = req else { return Vec::new() };
    let client = if id.1 == limiter_value(name, None) { None } else { client.as_deref() };
    vec![name.clone(), limiter_permits(name, client)]
}
