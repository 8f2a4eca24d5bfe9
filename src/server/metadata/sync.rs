//! Command metadata of the synchronizers (`SEMAPHORE.*`, `PSEMAPHORE.*`, `COUNTDOWN.*`,
//! `SYNC.INFO`): data only, applied with the locks' rows (`super::COMMANDS`).
//!
//! Each command declares `name` as its key (first = last = 1). The expirable semaphore's zset
//! `{name}:timeout` is no argument, so no key spec can name it; it lies in `name`'s slot, and
//! the commands check it (and every channel) against the caller's ACL themselves
//! (`crate::core::access`).

use super::{arg, BLOCK, COUNT};
use crate::ffi::metadata::{Arg, ArgKind, Command, KeyAccess};

const NAME: Arg = arg("name", ArgKind::Key);
const PERMITS: Arg = arg("permits", ArgKind::Integer);
const LEASE_MS: Arg = arg("lease_ms", ArgKind::Integer);
const LEASE: Arg =
    Arg { name: "ms", kind: ArgKind::Integer, token: Some("LEASE"), optional: true, multiple: false, subargs: &[] };
const IDS: Arg = Arg { name: "id", kind: ArgKind::String, token: None, optional: false, multiple: true, subargs: &[] };

/// A row: the fields that differ between commands.
const fn row(
    name: &'static str,
    summary: &'static str,
    complexity: &'static str,
    arity: i32,
    key: KeyAccess,
    acl: &'static str,
    args: &'static [Arg],
) -> Command {
    Command { name, summary, complexity, arity, key, acl, args }
}

use KeyAccess::{Read, ReadUpdate};

/// "O(1)", and the expirable semaphore's cost: its reclaim of expired permits.
const O1: &str = "O(1)";
const RECLAIM: &str = "O(log(N) + M) where N is the number of held permits and M the number of expired ones returned";

#[rustfmt::skip]
pub static COMMANDS: &[Command] = &[
    row("SEMAPHORE.TRYSETPERMITS", "Sets a semaphore's permits (Redisson RSemaphore) if it does not exist", O1, -3, ReadUpdate, "write fast", &[NAME, PERMITS, LEASE]),
    row("SEMAPHORE.ACQUIRE", "Takes permits of a semaphore, optionally waiting in FIFO order", O1, -3, ReadUpdate, "write slow blocking", &[NAME, PERMITS, BLOCK]),
    row("SEMAPHORE.RELEASE", "Returns permits to a semaphore and serves its waiters", O1, 3, ReadUpdate, "write fast", &[NAME, PERMITS]),
    row("SEMAPHORE.ADDPERMITS", "Adds (or with a negative delta takes away) a semaphore's permits", O1, 3, ReadUpdate, "write fast", &[NAME, arg("delta", ArgKind::Integer)]),
    row("SEMAPHORE.DRAIN", "Takes every available permit of a semaphore", O1, 2, ReadUpdate, "write fast", &[NAME]),
    row("SEMAPHORE.AVAILABLE", "Returns a semaphore's available permits", O1, 2, Read, "read fast", &[NAME]),
    row("PSEMAPHORE.TRYSETPERMITS", "Sets an expirable semaphore's permits (Redisson RPermitExpirableSemaphore) if it does not exist", O1, 3, ReadUpdate, "write fast", &[NAME, PERMITS]),
    row("PSEMAPHORE.SETPERMITS", "Sets an expirable semaphore's total of available and held permits", "O(log(N)) where N is the number of held permits", 3, ReadUpdate, "write fast", &[NAME, PERMITS]),
    row("PSEMAPHORE.ACQUIRE", "Takes permits of an expirable semaphore with a lease, optionally waiting in FIFO order", "O(log(N) + P + M) where N is the number of held permits, P the permits taken and M the expired ones returned", -4, ReadUpdate, "write slow blocking", &[NAME, PERMITS, LEASE_MS, BLOCK]),
    row("PSEMAPHORE.RELEASE", "Returns held permits of an expirable semaphore by id", "O(K * log(N) + M) where K is the number of ids, N the held permits and M the expired ones returned", -3, ReadUpdate, "write slow", &[NAME, IDS]),
    row("PSEMAPHORE.UPDATELEASE", "Gives a held permit of an expirable semaphore a new lease", RECLAIM, 4, ReadUpdate, "write slow", &[NAME, arg("id", ArgKind::String), LEASE_MS]),
    row("PSEMAPHORE.AVAILABLE", "Returns an expirable semaphore's available permits, after returning expired ones", RECLAIM, 2, ReadUpdate, "write slow", &[NAME]),
    row("PSEMAPHORE.ACQUIRED", "Returns how many permits of an expirable semaphore are held, after returning expired ones", RECLAIM, 2, ReadUpdate, "write slow", &[NAME]),
    row("COUNTDOWN.TRYSETCOUNT", "Sets a count-down latch's count (Redisson RCountDownLatch) if it does not exist", O1, 3, ReadUpdate, "write fast", &[NAME, arg("count", ArgKind::Integer)]),
    row("COUNTDOWN.DECR", "Counts a latch down, opening it at zero", O1, 2, ReadUpdate, "write fast", &[NAME]),
    row("COUNTDOWN.COUNT", "Returns a count-down latch's count", O1, 2, Read, "read fast", &[NAME]),
    row("COUNTDOWN.AWAIT", "Tells whether a count-down latch is open, optionally waiting for it", O1, -2, Read, "read slow blocking", &[NAME, BLOCK]),
    row("SYNC.INFO", "Shows a synchronizer's kind, permits or count, held permits and parked clients", "O(log(N) + C) where C is COUNT (default 100): the items listed", -2, Read, "read slow", &[NAME, COUNT]),
];
