//! The module on a Redis Cluster (3 primaries + 3 replicas from scripts/cluster.sh), driven by
//! the `redis` crate's cluster client: every lock kind on keys spread over all primaries, every
//! key and channel a random workload creates in the lock key's slot, MOVED for a command sent
//! to the wrong node, unlock messages across nodes, BLOCK waiters on two primaries at once.
//!
//! Lock kinds are rows of [`KINDS`]: adding a kind (FAIRLOCK.*) is one more row.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use redis::ConnectionLike;

/// One lock kind: its commands with `K` (key) and `O` (owner) placeholders.
struct Kind {
    name: &'static str,
    acquire: &'static [&'static str],
    /// What another owner's conflicting acquire looks like (must be refused).
    contend: &'static [&'static str],
    unlock: &'static [&'static str],
    /// The channel its unlock publishes on, given the key and the next waiter (after `contend`).
    channel: fn(&str, &str) -> String,
    /// The message its unlock publishes.
    message: &'static str,
}

const KINDS: &[Kind] = &[
    Kind {
        name: "lock",
        acquire: &["LOCK.ACQUIRE", "K", "O", "60000"],
        contend: &["LOCK.ACQUIRE", "K", "O", "60000"],
        unlock: &["LOCK.UNLOCK", "K", "O", "60000"],
        channel: |k, _| names::lock_channel(k),
        message: "0",
    },
    Kind {
        name: "fenced",
        acquire: &["LOCK.ACQUIRE", "K", "O", "60000", "TOKEN"],
        contend: &["LOCK.ACQUIRE", "K", "O", "60000", "TOKEN"],
        unlock: &["LOCK.UNLOCK", "K", "O", "60000"],
        channel: |k, _| names::lock_channel(k),
        message: "0",
    },
    Kind {
        name: "read",
        acquire: &["RWLOCK.RLOCK", "K", "O", "60000"],
        contend: &["RWLOCK.WLOCK", "K", "O", "60000"],
        unlock: &["RWLOCK.UNLOCK", "K", "O", "READ", "60000"],
        channel: |k, _| names::rwlock_channel(k),
        message: "0",
    },
    Kind {
        name: "write",
        acquire: &["RWLOCK.WLOCK", "K", "O", "60000"],
        contend: &["RWLOCK.RLOCK", "K", "O", "60000"],
        unlock: &["RWLOCK.UNLOCK", "K", "O", "WRITE", "60000"],
        channel: |k, _| names::rwlock_channel(k),
        message: "1",
    },
    Kind {
        name: "fair",
        acquire: &["FAIRLOCK.ACQUIRE", "K", "O", "60000", "60000"],
        contend: &["FAIRLOCK.ACQUIRE", "K", "O", "60000", "60000"],
        unlock: &["FAIRLOCK.UNLOCK", "K", "O", "60000"],
        // A fair unlock wakes only the head of the queue, on its own channel.
        channel: names::fair_waiter_channel,
        message: "0",
    },
];

fn fill(template: &[&str], key: &str, owner: &str) -> redis::Cmd {
    let mut cmd = redis::cmd(template[0]);
    for a in &template[1..] {
        cmd.arg(match *a {
            "K" => key,
            "O" => owner,
            other => other,
        });
    }
    cmd
}

fn run(c: &mut impl ConnectionLike, template: &[&str], key: &str, owner: &str) -> Result<Value, String> {
    fill(template, key, owner).query::<Value>(c).map_err(error_line)
}

/// True for a grant: nil, or `[-1, token]`.
fn granted(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Array(a) => a.first() == Some(&Value::Int(-1)),
        _ => false,
    }
}

/// True for a refusal: a positive PTTL, or `[pttl, -1]`.
fn refused(v: &Value) -> bool {
    match v {
        Value::Int(n) => *n > 0,
        Value::Array(a) => matches!(a.first(), Some(Value::Int(n)) if *n > 0),
        _ => false,
    }
}

