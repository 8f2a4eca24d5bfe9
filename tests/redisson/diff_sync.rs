//! Redisson's synchronizer scripts (`RSemaphore`, `RPermitExpirableSemaphore`,
//! `RCountDownLatch`), sent by `EVALSHA` exactly as each Redisson release sends them, to a
//! plain server (Lua) and to one with `lockmod.redisson-scripts native`: replies byte for byte
//! in RESP2 and RESP3, keyspaces and published messages must match, for every release group
//! (releases sending the same bodies).
//!
//! How each body is called is written in `common/sync_calls.rs` from Redisson's sources,
//! independently of the module's table. Other clients' writes (a wrong type, a value Lua's
//! `tonumber` reads but the module does not, a huge count, a permit whose lease ended by a
//! skewed clock) are mixed in, so the runs also cover the calls the module leaves to Lua.

use crate::common;

use common::diff::env;
use common::redisson::{Raw, Scripts};
use common::sync_calls::{self as sc, call, new_id, role, sent_by, Choices, Family, Role, NO_LEASE};
use common::sync_pair::{self, SyncPair};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const NAMES: &[&str] = &["sem", "{tagged}", "a{b}c"];

/// The release groups as (releases, bodies of `fam`), bodies in SHA1 order.
fn groups(scripts: &Scripts, fam: Family) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for (releases, shas) in &scripts.groups {
        let mine: Vec<String> = shas.iter().filter(|s| sent_by(s, fam, &releases[0])).cloned().collect();
        match out.iter_mut().find(|g| g.1 == mine) {
            Some(g) => g.0.extend(releases.iter().cloned()),
            None => out.push((releases.clone(), mine)),
        }
    }
    out
}

/// Permit ids each synchronizer was sent in acquires (the ones a client may release).
#[derive(Default)]
struct Held(BTreeMap<String, Vec<[u8; 16]>>, BTreeMap<String, Vec<i64>>);

impl Held {
    fn pick(&self, r: &mut SmallRng, name: &str, n: usize) -> Vec<[u8; 16]> {
        let known = self.0.get(name).cloned().unwrap_or_default();
        (0..n)
            .map(|_| if !known.is_empty() && r.gen_bool(0.85) { known[r.gen_range(0..known.len())] } else { new_id(r) })
            .collect()
    }

    /// An expiry at least 30 ms from every other lease end of `name` sent in the last
    /// minute: a native server returns each at its own deadline, the Lua at the next call,
    /// and the test settles each before the next ends (`SyncPair::settle`).
    fn spaced(&mut self, name: &str, mut until: i64) -> i64 {
        let v = self.1.entry(name.to_string()).or_default();
        let now = common::diff::now_ms();
        v.retain(|t| *t > now - 60_000);
        while v.iter().any(|t| (t - until).abs() < 30) {
            until += 30;
        }
        v.push(until);
        until
    }

    fn note(&mut self, name: &str, ids: &[[u8; 16]]) {
        let v = self.0.entry(name.to_string()).or_default();
        v.extend_from_slice(ids);
        if v.len() > 12 {
            v.drain(..v.len() - 12);
        }
    }
}

/// A random call of body `sha` on `name`.
fn draw(r: &mut SmallRng, sha: &str, name: &str, held: &mut Held) -> sc::Call {
    let now = common::diff::now_ms();
    let lease = [40, 150, 30_000, 0][r.gen_range(0..4)];
    let until = if lease == 0 { NO_LEASE.to_string() } else { held.spaced(name, now + lease).to_string() };
    let role = role(sha);
    let permits = match role {
        Role::SemAdd { .. } | Role::PAdd { .. } => r.gen_range(-3..=5),
        Role::PAcquireOne { .. } => {
            if r.gen_ratio(1, 20) {
                2
            } else {
                1
            }
        }
        Role::TrySetCount { .. } => r.gen_range(0..=3),
        _ => r.gen_range(0..=4),
    };
    let ids = match role {
        Role::PAcquireOne { .. } => vec![new_id(r)],
        Role::PAcquireIds => (0..r.gen_range(1..=3)).map(|_| new_id(r)).collect(),
        Role::PReleaseEach | Role::PReleaseAll => {
            let n = r.gen_range(1..=3);
            held.pick(r, name, n)
        }
        Role::PReleaseOne { .. } | Role::PUpdateLease { .. } | Role::PLeaseTime => held.pick(r, name, 1),
        _ => vec![],
    };
    if matches!(role, Role::PAcquireOne { .. } | Role::PAcquireIds) {
        held.note(name, &ids);
    }
    let c = Choices {
        permits,
        ids,
        until,
        now,
        ttl_ms: [80, 30_000][r.gen_range(0..2)],
        publish: if r.gen_ratio(1, 10) { "publish" } else { "PUBLISH" }.to_string(),
    };
    call(sha, name, &c)
}

