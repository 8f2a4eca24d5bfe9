//! Differential test of LOCK.*: the module against bench/lua/lock_*.lua, on random operations
//! with several keys (some with hash tags), several owners and leases short enough to expire.

use crate::common;

use common::diff::{self, Op};
use common::names;
use rand::rngs::SmallRng;
use rand::Rng;

const KEYS: &[&str] = &["lock", "{tagged}", "a{b}c", "other"];
const OWNERS: &[&str] = &["uuid-1:1", "uuid-1:2", "uuid-2:1"];
const LEASES: &[&str] = &["15", "40", "120", "30000"];

fn random_op(r: &mut SmallRng, latches: &mut u32) -> Op {
    let key = KEYS[r.gen_range(0..KEYS.len())];
    let owner = OWNERS[r.gen_range(0..OWNERS.len())];
    let lease = LEASES[r.gen_range(0..LEASES.len())];
    let chan = names::lock_channel(key);
    match r.gen_range(0..11) {
        0..=3 => Op::new(&["LOCK.ACQUIRE", key, owner, lease], "lock_acquire", &[key], &[owner, lease]).ttl(),
        10 => {
            let counter = names::token(key);
            Op::new(
                &["LOCK.ACQUIRE", key, owner, lease, "TOKEN"],
                "lock_acquire_token",
                &[key, &counter],
                &[owner, lease],
            )
            .ttl()
        }
        4..=6 => Op::new(&["LOCK.UNLOCK", key, owner, lease], "lock_unlock", &[key, &chan], &[owner, lease]),
        7 => {
            // A latched unlock, sometimes retried with the same request id.
            if r.gen_bool(0.6) {
                *latches += 1;
            }
            let req = format!("req-{latches}");
            let latch = names::latch(key, &req);
            let ms = ["20", "500"][r.gen_range(0..2)];
            Op::new(
                &["LOCK.UNLOCK", key, owner, lease, "LATCH", &req, ms],
                "lock_unlock",
                &[key, &chan, &latch],
                &[owner, lease, ms],
            )
        }
        8 => Op::new(&["LOCK.RENEW", key, owner, lease], "lock_renew", &[key], &[owner, lease]),
        _ => Op::new(&["LOCK.FORCEUNLOCK", key], "lock_forceunlock", &[key, &chan], &[]),
    }
}

#[test]
fn reentrant_lock_matches_the_lua_reference() {
    let mut latches = 0;
    diff::run_random(0x10c4, 2500, 12, |r| random_op(r, &mut latches));
}