/// Lock names half with a hash tag, half without.
fn key_names(kind: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| if i % 2 == 0 { format!("{kind}-{i}") } else { format!("app{{{i}}}:{kind}") }).collect()
}

fn exists(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("EXISTS").arg(key).query(c).expect("EXISTS")
}

#[test]
fn every_lock_kind_works_on_keys_spread_over_all_three_primaries() {
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let via = cluster.ports[0];
    for kind in KINDS {
        let mut used = BTreeSet::new();
        for key in key_names(kind.name, 24) {
            let primary = cluster.primary_for(&key, via);
            used.insert(primary.port);
            let mut direct = cluster.conn(primary.port);
            let r = run(&mut cc, kind.acquire, &key, "w1:1").unwrap_or_else(|e| panic!("{} {key}: {e}", kind.name));
            assert!(granted(&r), "{} {key}: {r:?}", kind.name);
            assert_eq!(exists(&mut direct, &key), 1, "the lock lives on the slot's primary");
            let r = run(&mut cc, kind.contend, &key, "w2:1").expect("contend");
            assert!(refused(&r), "{} {key}: another owner is refused, got {r:?}", kind.name);
            assert_eq!(run(&mut cc, kind.unlock, &key, "w1:1"), Ok(Value::Int(1)), "{} {key}", kind.name);
            assert_eq!(exists(&mut direct, &key), 0);
        }
        assert_eq!(used.len(), 3, "{}: the keys cover all three primaries", kind.name);
    }
}

/// Every key that exists on any primary, minus `seen` (which it then includes).
fn new_keys(cluster: &Cluster, seen: &mut BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for p in cluster.primaries(cluster.ports[0]) {
        for k in keys(&mut cluster.conn(p.port)) {
            if seen.insert(k.clone()) {
                out.push(k);
            }
        }
    }
    out
}

