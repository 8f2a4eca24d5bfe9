//! Failover on a Redis Cluster (scripts/cluster.sh): after `CLUSTER FAILOVER` on a replica, or
//! after the primary is killed and its replica takes over, every lock, holder, read hold and
//! fencing counter is on the new primary with the same absolute expiry; a lease still ends at its
//! original time; a client parked with BLOCK on the demoted primary gets an error, not a hang
//! and not a grant.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::cluster::{Cluster, Node};
use common::*;

/// The keys of one lock of each kind, all in the slot of `{fo}` (so on one primary).
const LOCK: &str = "{fo}:lock";
const FENCED: &str = "{fo}:fenced";
const RW: &str = "{fo}:rw";
const SHORT: &str = "{fo}:short";
const FAIR: &str = "{fo}:fair";

/// The key that records the fencing era in `key`'s slot (`lockmod:fencing:era:{<tag>}`): found
/// among the shard's keys, as the one in that slot.
fn era_key(key: &str) -> String {
    format!("lockmod:fencing:era:{{{}}}", slot_tag(crc16_slot(key)))
}

/// Redis Cluster's slot of `key` (hash tags included), computed as the server does.
fn crc16_slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let hashed = match b.iter().position(|&c| c == b'{') {
        Some(o) => match b[o + 1..].iter().position(|&c| c == b'}') {
            Some(cl) if cl > 0 => &b[o + 1..o + 1 + cl],
            _ => b,
        },
        None => b,
    };
    let mut crc: u16 = 0;
    for &x in hashed {
        crc ^= u16::from(x) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16384
}

/// The smallest decimal number whose hash tag lands in `slot` (the module's choice of tag).
fn slot_tag(slot: u16) -> u32 {
    (0..).find(|n: &u32| crc16_slot(&n.to_string()) == slot).expect("a tag")
}

/// Every key of the shard with its value (hash or string) and PEXPIRETIME.
fn snapshot(c: &mut redis::Connection) -> BTreeMap<String, (String, i64)> {
    keys(c)
        .into_iter()
        .map(|k| {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let v = match t.as_str() {
                "hash" => format!("{:?}", hgetall(c, &k)),
                "list" => format!("{:?}", redis::cmd("LRANGE").arg(&k).arg(0).arg(-1).query::<Vec<String>>(c)),
                // A fair queue's deadlines are absolute times: they must survive unchanged.
                "zset" => format!(
                    "{:?}",
                    redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1).arg("WITHSCORES").query::<Vec<String>>(c)
                ),
                _ => redis::cmd("GET").arg(&k).query::<String>(c).expect("GET"),
            };
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (k, (v, at))
        })
        .collect()
}

/// Takes one lock of each kind on the `{fo}` primary; returns it, its replica and the snapshot.
fn seed(cluster: &Cluster) -> (Node, Node, BTreeMap<String, (String, i64)>) {
    let via = cluster.ports[0];
    let primary = cluster.primary_for(LOCK, via);
    let replica = cluster.replica_of(&primary.id, via);
    let mut c = cluster.conn(primary.port);
    ok(&mut c, &["LOCK.ACQUIRE", LOCK, "w1:1", "60000"]);
    ok(&mut c, &["LOCK.ACQUIRE", LOCK, "w1:1", "60000"]);
    ok(&mut c, &["LOCK.ACQUIRE", FENCED, "w1:1", "60000", "TOKEN"]);
    ok(&mut c, &["LOCK.UNLOCK", FENCED, "w1:1", "60000"]);
    ok(&mut c, &["LOCK.ACQUIRE", FENCED, "w2:1", "45000", "TOKEN"]);
    ok(&mut c, &["RWLOCK.RLOCK", RW, "r1:1", "50000"]);
    ok(&mut c, &["RWLOCK.RLOCK", RW, "r2:1", "40000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", FAIR, "f1:1", "60000", "60000"]);
    let queued = int(&ok(&mut c, &["FAIRLOCK.ACQUIRE", FAIR, "f2:1", "60000", "60000"]));
    assert!(queued > 0, "f2 waits in the fair queue");
    ok(&mut c, &["LOCK.ACQUIRE", SHORT, "w1:1", "3000"]);
    // Replication is asynchronous: WAIT is how a client makes sure a grant survives failover.
    let waited = Instant::now();
    let n: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut c).expect("WAIT");
    assert_eq!(n, 1, "the replica acknowledged");
    eprintln!("WAIT took {:?}", waited.elapsed());
    let before = snapshot(&mut c);
    assert_eq!(before.len(), 10, "five locks, a token counter, two read holds, a fair queue: {before:?}");
    (primary, replica, before)
}

