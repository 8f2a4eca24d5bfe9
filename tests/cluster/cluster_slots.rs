//! Keys outside the name's slot (issue 36), on a Redis Cluster (3 primaries + 3 replicas from
//! scripts/cluster.sh): a name with an empty or unclosed hash tag (`a{}b`, `{}`, `x{y`) or a
//! `}` alone (`a}b`) hashes as a whole, so Redisson's derived names (`name:value`,
//! `{a}b}:value`, `redisson_lock__channel:a{}b`) land in other slots. Every command whose
//! Redisson script names such a key or channel in its KEYS is refused with the `CROSSSLOT`
//! the cluster gives that script, on every kind, and writes nothing on any node; the commands
//! whose scripts name only the name itself work as Redisson's do.

use crate::common;

use common::cluster::Cluster;
use common::ratelimiter::{self as rl, evalsha};
use common::*;

const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// A command (`K` the name) and the derived names its Redisson script names in KEYS: it is
/// refused exactly when one of them lies outside the name's slot.
type Derived = fn(&str) -> Vec<String>;

#[rustfmt::skip]
const CHECKED: &[(&[&str], Derived)] = &[
    (&["LOCK.ACQUIRE", "K", "o", "60000", "TOKEN"], |k| vec![names::token(k)]),
    (&["LOCK.UNLOCK", "K", "o", "60000"], |k| vec![names::lock_channel(k)]),
    (&["LOCK.FORCEUNLOCK", "K"], |k| vec![names::lock_channel(k)]),
    (&["RWLOCK.RLOCK", "K", "o", "60000"], |k| vec![names::read_timeout_prefix(k, "o")]),
    (&["RWLOCK.UNLOCK", "K", "o", "READ", "60000"], |k| vec![names::rwlock_channel(k)]),
    (&["RWLOCK.FORCEUNLOCK", "K", "WRITE"], |k| vec![names::rwlock_channel(k)]),
    (&["FAIRLOCK.ACQUIRE", "K", "o", "60000", "5000"], |k| vec![names::fair_queue(k), names::fair_timeouts(k)]),
    (&["FAIRLOCK.UNLOCK", "K", "o", "60000"], |k| vec![names::fair_queue(k), names::fair_timeouts(k)]),
    (&["SEMAPHORE.TRYSETPERMITS", "K", "3"], |k| vec![names::prefix("redisson_sc", k)]),
    (&["SEMAPHORE.RELEASE", "K", "1"], |k| vec![names::prefix("redisson_sc", k)]),
    (&["PSEMAPHORE.TRYSETPERMITS", "K", "3"], |k| vec![names::prefix("redisson_sc", k)]),
    (&["PSEMAPHORE.ACQUIRE", "K", "1", "60000"], |k| vec![names::suffix(k, "timeout")]),
    (&["COUNTDOWN.TRYSETCOUNT", "K", "3"], |k| vec![format!("redisson_countdownlatch__channel__{{{k}}}")]),
    (&["COUNTDOWN.DECR", "K"], |k| vec![format!("redisson_countdownlatch__channel__{{{k}}}")]),
    (&["RATELIMITER.ACQUIRE", "K", "1"], |k| vec![names::suffix(k, "value"), names::suffix(k, "permits")]),
    (&["RATELIMITER.ACQUIRE", "K", "1", "BLOCK", "100"], |k| vec![names::suffix(k, "value")]),
    (&["RATELIMITER.AVAILABLE", "K"], |k| vec![names::suffix(k, "value")]),
    (&["RATELIMITER.RELEASE", "K", "1"], |k| vec![names::suffix(k, "value")]),
    (&["RATELIMITER.SETRATE", "K", "OVERALL", "5", "1000", "KEEPSTATE"], |k| vec![names::suffix(k, "value")]),
    (&["LOCK.INFO", "K"], |k| vec![names::token(k)]),
];

/// A command's reply as it should be.
type Check = fn(&Value) -> bool;

