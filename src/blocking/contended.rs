//! The names clients are parked on, for `LOCK.CONTENDED`: read from the registry, which the
//! wake-up path keeps anyway, so the lock paths pay nothing for it.

use super::registry::with;
use crate::core::contended::Contended;
use crate::ffi::Ctx;

/// Every name with parked clients, in no particular order: O(names), each name's count and
/// first waiter read in O(1).
pub fn contended() -> Vec<Contended> {
    let now = Ctx::now_ms();
    with(|r| {
        let of = |(id, q): (&super::waiter::LockId, &super::waiters::Waiters)| {
            // Waiters are kept in arrival order: the first has waited longest.
            let first = q.iter().next()?;
            Some(Contended {
                db: id.0,
                name: id.1.clone(),
                first: first.req.wait_kind(),
                waiters: q.len(),
                oldest_wait_ms: now - first.since,
            })
        };
        r.locks.iter().filter_map(of).collect()
    })
    .unwrap_or_default()
}

/// How many names have parked clients now (`INFO lockmod`'s `contended_names`).
pub fn contended_names() -> usize {
    with(|r| r.locks.values().filter(|q| !q.is_empty()).count()).unwrap_or(0)
}
