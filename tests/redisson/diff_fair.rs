//! FAIRLOCK.* against the Lua reference (`bench/lua/fair_*.lua`): thousands of random
//! operations with short leases and waits, so holders expire and waiters are purged mid-run;
//! other clients delete the lock or touch the queue between them.

use crate::common;

use common::diff::{self, Op};
use common::names;
use rand::rngs::SmallRng;
use rand::Rng;

const KEYS: &[&str] = &["doc", "{tagged}", "a{b}c"];
const OWNERS: &[&str] = &["uuid-1:1", "uuid-1:2", "uuid-2:1", "uuid-3:9", "uuid-4:4"];
const LEASES: &[&str] = &["15", "40", "120", "30000"];
const WAITS: &[&str] = &["10", "35", "150", "20000"];

fn pick<'a>(r: &mut SmallRng, from: &[&'a str]) -> &'a str {
    from[r.gen_range(0..from.len())]
}

fn random_op(r: &mut SmallRng, latches: &mut u32) -> Op {
    let (key, owner, lease, wait) = (pick(r, KEYS), pick(r, OWNERS), pick(r, LEASES), pick(r, WAITS));
    let (q, z, chan) = (names::fair_queue(key), names::fair_timeouts(key), names::lock_channel(key));
    let fair = [key, q.as_str(), z.as_str()];
    let with_chan = [key, q.as_str(), z.as_str(), chan.as_str()];
    match r.gen_range(0..16) {
        0..=5 => {
            Op::new(&["FAIRLOCK.ACQUIRE", key, owner, lease, wait], "fair_acquire", &fair, &[owner, lease, wait, ""])
                .ttl()
        }
        6 => Op::new(
            &["FAIRLOCK.ACQUIRE", key, owner, lease, wait, "NOQUEUE"],
            "fair_acquire",
            &fair,
            &[owner, lease, wait, "", "NOQUEUE"],
        ),
        7..=9 => Op::new(&["FAIRLOCK.UNLOCK", key, owner, lease], "fair_unlock", &with_chan, &[owner, lease, ""]),
        10 => {
            // A latched unlock, sometimes retried with the same request id.
            if r.gen_bool(0.6) {
                *latches += 1;
            }
            let req = format!("req-{latches}");
            let latch = names::latch(key, &req);
            let ms = ["20", "500"][r.gen_range(0..2)];
            let keys = [key, q.as_str(), z.as_str(), chan.as_str(), latch.as_str()];
            Op::new(
                &["FAIRLOCK.UNLOCK", key, owner, lease, "LATCH", &req, ms],
                "fair_unlock",
                &keys,
                &[owner, lease, "", ms],
            )
        }
        11 => Op::new(&["FAIRLOCK.CANCEL", key, owner, wait], "fair_cancel", &fair, &[owner, wait]),
        12 => Op::new(&["FAIRLOCK.RENEW", key, owner, lease], "lock_renew", &[key], &[owner, lease]),
        13 => Op::new(&["FAIRLOCK.FORCEUNLOCK", key], "fair_forceunlock", &with_chan, &[""]),
        // Other clients: a plain DEL of the lock, a waiter leaving the queue by hand.
        14 => Op::raw(&["DEL", key]),
        _ => Op::raw(&["LREM", &q, "0", owner]),
    }
}

#[test]
fn fair_lock_matches_the_lua_reference() {
    let mut latches = 0;
    diff::run_random(0xfa1e, 3000, 10, |r| random_op(r, &mut latches));
}
