//! Every body of Redisson's synchronizer scripts (`RSemaphore`, `RPermitExpirableSemaphore`,
//! `RCountDownLatch`, every release), with the KEYS and ARGV its method sends, on every kind
//! of synchronizer state, run by a plain server (Lua) and by one with
//! `lockmod.redisson-scripts native`: replies (RESP2, and RESP3 on a few states), keyspaces
//! (TTLs and lease ends within the tolerance) and published messages must be equal.
//!
//! The random differential run (`tests/redisson/diff_sync.rs`) mixes a release group's bodies on
//! the states they make. This run puts each body in front of every state a name can be in: absent,
//! zero, one and many permits (or a count), below zero, with a TTL; counts at and past what Lua's
//! doubles hold exactly (10^14, 2^53, 2^63 - 1); values Lua's `tonumber` reads and the module does
//! not (`" 3"`, `"2.0"`), a non-number, another type; and for the expirable semaphore, each of
//! those beside leases held by the caller and by another client, live, expired and not yet
//! reclaimed, or without a lease, and another type under the timeout zset. Permit ids are the
//! client's (Redisson sends them), so replies naming one are compared as they are, byte for byte.
//!
//! The run also measures which calls ran natively (`INFO lockmod`): on the states a body's own
//! class makes (ordinary use, `sync_states::ordinary`) every call must; every call run as Lua
//! must be counted under exactly one `redisson_lua_<cause>`. The summary printed at the end
//! says which (body, state) pairs went to Lua, and why.

use crate::common;

use common::diff::now_ms;
use common::redisson::raw_match;
use common::script_findings::{counters, Case, Findings};
use common::sync_calls::{self as sc, role, Family, Role};
use common::sync_pair::{self, SyncPair};
use common::sync_states::{self as st, Leases, State, Value};

/// `availablePermits` (3.22+): reclaims on the Lua side what the native timer returned.
const AVAILABLE: &str = "26b3972b2c9e617556282f404cb79709d746a713";

/// The bodies whose native command reclaims expired permits and arms the reclaim timer.
fn arms_timer(r: Role) -> bool {
    use Role::*;
    matches!(
        r,
        PAcquireOne { .. }
            | PAcquireIds
            | PReleaseOne { .. }
            | PReleaseEach
            | PReleaseAll
            | PAvailable { .. }
            | PAcquired { .. }
            | PUpdateLease { .. }
            | PSetPermits { .. }
    )
}

fn expired(c: &mut redis::Connection) -> usize {
    let z = sc::timeouts(st::NAME);
    let t: String = redis::cmd("TYPE").arg(&z).query(c).expect("TYPE");
    if t != "zset" {
        return 0;
    }
    redis::cmd("ZCOUNT").arg(&z).arg(0).arg(now_ms()).query(c).expect("ZCOUNT")
}

/// Whether the native side returns expired permits left after a call: a native call arms the
/// reclaim timer (issue 26), and any call naming `{name}:timeout` has it armed after it
/// (issue 29), for a semaphore whose count is an integer (Redis' own form: no sign, space or
/// point).
fn native_reclaims(c: &mut redis::Connection) -> bool {
    let v: Option<String> = redis::cmd("GET").arg(st::NAME).query(c).unwrap_or(None);
    v.is_some_and(|v| v.parse::<i64>().is_ok_and(|n| n.to_string() == v))
}

/// The native side's timer returns expired permits left after a call at once (at their
/// deadline), where the Lua side waits for the next call that reclaims: that call
/// (`availablePermits`) is made on the Lua side, so both are compared after every deadline was
/// processed.
fn settle(pair: &mut SyncPair) {
    if expired(&mut pair.lc) == 0 || !native_reclaims(&mut pair.nc) {
        return;
    }
    for _ in 0..100 {
        if expired(&mut pair.nc) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    if expired(&mut pair.nc) > 0 {
        return;
    }
    let z = sc::timeouts(st::NAME);
    let ch = sc::semaphore_channel(st::NAME);
    let _: redis::Value = redis::cmd("EVALSHA")
        .arg(AVAILABLE)
        .arg(3)
        .arg(st::NAME)
        .arg(&z)
        .arg(&ch)
        .arg(now_ms())
        .arg("PUBLISH")
        .query(&mut pair.lc)
        .expect("availablePermits");
}

/// The states lower-case `publish` and RESP3 are sent on, besides `PUBLISH` in RESP2.
fn forms(state: State, takes_publish: bool) -> Vec<(&'static str, bool)> {
    let mut v = vec![("PUBLISH", false)];
    if takes_publish && state.value == Value::Many && matches!(state.leases, Leases::None | Leases::Mine) {
        v.push(("publish", false));
    }
    let resp3 = match state.value {
        Value::One => matches!(state.leases, Leases::None | Leases::Mine | Leases::TheirsNoLease),
        Value::Absent => state.leases == Leases::None,
        _ => false,
    };
    if resp3 {
        v.push(("PUBLISH", true));
    }
    v
}

#[test]
fn every_redisson_sync_body_answers_as_its_lua_on_every_synchronizer_state() {
    let started = std::time::Instant::now();
    let scripts = sync_pair::load();
    let mut pair = SyncPair::new(&scripts, &[]);
    pair.fast_messages();
    let mut f = Findings::default();
    // `SYNC_STATES_ONLY=sha-prefix,...` runs those bodies alone (to look into one).
    let only = std::env::var("SYNC_STATES_ONLY").ok();
    let picked = |sha: &str| only.as_deref().is_none_or(|o| o.split(',').any(|p| sha.starts_with(p)));
    for body in scripts.bodies.iter().filter(|b| picked(&b.sha)) {
        let r = role(&body.sha);
        let expirable = sc::families(&body.sha).contains(&Family::Expirable);
        for state in st::states(expirable) {
            for variant in st::variants(r) {
                let takes_publish = st::takes_publish(&st::call(&body.sha, &variant, "PUBLISH", 0).argv);
                for (publish, resp3) in forms(state, takes_publish) {
                    pair.flush_keys();
                    pair.setup(&st::setup(state, now_ms()));
                    let c = st::call(&body.sha, &variant, publish, now_ms());
                    let before = counters(&mut pair.nc);
                    let (lua, nat) = pair.call_both(&c.evalsha(), resp3);
                    let after = counters(&mut pair.nc);
                    let native = after.0 > before.0;
                    if (native && arms_timer(r)) || expirable {
                        settle(&mut pair);
                    }
                    let case = Case {
                        what: format!(
                            "{} {r:?} [{}] on {:?}/{:?} ({publish}{})",
                            &body.sha[..8],
                            variant.label,
                            state.value,
                            state.leases,
                            if resp3 { ", RESP3" } else { "" }
                        ),
                        body: format!("{} {r:?}", &body.sha[..8]),
                        state: format!("{:?}/{:?} [{}]", state.value, state.leases, variant.label),
                        same: raw_match(&lua, &nat, c.ttl),
                        keyspace: pair.difference(),
                        lua: &lua,
                        native: &nat,
                        ordinary: st::ordinary(&body.sha, state, &variant),
                    };
                    f.note(case, before, after);
                }
            }
        }
    }
    f.report(started.elapsed(), 2_000, "SYNC_STATES_ONLY");
}
