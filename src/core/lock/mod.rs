//! The locks (Redisson's `RLock`, `RReadWriteLock`, `RFairLock`, `RFencedLock`), one family:
//! each keeps one hash per name (owner fields with hold counts, the lease as the key's TTL),
//! they share the unlock latch and Redisson's channel rule, and a name held as one kind is
//! refused to the others (`kinds`).
//!
//! - `reentrant`, `rwlock` (its read holds' expiries in `hold_expiries`) and `fair`: each
//!   kind's acquire, unlock, renew and force-unlock.
//! - `fencing`: tokens for every kind; `era`: why a token never goes back.
//! - `latch`: Redisson's unlock latch; `holds`: `getHoldCount`; `info`: `LOCK.INFO`.

pub mod era;
pub mod fair;
pub mod fencing;
pub mod hold_expiries;
pub mod holds;
pub mod info;
pub mod kinds;
pub mod latch;
pub mod reentrant;
pub mod rwlock;

#[cfg(test)]
mod kinds_tests;
#[cfg(test)]
mod times_tests;