/// Another client's write, the same on both sides.
fn foreign(r: &mut SmallRng, fam: Family, name: &str, held: &Held) -> Vec<Vec<u8>> {
    let s = |x: &str| x.as_bytes().to_vec();
    let z = sc::timeouts(name);
    // Odd states last a moment (`PX`), as another client's would until it cleans up: the
    // calls meanwhile are left to Lua or answered as the Lua does.
    let px = |mut v: Vec<Vec<u8>>| {
        v.extend([s("PX"), s("90")]);
        v
    };
    match r.gen_range(0..9) {
        0 => vec![s("DEL"), s(name)],
        1 => px(vec![s("SET"), s(name), s("not-a-number")]),
        2 => px(vec![s("SET"), s(&z), s("not-a-zset")]),
        // Read by Lua's `tonumber`, not as an integer by the module.
        3 => px(vec![s("SET"), s(name), s([" 3", "2.0", "0x4", "1e2"][r.gen_range(0..4)])]),
        // Where Lua's doubles and the module's integers part. (Not under the expirable
        // semaphore: the module's timer, returning an expired permit at its deadline, would
        // publish such a count exactly where the Lua's later reclaim publishes `1e+17`.)
        4 if fam != Family::Expirable => px(vec![
            s("SET"),
            s(name),
            s(["9007199254740993", "100000000000000000", "-9007199254740993"][r.gen_range(0..3)]),
        ]),
        5 => vec![s("SET"), s(name), s(["0", "-1", "1", "5"][r.gen_range(0..4)])],
        // A permit whose lease a client with a skewed clock ended: expired, not reclaimed.
        6 if fam == Family::Expirable => {
            let id = held.0.get(name).and_then(|v| v.first().copied()).unwrap_or([7; 16]);
            let past = common::diff::now_ms() - r.gen_range(1..1000);
            vec![s("ZADD"), s(&z), past.to_string().into_bytes(), id.to_vec()]
        }
        7 if fam == Family::Expirable => vec![s("DEL"), s(&z)],
        _ => vec![s("PING")],
    }
}

fn run_family(fam: Family, seed: u64) {
    // One family at a time, of this file and of diff_redisson.rs (common::diff).
    let _serial = common::diff::one_run_at_a_time();
    let scripts = sync_pair::load();
    let groups = groups(&scripts, fam);
    let (seed, ops) = (env("DIFF_SEED", seed), env("DIFF_OPS", 3000));
    let per_group = (ops as usize).div_ceil(groups.len());
    eprintln!("DIFF_SEED={seed} DIFF_OPS={ops} ({fam:?}: {} release groups, {per_group} each)", groups.len());
    let mut r = SmallRng::seed_from_u64(seed);
    let mut pair = SyncPair::new(&scripts, &[]);
    pair.names = NAMES.iter().map(|n| n.to_string()).collect();
    let mut held = Held::default();
    for (releases, mine) in &groups {
        eprintln!("group {}..{}: {} bodies", releases[0], releases[releases.len() - 1], mine.len());
        pair.settle_with = mine
            .iter()
            .find(|s| matches!(role(s), Role::PAvailable { .. }))
            .map(|s| (s.clone(), role(s) == Role::PAvailable { p: true }));
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut pair.nc).expect("RESETSTAT");
        pair.scripts_sent = 0;
        let mut to_lua_rows = 0;
        for i in 0..per_group {
            let name = NAMES[r.gen_range(0..NAMES.len())];
            let resp3 = r.gen_bool(0.3);
            if r.gen_ratio(1, 25) {
                let cmd = foreign(&mut r, fam, name, &held);
                pair.step(&cmd, resp3, false);
            } else {
                let sha = &mine[r.gen_range(0..mine.len())];
                to_lua_rows += u64::from(stays_lua(sha));
                pair.built_at = Some(common::diff::now_ms());
                let c = draw(&mut r, sha, name, &mut held);
                let (l, _) = pair.step(&c.evalsha(), resp3, c.ttl);
                forget_refused(&mut held, name, &c, &l);
            }
            if r.gen_ratio(1, 15) {
                pair.idle(r.gen_range(1..60));
            }
            if i % (env("DIFF_CHECK_EVERY", 50) as usize) == 0 {
                pair.check();
            }
        }
        pair.check();
        report(&mut pair, releases, to_lua_rows);
        pair.flush();
    }
    eprintln!("{fam:?}: {} steps, {} resyncs, {} settled", pair.steps, pair.resyncs, pair.settled);
    assert!(pair.resyncs * 10 <= pair.steps, "the machine is too loaded for this test: {} resyncs", pair.resyncs);
}

