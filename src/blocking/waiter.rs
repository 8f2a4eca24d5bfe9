//! What the registry (`super::registry`) and a lock's queue (`super::waiters`) hold: a parked
//! client, the lock it waits for, and the timers armed for them (what each does when it
//! fires is `super::timers`).

use super::request::Request;
use crate::acl::Who;
use crate::ffi::blocked::BlockedClient;

/// The registry's hash maps. Every hand-off looks locks up by name several times (waiters,
/// parked names, expiry timers, the poll's signatures): foldhash, seeded per process, costs a
/// fraction of the standard SipHash on these short keys.
pub(super) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A lock: its database and key.
pub(super) type LockId = (i32, Vec<u8>);

/// The blocked-client callbacks of a parked client (`super::callbacks` says what they do).
pub struct Parked;

/// A parked client's handle.
pub(super) type Handle = BlockedClient<Parked>;

pub(super) struct Waiter {
    pub(super) client: u64,
    pub(super) bc: Handle,
    pub(super) req: Request,
    /// The user it ran as: its grant is checked against that user's ACL.
    pub(super) who: Who,
    /// When it parked (ms), for `LOCK.INFO`.
    pub(super) since: i64,
}

impl Waiter {
    /// This client leaves its lock's waiters, with what it asked for (`granted`) or without:
    /// its wait is counted in `INFO lockmod`'s `waits_*`. Every way out calls it once.
    pub(super) fn ended(&self, granted: bool) {
        crate::effects::wait_stats::ended(self.req.wait_kind(), crate::ffi::Ctx::now_ms() - self.since, granted);
    }
}

/// A timer of the wake-up path, as `Ctx::create_timer` returns it.
pub type TimerId = crate::ffi::timers::TimerId<TimerData>;

/// Why a timer was armed.
pub enum TimerData {
    /// Serve every lock in `pending`.
    Pending,
    /// The lease of a lock with parked clients runs out now.
    Expiry { db: i32, key: Vec<u8> },
    /// Keep parked fair waiters' queue places alive, and serve their locks.
    FairTick,
    /// Take fair waiters that gave up out of their queues.
    FairCancels,
    /// Look for changes by others to locks with parked clients (`poll`).
    Poll,
    /// Writes were paused: run what waited, if they may run now (`paused`).
    Resume,
    /// The earliest lease of an expirable semaphore's permits ends now (`reclaim`).
    Reclaim { db: i32, key: Vec<u8> },
    /// Look for leases the module did not write (`reclaim::find`).
    ReclaimFind,
    /// Give back the grants whose answers never reached their clients (`give_back`).
    GiveBack,
}
