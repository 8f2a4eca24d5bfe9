//! The module on a Redis Cluster (scripts/cluster.sh, 3 primaries + 3 replicas per test): keys
//! and slots, failover. One cluster at a time per binary (`common::cluster`); `make
//! test-cluster` runs them one by one.
//!
//! One test binary, a module per file, sharing tests/common (docs/design.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod cluster;
mod cluster_slots;
mod failover;