#[test]
fn every_key_and_channel_a_random_workload_creates_is_in_the_lock_keys_slot() {
    let cluster = Cluster::start();
    let mut cc = cluster.client();
    let sub = Subscriber::start(cluster.conn(cluster.ports[1]));
    let mut rng = SmallRng::seed_from_u64(9);
    let mut seen = BTreeSet::new();
    let mut all_keys = Vec::new();
    for (i, name) in ["orders", "{user:7}:lock", "cart-1", "x{tag}y", "inventory:42", "{a}"].iter().enumerate() {
        // LOCK.* and RWLOCK.* on distinct names (one key cannot be both kinds).
        let lock = name.to_string();
        let rw = if i % 2 == 0 { format!("{name}-rw") } else { format!("{name}:rw") };
        let fair = if i % 2 == 0 { format!("{name}-fair") } else { format!("{name}:fair") };
        let mut ops: Vec<Vec<String>> = vec![
            vec!["LOCK.ACQUIRE".into(), lock.clone(), "a".into(), "60000".into(), "TOKEN".into()],
            vec![
                "LOCK.UNLOCK".into(),
                lock.clone(),
                "a".into(),
                "60000".into(),
                "LATCH".into(),
                "r0".into(),
                "60000".into(),
            ],
            vec!["RWLOCK.RLOCK".into(), rw.clone(), "a".into(), "60000".into()],
            vec!["RWLOCK.RLOCK".into(), rw.clone(), "b".into(), "60000".into()],
            vec!["FAIRLOCK.ACQUIRE".into(), fair.clone(), "a".into(), "60000".into(), "60000".into()],
            vec!["FAIRLOCK.ACQUIRE".into(), fair.clone(), "b".into(), "60000".into(), "60000".into()],
        ];
        for j in 0..30 {
            let owner = ["a", "b", "c"][rng.gen_range(0..3)].to_string();
            let req = format!("r{j}");
            let op: Vec<&str> = match rng.gen_range(0..12) {
                0 => vec!["LOCK.ACQUIRE", &lock, &owner, "60000"],
                1 => vec!["LOCK.ACQUIRE", &lock, &owner, "60000", "TOKEN"],
                2 => vec!["LOCK.UNLOCK", &lock, &owner, "60000", "LATCH", &req, "60000"],
                3 => vec!["LOCK.RENEW", &lock, &owner, "60000"],
                4 => vec!["RWLOCK.RLOCK", &rw, &owner, "60000"],
                5 => vec!["RWLOCK.WLOCK", &rw, &owner, "60000"],
                6 => vec!["RWLOCK.UNLOCK", &rw, &owner, "READ", "60000"],
                7 => vec!["RWLOCK.UNLOCK", &rw, &owner, "WRITE", "60000"],
                8 => vec!["RWLOCK.RENEW", &rw, &owner, "60000"],
                9 => vec!["FAIRLOCK.ACQUIRE", &fair, &owner, "60000", "60000"],
                10 => vec!["FAIRLOCK.UNLOCK", &fair, &owner, "60000", "LATCH", &req, "60000"],
                _ => vec!["FAIRLOCK.CANCEL", &fair, &owner, "60000"],
            };
            ops.push(op.iter().map(|s| s.to_string()).collect());
        }
        ops.push(vec!["LOCK.FORCEUNLOCK".into(), lock.clone()]);
        ops.push(vec!["RWLOCK.FORCEUNLOCK".into(), rw.clone(), "READ".into()]);
        ops.push(vec!["FAIRLOCK.ACQUIRE".into(), fair.clone(), "z".into(), "60000".into(), "60000".into()]);
        for op in &ops {
            let mut cmd = redis::cmd(&op[0]);
            for a in &op[1..] {
                cmd.arg(a);
            }
            // Refusals and state errors are fine: only where the keys land matters here.
            let _ = cmd.query::<Value>(&mut cc);
        }
        let slots = [cluster.keyslot(&lock), cluster.keyslot(&rw), cluster.keyslot(&fair)];
        for k in new_keys(&cluster, &mut seen) {
            assert!(slots.contains(&cluster.keyslot(&k)), "{k} is not in the slot of {lock}, {rw} or {fair}");
            all_keys.push(k);
        }
        for (ch, _) in sub.take() {
            assert!(slots.contains(&cluster.keyslot(&ch)), "channel {ch} is not in the slot of {lock}, {rw} or {fair}");
        }
    }
    // The workload created every kind of derived key.
    let parts = ["redisson_lock_token:", "redisson_unlock_latch:", ":rwlock_timeout:", "redisson_lock_queue:"];
    for part in parts.into_iter().chain(["redisson_lock_timeout:"]) {
        assert!(all_keys.iter().any(|k| k.contains(part)), "no {part} key in {all_keys:?}");
    }
}

#[test]
fn a_command_sent_to_the_wrong_node_gets_moved_and_changes_nothing() {
    let cluster = Cluster::start();
    let via = cluster.ports[0];
    let key = "moved-key";
    let owner = cluster.primary_for(key, via);
    let slot = cluster.keyslot(key);
    let replica = cluster.replica_of(&owner.id, via);
    let wrong: Vec<u16> = cluster.primaries(via).iter().map(|n| n.port).filter(|p| *p != owner.port).collect();
    let commands: &[&[&str]] = &[
        &["LOCK.ACQUIRE", key, "o", "60000"],
        &["LOCK.ACQUIRE", key, "o", "60000", "BLOCK", "100", "TOKEN"],
        &["LOCK.UNLOCK", key, "o", "60000"],
        &["LOCK.RENEW", key, "o", "60000"],
        &["LOCK.FORCEUNLOCK", key],
        &["RWLOCK.RLOCK", key, "o", "60000"],
        &["RWLOCK.WLOCK", key, "o", "60000"],
        &["RWLOCK.UNLOCK", key, "o", "READ", "60000"],
        &["RWLOCK.RENEW", key, "o", "60000"],
        &["RWLOCK.FORCEUNLOCK", key, "WRITE"],
        &["FAIRLOCK.ACQUIRE", key, "o", "60000", "5000"],
        &["FAIRLOCK.UNLOCK", key, "o", "60000"],
        &["FAIRLOCK.CANCEL", key, "o", "5000"],
        &["FAIRLOCK.RENEW", key, "o", "60000"],
        &["FAIRLOCK.FORCEUNLOCK", key],
        &["LOCK.INFO", key],
    ];
    let expected = format!("MOVED {slot} 127.0.0.1:{}", owner.port);
    for port in wrong.iter().chain([&replica.port]) {
        let mut c = cluster.conn(*port);
        for cmd in commands {
            assert_eq!(call(&mut c, cmd), Err(expected.clone()), "{cmd:?} on node {port}");
        }
        assert_eq!(keys(&mut c), Vec::<String>::new());
    }
    assert_eq!(call(&mut cluster.conn(owner.port), commands[0]), Ok(Value::Nil), "the owner accepts it");
}

