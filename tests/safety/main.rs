//! What no client can break: ACL checks, hardening, one name one kind, times at the edge of the
//! range, paused writes, waiters giving up at once, keyspace events.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod acl;
mod give_up;
mod hardening;
mod keyspace_events;
mod pause;
mod safety_kinds;
mod safety_times;