/// The new primary holds the same keys and values with the same absolute expiries, and the short
/// lease still ends at its original time. Its fencing counter moved to the first token of era 1
/// (issue 35: grants may have been lost with the old primary), the era recorded in its slot.
fn assert_survived(cluster: &Cluster, new_primary: u16, before: &BTreeMap<String, (String, i64)>) {
    let mut c = cluster.conn(new_primary);
    common::fenced::wait_moved(&mut c);
    let mut after = snapshot(&mut c);
    let counter = names::token(FENCED);
    assert_eq!(after.remove(&era_key(&counter)), Some((1.to_string(), -1)), "the era, recorded in the counter's slot");
    assert_eq!(after[&counter].0, common::fenced::era(1).to_string(), "the counter moved to era 1");
    let mut before = before.clone();
    before.get_mut(&counter).expect("counter").0 = after[&counter].0.clone();
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (k, (v, at)) in &before {
        let (v2, at2) = &after[k];
        assert_eq!(v2, v, "{k}");
        // Absolute times are replicated as they are: a few ms of tolerance for rounding only.
        if *at < 0 {
            assert_eq!(*at2, *at, "{k} never expires");
        } else {
            assert_near(*at2, *at, 5);
        }
    }
    let refused = int(&ok(&mut c, &["LOCK.ACQUIRE", LOCK, "w9:1", "60000"]));
    assert!(refused > 0, "the holder still holds it: {refused}");
    let token = ok(&mut c, &["LOCK.ACQUIRE", FENCED, "w2:1", "45000", "TOKEN"]);
    assert_eq!(token, Value::Array(vec![Value::Int(-1), Value::Int(common::fenced::era(1) + 1)]), "the next era");
    // The short lease ends when it would have on the old primary, not a lease later.
    let end = before[SHORT].1;
    let now_ms = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64);
    while now_ms().expect("clock") < end + 300 {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ok(&mut c, &["EXISTS", SHORT]), Value::Int(0), "the short lease expired on time");
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", SHORT, "w3:1", "1000"]), Value::Nil);
}

#[test]
fn locks_survive_a_cluster_failover_with_the_same_absolute_expiry() {
    let cluster = Cluster::start();
    let (primary, replica, before) = seed(&cluster);
    ok(&mut cluster.conn(replica.port), &["CLUSTER", "FAILOVER"]);
    cluster.wait_primary(replica.port, Duration::from_secs(15));
    assert_survived(&cluster, replica.port, &before);
    // The old primary is now a replica: writes to it are redirected.
    let err = call(&mut cluster.conn(primary.port), &["LOCK.ACQUIRE", LOCK, "w5", "1000"]).expect_err("redirect");
    assert!(err.starts_with("MOVED"), "{err}");
}