/// Commands whose Redisson scripts name only the name: they work, and write only the name.
#[rustfmt::skip]
const ALLOWED: &[(&[&str], Check)] = &[
    (&["LOCK.ACQUIRE", "K", "o", "60000"], |v| *v == Value::Nil),
    (&["LOCK.RENEW", "K", "o", "60000"], |v| *v == Value::Int(1)),
    (&["RATELIMITER.TRYSETRATE", "K", "OVERALL", "10", "1000"], |v| *v == Value::Int(1)),
];

fn fill(template: &[&str], name: &str) -> Vec<String> {
    template.iter().map(|a| if *a == "K" { name.to_string() } else { a.to_string() }).collect()
}

fn run(c: &mut redis::Connection, args: &[String]) -> Result<Value, String> {
    call(c, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Every key on every primary.
fn everything(cluster: &Cluster, via: u16) -> Vec<(u16, String)> {
    let mut all = Vec::new();
    for p in cluster.primaries(via) {
        all.extend(keys(&mut cluster.conn(p.port)).into_iter().map(|k| (p.port, k)));
    }
    all.sort();
    all
}

#[test]
fn derived_names_outside_the_slot_are_refused_with_crossslot_and_change_nothing() {
    let cluster = Cluster::start();
    let via = cluster.ports[0];
    let scripts = rl::load();
    for name in ["a{}b", "{}", "x{y", "a}b"] {
        for p in cluster.primaries(via) {
            ok(&mut cluster.conn(p.port), &["FLUSHALL"]);
        }
        let node = cluster.primary_for(name, via);
        let value = rl::suffix(name, "value");
        assert_ne!(cluster.keyslot(&value), cluster.keyslot(name), "{name}: the test needs a broken tag");
        let mut c = cluster.conn(node.port);
        ok(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "native"]);
        rl::load_on(&mut c, &scripts);
        for (template, good) in ALLOWED {
            let args = fill(template, name);
            let got = run(&mut c, &args);
            assert!(got.as_ref().is_ok_and(good), "{args:?}: {got:?}");
        }
        let mut before = everything(&cluster, via);
        assert!(before.iter().all(|(_, k)| k == name), "{name}: only the name was written: {before:?}");
        let mut refused = 0;
        for (template, derived) in CHECKED {
            let args = fill(template, name);
            let elsewhere = derived(name).iter().any(|d| cluster.keyslot(d) != cluster.keyslot(name));
            let got = run(&mut c, &args);
            if elsewhere {
                assert_eq!(got, Err(CROSSSLOT.to_string()), "{args:?}");
                refused += 1;
                assert_eq!(everything(&cluster, via), before, "{args:?} wrote");
            } else {
                assert_ne!(got, Err(CROSSSLOT.to_string()), "{args:?}: its names are in the slot");
                before = everything(&cluster, via);
            }
        }
        assert!(refused >= CHECKED.len() - 2, "{name}: {refused} refused");
        // Redisson's own bodies get the same from the cluster (run natively or not).
        let keys = rl::keys(name, "java-client");
        let acquire = evalsha(rl::ACQUIRE[3], &keys, &[b"1".to_vec(), b"1700000000000".to_vec(), vec![7; 16]]);
        assert_eq!(rl::run(&mut c, &acquire), Err(CROSSSLOT.to_string()), "{name}: Redisson's tryAcquire");
        let after = everything(&cluster, via);
        assert!(after.iter().all(|(_, k)| cluster.keyslot(k) == cluster.keyslot(name)), "{name}: {after:?}");
    }
    // A name with its own tag keeps every derived name in its slot: nothing refused.
    let name = "a{t}b";
    let mut c = cluster.conn(cluster.primary_for(name, via).port);
    ok(&mut c, &["RATELIMITER.TRYSETRATE", name, "OVERALL", "10", "1000"]);
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", name, "1"]), Value::Nil);
    let fenced = ok(&mut c, &["LOCK.ACQUIRE", name, "o", "60000", "TOKEN"]);
    assert!(matches!(&fenced, Value::Array(v) if v.first() == Some(&Value::Int(-1))), "{fenced:?}");
    for k in keys(&mut c) {
        assert_eq!(cluster.keyslot(&k), cluster.keyslot(name), "{k}");
    }
}
