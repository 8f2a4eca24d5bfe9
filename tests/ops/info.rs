//! `INFO lockmod`: counters after a scripted sequence, and `CONFIG RESETSTAT`.

use crate::common;

use std::thread;
use std::time::Duration;

use common::parked::{lockmod_ints, wait_blocked};
use common::*;

#[test]
fn counters_follow_a_scripted_sequence_exactly() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o1", "30000"]); // acquired
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o1", "30000"]); // acquired, reentry
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o2", "30000"]); // refused
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o2", "30000", "BLOCK", "50"]); // refused, parked, timeout
    ok(&mut c, &["LOCK.RENEW", "a", "o1", "30000"]); // renewed
    ok(&mut c, &["LOCK.RENEW", "a", "o2", "30000"]); // not renewed
    ok(&mut c, &["LOCK.UNLOCK", "a", "o1", "30000"]); // released (partial)
    let mut w = s.conn();
    let t = thread::spawn(move || ok(&mut w, &["LOCK.ACQUIRE", "a", "o3", "30000", "BLOCK", "5000"]));
    common::parked::wait_blocked(&mut c, 1);
    assert_eq!(lockmod_ints(&mut c)["blocked_now"], 1);
    ok(&mut c, &["LOCK.UNLOCK", "a", "o1", "30000"]); // released; hand-off to o3 (acquired)
    assert_eq!(t.join().expect("thread"), Value::Nil);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "a"]); // forced
    ok(&mut c, &["LOCK.ACQUIRE", "b", "o1", "30"]); // acquired; its lease will run out
    thread::sleep(Duration::from_millis(60));
    ok(&mut c, &["EXISTS", "b"]); // the lazy expiry of a held lock
    let info = lockmod_ints(&mut c);
    let want = [
        ("acquired", 4),
        ("refused", 3),
        ("reentries", 1),
        ("released", 2),
        ("forced", 1),
        ("renewed", 1),
        ("blocked_now", 0),
        ("blocked_total", 2),
        ("handoffs", 1),
        ("block_timeouts", 1),
        ("block_disconnects", 0),
        ("expired_while_held", 1),
    ];
    for (k, v) in want {
        assert_eq!(info.get(k).copied(), Some(v), "lockmod_{k} in {info:?}");
    }
    assert!(info["memory_bytes"] > 0);
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let info = lockmod_ints(&mut c);
    for (k, _) in want {
        assert_eq!(info.get(k).copied(), Some(0), "lockmod_{k} after RESETSTAT");
    }
}

#[test]
fn a_dropped_parked_client_is_counted_and_memory_returns() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "a", "o1", "30000"]);
    // The first round sizes the module's tables; after it, nothing may grow.
    let mut before = 0;
    for round in 0..11 {
        if round == 1 {
            before = lockmod_ints(&mut c)["memory_bytes"];
        }
        let mut w = s.conn();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).expect("CLIENT ID");
        let t = thread::spawn(move || call(&mut w, &["LOCK.ACQUIRE", "a", "o2", "30000", "BLOCK", "0"]));
        // Parked before the kill, however slow the thread (a kill before it parks counts nothing).
        wait_blocked(&mut c, 1);
        ok(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
        assert!(t.join().expect("thread").is_err());
        assert_eq!(lockmod_ints(&mut c)["block_disconnects"], round + 1);
    }
    let after = lockmod_ints(&mut c);
    assert_eq!(after["blocked_now"], 0);
    assert!(after["memory_bytes"] <= before, "module memory grew from {before} to {}", after["memory_bytes"]);
}

/// Every field of `INFO lockmod` is described in docs/configuration.md ("INFO lockmod"), the
/// Redisson per-command counters by their common prefix.
#[test]
fn every_info_field_is_documented() {
    let s = Server::start();
    let mut c = s.conn();
    let text: String = redis::cmd("INFO").arg("lockmod").query(&mut c).expect("INFO lockmod");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let docs = std::fs::read_to_string(&path).expect("docs/configuration.md");
    let section = docs.split("## INFO lockmod").nth(1).and_then(|s| s.split("\n## ").next()).expect("section");
    let fields: Vec<&str> = text.lines().filter_map(|l| l.split_once(':')).map(|(k, _)| k).collect();
    assert!(fields.len() > 15, "{text}");
    for f in fields {
        let documented = if f.starts_with("lockmod_redisson_") {
            section.contains("`lockmod_redisson_*`")
        } else {
            section.contains(&format!("`{f}`"))
        };
        assert!(documented, "{f} is not described in docs/configuration.md, section INFO lockmod");
    }
}

/// The fencing counters are counters too: `CONFIG RESETSTAT` zeroes them, and leaves the era
/// (a gauge: the state now) as it was.
#[test]
fn resetstat_zeroes_the_fencing_counters_and_keeps_the_era() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "f", "o1", "30000", "TOKEN"]);
    ok(&mut c, &["DEBUG", "RELOAD"]); // an era starts: its file written, the counter moved
    common::fenced::wait_moved(&mut c);
    let counters = ["fencing_moved", "fencing_events", "fencing_era_file_writes"];
    let info = lockmod_ints(&mut c);
    for k in counters {
        assert!(info[k] > 0, "lockmod_{k} in {info:?}");
    }
    let era = info["fencing_era"];
    assert!(era > 0, "an era after the reload: {info:?}");
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    let info = lockmod_ints(&mut c);
    for k in counters.into_iter().chain(["fencing_era_file_errors"]) {
        assert_eq!(info[k], 0, "lockmod_{k} after RESETSTAT");
    }
    assert_eq!(info["fencing_era"], era, "the era is state, not a count");
}