#[test]
fn locks_survive_when_a_killed_primary_is_replaced_by_its_replica() {
    let cluster = Cluster::start();
    let (primary, replica, before) = seed(&cluster);
    let pid = cluster.pid(primary.port).to_string();
    let status = std::process::Command::new("kill").args(["-9", &pid]).status().expect("kill");
    assert!(status.success());
    // TAKEOVER needs no vote from the dead primary (nor from the others): deterministic and fast.
    ok(&mut cluster.conn(replica.port), &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    cluster.wait_primary(replica.port, Duration::from_secs(15));
    assert_survived(&cluster, replica.port, &before);
}

/// Issue 35 in a cluster: grants the replica never received (its link killed while it was
/// stopped, so nothing more reaches it), the primary killed, the replica takes over: its next
/// token on the name, and on a name the lost history created, is above every lost one.
#[test]
fn after_a_takeover_past_lost_grants_the_next_token_is_above_every_lost_one() {
    let cluster = Cluster::start();
    let (primary, replica, before) = seed(&cluster);
    let counter = names::token(FENCED);
    assert_eq!(before[&counter].0, "2");
    let mut c = cluster.conn(primary.port);
    let signal = |sig: &str, port: u16| {
        let pid = cluster.pid(port).to_string();
        assert!(std::process::Command::new("kill").args([sig, &pid]).status().expect("kill").success());
    };
    signal("-STOP", replica.port);
    ok(&mut c, &["CLIENT", "KILL", "TYPE", "replica"]);
    let mut lost = Vec::new();
    for _ in 0..5 {
        lost.push(common::fenced::token_of(&ok(&mut c, &["LOCK.ACQUIRE", FENCED, "w2:1", "45000", "TOKEN"])));
    }
    for _ in 0..3 {
        lost.push(common::fenced::token_of(&ok(&mut c, &["LOCK.ACQUIRE", "{fo}:fresh", "w4:1", "45000", "TOKEN"])));
    }
    assert_eq!(lost, [3, 4, 5, 6, 7, 1, 2, 3]);
    signal("-9", primary.port);
    signal("-CONT", replica.port);
    let mut r = cluster.conn(replica.port);
    ok(&mut r, &["READONLY"]);
    let held: String = redis::cmd("GET").arg(&counter).query(&mut r).expect("GET");
    assert_eq!(held, "2", "the replica never received the lost grants");
    ok(&mut r, &["CLUSTER", "FAILOVER", "TAKEOVER"]);
    cluster.wait_primary(replica.port, Duration::from_secs(15));
    let mut c = cluster.conn(replica.port);
    let first = common::fenced::era(1) + 1;
    assert_eq!(common::fenced::token_of(&ok(&mut c, &["LOCK.ACQUIRE", FENCED, "w2:1", "45000", "TOKEN"])), first);
    let fresh = ok(&mut c, &["LOCK.ACQUIRE", "{fo}:fresh", "w5:1", "45000", "TOKEN"]);
    assert_eq!(common::fenced::token_of(&fresh), first, "a name the new primary never saw starts in the era");
    let recorded: String = redis::cmd("GET").arg(era_key(&counter)).query(&mut c).expect("GET");
    assert_eq!(recorded, "1");
}

#[test]
fn a_client_blocked_on_a_demoted_primary_gets_an_error_and_no_grant() {
    let cluster = Cluster::start();
    let (primary, replica, _) = seed(&cluster);
    let mut waiter = cluster.conn(primary.port);
    let parked = std::thread::spawn(move || {
        let r = call(&mut waiter, &["LOCK.ACQUIRE", LOCK, "waiter:1", "60000", "BLOCK", "0"]);
        (r, Instant::now())
    });
    let mut fair_waiter = cluster.conn(primary.port);
    let fair_parked = std::thread::spawn(move || {
        call(&mut fair_waiter, &["FAIRLOCK.ACQUIRE", FAIR, "f3:1", "60000", "60000", "BLOCK", "0"])
    });
    let mut p = cluster.conn(primary.port);
    common::parked::wait_blocked(&mut p, 2);
    assert!(!parked.is_finished() && !fair_parked.is_finished(), "the waiters are parked");
    let queue = names::fair_queue(FAIR);
    let waiting: Vec<String> = redis::cmd("LRANGE").arg(&queue).arg(0).arg(-1).query(&mut p).expect("LRANGE");
    assert_eq!(waiting, ["f2:1", "f3:1"]);
    let n: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).expect("WAIT");
    assert_eq!(n, 1);
    let failover = Instant::now();
    ok(&mut cluster.conn(replica.port), &["CLUSTER", "FAILOVER"]);
    let fair_err = fair_parked.join().expect("fair waiter thread").expect_err("an error, never a grant");
    assert!(fair_err.starts_with("UNBLOCKED") || fair_err.starts_with("MOVED"), "{fair_err}");
    let (reply, at) = parked.join().expect("waiter thread");
    let err = reply.expect_err("an error, never a grant");
    eprintln!("the parked client got: {err}");
    assert!(err.starts_with("UNBLOCKED") || err.starts_with("MOVED"), "{err}");
    assert!(at - failover < Duration::from_secs(10), "promptly");
    cluster.wait_primary(replica.port, Duration::from_secs(15));
    let mut c = cluster.conn(replica.port);
    assert_eq!(hgetall(&mut c, LOCK), map(&[("w1:1", "2")]), "the holder still holds it");
    let mut old = cluster.conn(primary.port);
    ok(&mut old, &["READONLY"]);
    assert_eq!(hgetall(&mut old, LOCK), map(&[("w1:1", "2")]), "nothing was granted on the demoted node");
    // The demoted node wrote nothing when its fair waiter left (no divergence from the primary).
    std::thread::sleep(Duration::from_millis(500));
    let on_old: Vec<String> = redis::cmd("LRANGE").arg(&queue).arg(0).arg(-1).query(&mut old).expect("LRANGE");
    let on_new: Vec<String> = redis::cmd("LRANGE").arg(&queue).arg(0).arg(-1).query(&mut c).expect("LRANGE");
    assert_eq!(on_old, on_new);
}

#[test]
fn a_client_blocked_on_a_standalone_primary_made_a_replica_gets_an_error() {
    let s = Server::start();
    let other = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "holder", "60000"]);
    let mut waiter = s.conn();
    let parked = std::thread::spawn(move || call(&mut waiter, &["LOCK.ACQUIRE", "k", "waiter", "60000", "BLOCK", "0"]));
    common::parked::wait_blocked(&mut c, 1);
    assert!(!parked.is_finished(), "the waiter is parked");
    ok(&mut c, &["REPLICAOF", "127.0.0.1", &other.port.to_string()]);
    let err = parked.join().expect("waiter thread").expect_err("an error, never a grant");
    assert!(err.starts_with("UNBLOCKED"), "{err}");
}
