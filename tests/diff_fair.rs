//! Differential test of FAIRLOCK.*: the module against bench/lua/fair_*.lua, on random
//! operations with several keys, owners, short leases and short waits, so leases expire and
//! queued waiters miss their deadlines and are purged during the run.

mod common;

use std::time::Duration;

use common::diff::{now_ms, Op, Pair};
use common::names;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const KEYS: &[&str] = &["lock", "{tagged}", "a{b}c"];
const OWNERS: &[&str] = &["uuid-1:1", "uuid-1:2", "uuid-2:1", "uuid-3:1"];
const LEASES: &[&str] = &["20", "60", "150", "2000"];
const WAITS: &[&str] = &["15", "40", "100"];
/// Waiter deadlines and lease expiries closer than this are waited out before an operation,
/// so both servers see the same side of every deadline.
const GUARD_MS: i64 = 20;

fn seed() -> u64 {
    std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0xfa1e)
}

fn ops() -> usize {
    std::env::var("DIFF_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(2500)
}

/// The soonest deadline or expiry (ms from now) among the fair locks' keys on one server.
fn soonest(c: &mut redis::Connection) -> Option<i64> {
    let now = now_ms();
    let mut soon = Vec::new();
    for key in KEYS {
        let z: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(names::fair_timeouts(key))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .expect("ZRANGE");
        soon.extend(z.into_iter().map(|(_, d)| d as i64 - now));
        let t: i64 = redis::cmd("PTTL").arg(key).query(c).expect("PTTL");
        if t >= 0 {
            soon.push(t);
        }
    }
    soon.into_iter().filter(|d| *d > -GUARD_MS).min()
}

fn wait_out_deadlines(pair: &mut Pair) {
    loop {
        let s = [soonest(&mut pair.mc), soonest(&mut pair.lc)].into_iter().flatten().min();
        match s {
            Some(ms) if ms <= GUARD_MS => std::thread::sleep(Duration::from_millis((ms + GUARD_MS).max(1) as u64 + 2)),
            _ => return,
        }
    }
}

fn random_op(r: &mut SmallRng, latches: &mut u32) -> Op {
    let key = KEYS[r.gen_range(0..KEYS.len())];
    let owner = OWNERS[r.gen_range(0..OWNERS.len())];
    let lease = LEASES[r.gen_range(0..LEASES.len())];
    let wait = WAITS[r.gen_range(0..WAITS.len())];
    let (queue, zset, chan) = (names::fair_queue(key), names::fair_timeouts(key), names::lock_channel(key));
    let now = now_ms().to_string();
    match r.gen_range(0..20) {
        0..=7 => Op::new(
            &["FAIRLOCK.ACQUIRE", key, owner, lease, wait],
            "fair_acquire",
            &[key, &queue, &zset],
            &[owner, lease, wait, &now],
        )
        .ttl(),
        8 => Op::new(
            &["FAIRLOCK.ACQUIRE", key, owner, lease, wait, "NOQUEUE"],
            "fair_acquire",
            &[key, &queue, &zset],
            &[owner, lease, wait, &now, "NOQUEUE"],
        ),
        9..=12 => Op::new(
            &["FAIRLOCK.UNLOCK", key, owner, lease],
            "fair_unlock",
            &[key, &queue, &zset, &chan],
            &[owner, lease, &now],
        ),
        13 => {
            // A latched unlock, sometimes retried with the same request id.
            if r.gen_bool(0.6) {
                *latches += 1;
            }
            let req = format!("req-{latches}");
            let latch = names::latch(key, &req);
            let ms = ["30", "500"][r.gen_range(0..2)];
            Op::new(
                &["FAIRLOCK.UNLOCK", key, owner, lease, "LATCH", &req, ms],
                "fair_unlock",
                &[key, &queue, &zset, &chan, &latch],
                &[owner, lease, &now, ms],
            )
        }
        14..=16 => {
            Op::new(&["FAIRLOCK.CANCEL", key, owner, wait], "fair_cancel", &[key, &queue, &zset], &[owner, wait])
        }
        17 | 18 => Op::new(&["FAIRLOCK.RENEW", key, owner, lease], "fair_renew", &[key], &[owner, lease]),
        _ => Op::new(&["FAIRLOCK.FORCEUNLOCK", key], "fair_forceunlock", &[key, &queue, &zset, &chan], &[&now]),
    }
}

#[test]
fn fair_lock_matches_the_lua_reference() {
    let (seed, n) = (seed(), ops());
    eprintln!("DIFF_SEED={seed} DIFF_OPS={n}");
    let mut r = SmallRng::seed_from_u64(seed);
    let mut pair = Pair::new();
    let mut latches = 0;
    for i in 0..n {
        wait_out_deadlines(&mut pair);
        let op = random_op(&mut r, &mut latches);
        pair.step(&op);
        if r.gen_ratio(1, 12) {
            std::thread::sleep(Duration::from_millis(r.gen_range(1..50)));
        }
        if i % 100 == 99 {
            wait_out_deadlines(&mut pair);
            pair.check();
        }
    }
    pair.check();
}
