//! A grant and its reply (docs/design.md, "A grant and its reply"): how parked clients are
//! answered, a grant racing the waiter's unblock, a grant given back, the storm, `WAIT` after a
//! grant. `make test-handover` runs this binary with Redis 7.2's hand-over forced.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod answer_order;
mod grant_race;
mod grant_settle;
mod grant_storm;
mod replica_sync;
