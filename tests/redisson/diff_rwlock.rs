//! Differential test of RWLOCK.*: the module against bench/lua/rwlock_*.lua on random
//! operations: readers and writers on a few keys (with and without hash tags), leases short
//! enough to expire mid-run, latched unlocks, and other clients expiring or deleting read
//! holds' timeout keys behind the module's back (which its read-hold index must notice).

use crate::common;

use common::diff::{self, env, Op, Pair};
use common::names;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const KEYS: &[&str] = &["doc", "{tagged}", "a{b}c"];
const OWNERS: &[&str] = &["uuid-1:1", "uuid-1:2", "uuid-2:1", "uuid-3:9"];
const LEASES: &[&str] = &["15", "40", "120", "30000"];

fn random_op(r: &mut SmallRng, latches: &mut u32) -> Op {
    let key = KEYS[r.gen_range(0..KEYS.len())];
    let owner = OWNERS[r.gen_range(0..OWNERS.len())];
    let lease = LEASES[r.gen_range(0..LEASES.len())];
    let chan = names::rwlock_channel(key);
    let t = names::read_timeout_prefix(key, owner);
    let kp = names::key_prefix(key);
    match r.gen_range(0..20) {
        0..=4 => Op::new(&["RWLOCK.RLOCK", key, owner, lease], "rwlock_rlock", &[key, &t], &[owner, lease]).ttl(),
        5..=7 => Op::new(&["RWLOCK.WLOCK", key, owner, lease], "rwlock_wlock", &[key], &[owner, lease]).ttl(),
        8..=10 => Op::new(
            &["RWLOCK.UNLOCK", key, owner, "READ", lease],
            "rwlock_unlock_read",
            &[key, &chan, &t, &kp],
            &[owner, lease],
        ),
        11..=12 => Op::new(
            &["RWLOCK.UNLOCK", key, owner, "WRITE", lease],
            "rwlock_unlock_write",
            &[key, &chan],
            &[owner, lease],
        ),
        13 => {
            if r.gen_bool(0.6) {
                *latches += 1;
            }
            let req = format!("req-{latches}");
            let latch = names::latch(key, &req);
            let ms = ["20", "500"][r.gen_range(0..2)];
            if r.gen_bool(0.5) {
                Op::new(
                    &["RWLOCK.UNLOCK", key, owner, "READ", lease, "LATCH", &req, ms],
                    "rwlock_unlock_read",
                    &[key, &chan, &t, &kp, &latch],
                    &[owner, lease, ms],
                )
            } else {
                Op::new(
                    &["RWLOCK.UNLOCK", key, owner, "WRITE", lease, "LATCH", &req, ms],
                    "rwlock_unlock_write",
                    &[key, &chan, &latch],
                    &[owner, lease, ms],
                )
            }
        }
        14..=15 => Op::new(&["RWLOCK.RENEW", key, owner, lease], "rwlock_renew", &[key, &kp], &[owner, lease]),
        16 => {
            let (word, mode) = [("READ", "read"), ("WRITE", "write")][r.gen_range(0..2)];
            Op::new(&["RWLOCK.FORCEUNLOCK", key, word], "rwlock_forceunlock", &[key, &chan], &[mode])
        }
        // Another client shortens, deletes or persists a read hold's key, or touches the hash.
        17 => Op::raw(&["PEXPIRE", &names::read_timeout(key, owner, r.gen_range(1..3)), lease]),
        18 => match r.gen_range(0..3) {
            0 => Op::raw(&["PERSIST", &names::read_timeout(key, owner, r.gen_range(1..3))]),
            _ => Op::raw(&["DEL", &names::read_timeout(key, owner, r.gen_range(1..3))]),
        },
        _ => Op::raw(&["PEXPIRE", key, lease]),
    }
}

#[test]
fn read_write_lock_matches_the_lua_reference() {
    let mut latches = 0;
    diff::run_random(0x2e4d, 3000, 15, |r| random_op(r, &mut latches));
}

/// Many readers on one lock, released in random order: the longest remaining hold decides the
/// TTL at every step (the read unlock's index against Redisson's scan).
#[test]
fn many_readers_released_in_random_order_match_the_lua_reference() {
    let mut r = SmallRng::seed_from_u64(env("DIFF_SEED", 0x2e4e));
    let mut pair = Pair::new();
    let owners: Vec<String> = (0..300).map(|i| format!("reader-{i}")).collect();
    let mut held = Vec::new();
    for o in &owners {
        for _ in 0..r.gen_range(1..3) {
            // Leases outlive the test: expiry mid-run is the random test's job, and two
            // dumps of 600 keys taken moments apart must not straddle an expiry.
            let lease = r.gen_range(60_000..600_000).to_string();
            let t = names::read_timeout_prefix("doc", o);
            pair.step(&Op::new(&["RWLOCK.RLOCK", "doc", o, &lease], "rwlock_rlock", &["doc", &t], &[o, &lease]));
            held.push(o.clone());
        }
    }
    pair.check();
    let (chan, kp) = (names::rwlock_channel("doc"), names::key_prefix("doc"));
    while !held.is_empty() {
        let o = held.swap_remove(r.gen_range(0..held.len()));
        let t = names::read_timeout_prefix("doc", &o);
        let op = Op::new(
            &["RWLOCK.UNLOCK", "doc", &o, "READ", "1"],
            "rwlock_unlock_read",
            &["doc", &chan, &t, &kp],
            &[&o, "1"],
        );
        pair.step(&op);
        if r.gen_ratio(1, 20) {
            let o = &owners[r.gen_range(0..owners.len())];
            pair.step(&Op::raw(&["DEL", &names::read_timeout("doc", o, 1)]));
        }
        if held.len() % 50 == 0 {
            pair.check();
        }
    }
    pair.check();
}
