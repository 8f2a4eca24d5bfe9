//! The synchronizers: the semaphore (SEMAPHORE.*), the expirable semaphore (PSEMAPHORE.*), the
//! count-down latch (COUNTDOWN.*), their BLOCK waits, and a Redisson client sharing them.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod block_sync;
mod countdown;
mod psemaphore;
mod psemaphore_leases_found;
mod psemaphore_release_many;
mod semaphore;
mod sync_lines;
mod sync_shared;
