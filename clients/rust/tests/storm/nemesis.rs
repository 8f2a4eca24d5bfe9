//! The storm's nemesis: every few ms it picks a client parked in `LOCK.ACQUIRE ... BLOCK` and
//! kills its connection (`CLIENT KILL ID`: the library must settle the lost reply by asking
//! the server) or unblocks it (`CLIENT UNBLOCK ... ERROR` or `TIMEOUT`). It tells the sides
//! apart by connection name (the Python and Node workers name their clients, and the
//! libraries' connections keep the name; the Rust client's are unnamed).
//!
//! A random strike rarely meets a grant on its way. So the nemesis also holds the lock itself
//! now and then, with the module's commands, and releases it in one transaction with strikes
//! at parked waiters (issue 34's repro: `MULTI`, `LOCK.UNLOCK`, `CLIENT KILL ID`, `EXEC`): when
//! a struck waiter is the head of the queue, the unlock grants it the lock and the strike
//! drops that grant, which the module must give back before the strike replies, and which the
//! struck client's library must then settle as not granted.

use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::rust_side::critical_section;
use super::tally::{Tally, ACTIONS};

/// The lease of the nemesis' own holds (ms).
const RAW_LEASE: u64 = 30_000;
/// Parked waiters struck in each of its unlocks.
const RAW_STRIKES: usize = 3;

/// The side a connection named `name` belongs to (`None`: not a storm worker's).
pub fn side_of(name: &str) -> Option<&'static str> {
    match name {
        "" => Some("rust"),
        "storm-py-sync" => Some("py-sync"),
        "storm-py-asyncio" => Some("py-asyncio"),
        "storm-node" => Some("node"),
        _ => None,
    }
}

/// The clients of `CLIENT LIST` parked in `LOCK.ACQUIRE`: (id, side).
pub fn parked(list: &str) -> Vec<(u64, &'static str)> {
    list.lines()
        .filter_map(|line| {
            let field = |k: &str| line.split(' ').find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='));
            if field("cmd")? != "lock.acquire" || !field("flags")?.contains('b') {
                return None;
            }
            Some((field("id")?.parse().ok()?, side_of(field("name")?)?))
        })
        .collect()
}

/// Runs until `end`. Half of its strikes go to the (side, action) hit least so far among the
/// sides parked at that moment, so that every pair is exercised however the storm goes; the
/// rest at random. Counts the strikes that hit (the client was still parked).
pub async fn run(mut conn: MultiplexedConnection, end: Instant, tally: Arc<Tally>) -> Result<(), String> {
    let mut rng = StdRng::from_entropy();
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(10..50))).await;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut conn)
            .await
            .map_err(|e| format!("nemesis: CLIENT LIST: {e}"))?;
        let targets: Vec<(u64, &str, &str)> =
            parked(&list).into_iter().flat_map(|(id, side)| ACTIONS.map(|a| (id, side, a))).collect();
        if targets.is_empty() {
            continue;
        }
        let (id, side, action) = if rng.gen_bool(0.5) {
            let least = targets.iter().map(|&(_, s, a)| tally.get(s, a)).min().unwrap_or(0);
            let fewest: Vec<_> = targets.iter().filter(|&&(_, s, a)| tally.get(s, a) == least).collect();
            *fewest[rng.gen_range(0..fewest.len())]
        } else {
            targets[rng.gen_range(0..targets.len())]
        };
        let hit: i64 =
            strike(id, action).query_async(&mut conn).await.map_err(|e| format!("nemesis: {action} {id}: {e}"))?;
        if hit == 1 {
            tally.add(side, action, 1);
        }
    }
    Ok(())
}

/// The command of `action` on client `id`; replies 1 when it hit.
fn strike(id: u64, action: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("CLIENT");
    match action {
        "nemesis_kill" => cmd.arg("KILL").arg("ID").arg(id),
        "nemesis_unblock_error" => cmd.arg("UNBLOCK").arg(id).arg("ERROR"),
        _ => cmd.arg("UNBLOCK").arg(id).arg("TIMEOUT"),
    };
    cmd
}

/// The nemesis' own holds until `end`, on `raw` (named `storm-raw`, never struck): waits its
/// turn (`BLOCK`), runs the critical section as every holder does, then unlocks in a
/// transaction with strikes at up to `RAW_STRIKES` parked waiters.
pub async fn raw_holder(mut raw: MultiplexedConnection, end: Instant, tally: Arc<Tally>) -> Result<(), String> {
    let fail = |what: &str, e: redis::RedisError| format!("nemesis' hold: {what}: {e}");
    let mut rng = StdRng::from_entropy();
    redis::cmd("CLIENT").arg("SETNAME").arg("storm-raw").exec_async(&mut raw).await.map_err(|e| fail("SETNAME", e))?;
    for n in 1.. {
        if Instant::now() >= end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..100))).await;
        let owner = format!("nemesis:{n}");
        let reply: redis::Value = redis::cmd("LOCK.ACQUIRE")
            .arg(super::NAME)
            .arg(&owner)
            .arg(RAW_LEASE)
            .arg("BLOCK")
            .arg(rng.gen_range(100..1000))
            .query_async(&mut raw)
            .await
            .map_err(|e| fail("LOCK.ACQUIRE", e))?;
        if reply != redis::Value::Nil {
            tally.add("nemesis", "timeouts", 1);
            continue;
        }
        tally.add("nemesis", "grants", 1);
        critical_section(&mut raw, &owner, None, &mut rng).await?;
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("normal")
            .query_async(&mut raw)
            .await
            .map_err(|e| fail("CLIENT LIST", e))?;
        let mut waiting = parked(&list);
        let mut targets = Vec::new();
        while targets.len() < RAW_STRIKES && !waiting.is_empty() {
            let (id, side) = waiting.swap_remove(rng.gen_range(0..waiting.len()));
            targets.push((id, side, ACTIONS[rng.gen_range(0..ACTIONS.len())]));
        }
        let mut tx = redis::pipe();
        tx.atomic().cmd("LOCK.UNLOCK").arg(super::NAME).arg(&owner).arg(RAW_LEASE);
        for &(id, _, action) in &targets {
            tx.add_command(strike(id, action));
        }
        let replies: Vec<redis::Value> = tx.query_async(&mut raw).await.map_err(|e| fail("MULTI", e))?;
        if replies.first() != Some(&redis::Value::Int(1)) {
            return Err(format!("nemesis' hold: LOCK.UNLOCK of {owner} replied {replies:?}"));
        }
        for (&(_, side, action), hit) in targets.iter().zip(&replies[1..]) {
            if *hit == redis::Value::Int(1) {
                tally.add(side, action, 1);
                tally.add(side, "raced", 1);
            }
        }
    }
    Ok(())
}
