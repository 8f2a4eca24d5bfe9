//! `PSEMAPHORE.RELEASE` of many ids, and Redisson's `tryRelease(ids)` bodies run natively
//! (issue 29): the work grows linearly with the ids. Each id is looked up once among the
//! command's own arguments (the store hands Redis an argument's own string when it can); a
//! scan of every argument per lookup made 64k ids cost seconds. Not a timed test: the module
//! counts its argument lookups (`INFO lockmod`, `lockmod_args_probed`), deterministically;
//! `make bench` part 9d has the time per id.

use crate::common;

use common::diff::now_ms;
use common::*;

const Z: &str = "{p}:timeout";
const CH: &str = "redisson_sc:{p}";

/// `tryRelease(ids)` from Redisson 3.41 (all or nothing) and 3.23.4-3.40.2 (those still held).
const RELEASE_ALL: &str = "cf3ab";
const RELEASE_EACH: &str = "bb41a";

fn probed(c: &mut redis::Connection) -> i64 {
    let text: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO");
    let v = text.lines().find_map(|l| l.strip_prefix("lockmod_args_probed:")).expect("lockmod_args_probed");
    v.trim().parse().expect("integer")
}

fn unhex(h: &str) -> Vec<u8> {
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex")).collect()
}

/// `k` permits leased on `p` (available: none left): their ids, as hex.
fn lease(c: &mut redis::Connection, k: usize) -> Vec<String> {
    ok(c, &["DEL", "p", Z]);
    ok(c, &["PSEMAPHORE.TRYSETPERMITS", "p", &k.to_string()]);
    let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(k).arg(600_000).query(c).expect("granted");
    assert_eq!(ids.len(), k);
    ids
}

fn state(c: &mut redis::Connection) -> (Option<String>, i64) {
    let n: Option<String> = redis::cmd("GET").arg("p").query(c).expect("GET");
    let z: i64 = redis::cmd("ZCARD").arg(Z).query(c).expect("ZCARD");
    (n, z)
}

#[test]
fn releasing_k_ids_looks_each_up_once_however_many_there_are() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    for k in [1_000usize, 65_536] {
        let ids = lease(&mut c, k);
        sub.take();
        let before = probed(&mut c);
        let mut release = redis::cmd("PSEMAPHORE.RELEASE");
        release.arg("p").arg(&ids);
        let n: i64 = release.query(&mut c).expect("released");
        let probes = probed(&mut c) - before;
        assert_eq!(n, k as i64);
        assert_eq!(state(&mut c), (Some(k.to_string()), 0));
        assert_eq!(sub.take(), msgs(&[(CH, &k.to_string())]));
        // One lookup per id (each is checked once, its hex decoded: no argument of the
        // command); a scan of every argument per lookup made this k * k / 2.
        assert!(probes as usize <= 2 * k, "{probes} argument probes releasing {k} ids");
    }
}

#[test]
fn redissons_try_release_bodies_run_natively_look_each_id_up_once() {
    let bodies = common::sync_pair::load();
    let s = Server::start_with(true, &["--lockmod.redisson-scripts", "native"]);
    let mut c = s.conn();
    let sub = s.subscriber();
    for prefix in [RELEASE_ALL, RELEASE_EACH] {
        let body = &bodies.by_prefix(prefix).text;
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(body).query(&mut c).expect("SCRIPT LOAD");
        for k in [1_000usize, 65_536] {
            let ids = lease(&mut c, k);
            sub.take();
            let before = probed(&mut c);
            let natively = common::redisson::field(&mut c, "redisson_native_total");
            let mut call = redis::cmd("EVALSHA");
            call.arg(&sha).arg(3).arg("p").arg(CH).arg(Z).arg(k).arg(now_ms()).arg("publish");
            for id in &ids {
                call.arg(unhex(id));
            }
            let n: i64 = call.query(&mut c).expect("released");
            let probes = probed(&mut c) - before;
            assert_eq!(n, k as i64, "{prefix}");
            assert_eq!(
                common::redisson::field(&mut c, "redisson_native_total"),
                natively + 1,
                "{prefix}: run natively"
            );
            assert_eq!(state(&mut c), (Some(k.to_string()), 0), "{prefix}");
            assert_eq!(sub.take(), msgs(&[(CH, &k.to_string())]), "{prefix}");
            // The ids are the call's own arguments here: each found by one probe, or two.
            assert!(probes as usize <= 2 * k, "{prefix}: {probes} argument probes releasing {k} ids");
        }
    }
}
