//! The locks: the reentrant lock (LOCK.*), the read-write lock (RWLOCK.*), the fair lock
//! (FAIRLOCK.*), their BLOCK waits and wake-ups, holds and LOCK.INFO/LOCK.CONTENDED, fencing
//! tokens and eras.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod block_fair;
mod block_lock;
mod block_rwlock;
mod fair;
mod fair_effects;
mod fair_keepalive;
mod fencing;
mod fencing_era_file;
mod fencing_eras;
mod holds;
mod lock;
mod lock_contended;
mod lock_info;
mod rwlock;
mod rwlock_index;
mod wakeup_sources;