#[test]
fn unlock_messages_reach_a_subscriber_on_another_node() {
    let cluster = Cluster::start();
    let via = cluster.ports[0];
    let mut cc = cluster.client();
    for kind in KINDS {
        let key = format!("pub-{}", kind.name);
        let owner = cluster.primary_for(&key, via);
        let other = cluster.ports.iter().copied().find(|p| *p != owner.port).expect("another node");
        let sub = Subscriber::start(cluster.conn(other));
        assert!(granted(&run(&mut cc, kind.acquire, &key, "w1").expect("acquire")));
        assert!(refused(&run(&mut cc, kind.contend, &key, "w2").expect("contend")));
        assert_eq!(run(&mut cc, kind.unlock, &key, "w1"), Ok(Value::Int(1)));
        let got = sub.take_n(1, Duration::from_secs(3));
        assert_eq!(got, msgs(&[(&(kind.channel)(&key, "w2"), kind.message)]), "{} seen from node {other}", kind.name);
    }
}

#[test]
fn block_waiters_on_two_primaries_are_granted_on_unlock() {
    let cluster = Cluster::start();
    let via = cluster.ports[0];
    let mut cc = cluster.client();
    let first = "block-a".to_string();
    let p1 = cluster.primary_for(&first, via).port;
    let second = (0..100)
        .map(|i| format!("block-b{i}"))
        .find(|k| cluster.primary_for(k, via).port != p1)
        .expect("a key on another primary");
    for k in [&first, &second] {
        assert_eq!(ok_c(&mut cc, &["LOCK.ACQUIRE", k, "holder", "60000"]), Value::Nil);
    }
    let started = Instant::now();
    let waiters: Vec<_> = [first.clone(), second.clone()]
        .into_iter()
        .map(|k| {
            let mut c = cluster.client();
            std::thread::spawn(move || {
                let mut r = redis::cmd("LOCK.ACQUIRE");
                r.arg(&k).arg("waiter").arg("60000").arg("BLOCK").arg("20000");
                (r.query::<Value>(&mut c).map_err(error_line), Instant::now())
            })
        })
        .collect();
    for k in [&first, &second] {
        common::parked::wait_blocked(&mut cluster.conn(cluster.primary_for(k, via).port), 1);
    }
    assert!(waiters.iter().all(|w| !w.is_finished()), "both waiters are parked");
    let unlocked = Instant::now();
    for k in [&first, &second] {
        assert_eq!(ok_c(&mut cc, &["LOCK.UNLOCK", k, "holder", "60000"]), Value::Int(1));
    }
    for w in waiters {
        let (reply, at) = w.join().expect("waiter thread");
        assert_eq!(reply, Ok(Value::Nil));
        assert!(at >= unlocked && at - started < Duration::from_secs(10));
    }
    for k in [&first, &second] {
        let mut c = cluster.conn(cluster.primary_for(k, via).port);
        assert_eq!(hgetall(&mut c, k), map(&[("waiter", "1")]));
    }
}