/// An acquire refused took no id: it is not worth releasing later (mostly).
fn forget_refused(held: &mut Held, name: &str, c: &sc::Call, reply: &Raw) {
    let refused = match reply {
        Raw::Bulk(_, Some(b)) => b.first() == Some(&b':'),
        Raw::Bulk(_, None) | Raw::Line(b'_', _) => true,
        _ => false,
    };
    if refused && matches!(role(&c.sha), Role::PAcquireOne { .. } | Role::PAcquireIds) {
        if let Some(v) = held.0.get_mut(name) {
            let n = c.argv.len().min(3);
            v.truncate(v.len().saturating_sub(n.min(v.len())));
        }
    }
}

/// The bodies that stay Lua (docs/configuration.md says why).
fn stays_lua(sha: &str) -> bool {
    matches!(
        role(sha),
        Role::SemReleaseIfExists
            | Role::LatchDelete { .. }
            | Role::PTotal { .. }
            | Role::PLeaseTime
            | Role::PAdd { .. }
    )
}

/// What ran where, from the native server's counters: the module's commands ran for the
/// scripts (the EVALSHA calls that remain are the ones left to Lua or answered by running
/// the script), and they were most of those it maps.
fn report(pair: &mut SyncPair, releases: &[String], to_lua_rows: u64) {
    let native = common::redisson::field(&mut pair.nc, "redisson_native_total");
    let fallbacks = common::redisson::field(&mut pair.nc, "redisson_fallbacks");
    let left = common::redisson::field(&mut pair.nc, "redisson_left_to_lua");
    let sent = pair.scripts_sent;
    let what = format!(
        "releases {}..{}: sent {sent} ({to_lua_rows} of bodies that stay Lua), native {native}, fallbacks \
         {fallbacks}, left {left}",
        releases[0],
        releases[releases.len() - 1]
    );
    eprintln!("  {what}");
    let stats = common::redisson::info(&mut pair.nc, "commandstats");
    assert_eq!(native + fallbacks + left, sent, "{what}");
    assert_eq!(common::redisson::calls(&stats, "evalsha"), fallbacks + left, "{what}");
    let module_calls: u64 = stats
        .iter()
        .filter(|(k, _)| {
            ["cmdstat_semaphore.", "cmdstat_psemaphore.", "cmdstat_countdown."].iter().any(|p| k.starts_with(p))
        })
        .map(|(k, _)| common::redisson::calls(&stats, &k["cmdstat_".len()..]))
        .sum();
    assert_eq!(module_calls, native + fallbacks, "{what}");
    let mapped = sent - to_lua_rows;
    assert!(native * 10 >= mapped * 7, "{what}: under 70% of the mapped bodies' calls ran natively");
}

#[test]
fn redissons_semaphore_scripts_answer_alike_on_both_servers() {
    run_family(Family::Semaphore, 0x5e1);
}

#[test]
fn redissons_expirable_semaphore_scripts_answer_alike_on_both_servers() {
    run_family(Family::Expirable, 0x5e2);
}

#[test]
fn redissons_count_down_latch_scripts_answer_alike_on_both_servers() {
    run_family(Family::Latch, 0x5e3);
}