fn ok_c(c: &mut impl ConnectionLike, args: &[&str]) -> Value {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(c).unwrap_or_else(|e| panic!("{args:?}: {}", error_line(e)))
}

/// The rate limiter (issue 30): limiters on all three primaries, each with its five keys (the
/// client's too) in its name's slot; a call on another node is MOVED and writes nothing; a
/// parked client is served by a release on its own primary.
#[test]
fn rate_limiters_keep_their_keys_in_their_names_slot_on_every_primary() {
    let cluster = Cluster::start();
    let via = cluster.ports[0];
    let mut cc = cluster.client();
    let mut used = BTreeSet::new();
    for name in key_names("rl", 24) {
        let primary = cluster.primary_for(&name, via);
        used.insert(primary.port);
        ok_c(&mut cc, &["RATELIMITER.TRYSETRATE", &name, "PER_CLIENT", "2", "60000"]);
        assert_eq!(ok_c(&mut cc, &["RATELIMITER.ACQUIRE", &name, "2", "CLIENT", "c1"]), Value::Nil);
        assert!(refused(&ok_c(&mut cc, &["RATELIMITER.ACQUIRE", &name, "1", "CLIENT", "c1"])));
        let mut made = keys(&mut cluster.conn(primary.port));
        ok_c(&mut cc, &["RATELIMITER.SETRATE", &name, "OVERALL", "3", "60000", "CLIENT", "c1"]);
        assert_eq!(ok_c(&mut cc, &["RATELIMITER.ACQUIRE", &name, "1"]), Value::Nil);
        made.extend(keys(&mut cluster.conn(primary.port)));
        assert_eq!(ok_c(&mut cc, &["RATELIMITER.RELEASE", &name, "1"]), Value::Int(3));
        // This limiter's keys (the hash, the client's value and grants, then the overall ones).
        made.retain(|k| k.starts_with(&name) || k.starts_with(&format!("{{{name}}}")));
        made.sort();
        made.dedup();
        assert_eq!(made.len(), 5, "{made:?}");
        for k in made {
            assert_eq!(cluster.keyslot(&k), cluster.keyslot(&name), "{k} is not in the slot of {name}");
        }
    }
    assert_eq!(used.len(), 3, "the limiters cover all three primaries");
    let name = "rl-moved";
    let owner = cluster.primary_for(name, via);
    let expected = format!("MOVED {} 127.0.0.1:{}", cluster.keyslot(name), owner.port);
    for p in cluster.primaries(via).iter().filter(|p| p.port != owner.port) {
        let mut c = cluster.conn(p.port);
        for cmd in [
            &["RATELIMITER.TRYSETRATE", name, "OVERALL", "1", "1000"][..],
            &["RATELIMITER.ACQUIRE", name, "1", "BLOCK", "100"],
            &["RATELIMITER.RELEASE", name, "1"],
            &["SYNC.INFO", name],
        ] {
            assert_eq!(call(&mut c, cmd), Err(expected.clone()), "{cmd:?} on {}", p.port);
        }
    }
    ok_c(&mut cc, &["RATELIMITER.TRYSETRATE", name, "OVERALL", "1", "600000"]);
    ok_c(&mut cc, &["RATELIMITER.ACQUIRE", name, "1"]);
    let mut waiter = cluster.client();
    let w = std::thread::spawn(move || {
        let r = redis::cmd("RATELIMITER.ACQUIRE").arg(name).arg(1).arg("BLOCK").arg(20000).query::<Value>(&mut waiter);
        r.map_err(error_line)
    });
    common::parked::wait_blocked(&mut cluster.conn(owner.port), 1);
    assert_eq!(ok_c(&mut cc, &["RATELIMITER.RELEASE", name, "1"]), Value::Int(1));
    assert_eq!(w.join().expect("waiter"), Ok(Value::Nil));
}
