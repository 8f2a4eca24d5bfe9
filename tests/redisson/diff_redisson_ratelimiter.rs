//! Redisson's rate-limiter bodies, sent by `EVALSHA` exactly as each Redisson release sends
//! them, to a server running them as Lua and to one with `lockmod.redisson-scripts native`,
//! mixed with the module's own `RATELIMITER.*` commands on the same limiter (run alike on both
//! sides) and with other clients' writes (a deleted value, a value Lua's `tonumber` reads and
//! the module does not, deleted grants): replies byte for byte, keyspaces (members of the
//! bodies' grants byte for byte, a native command's grants by their permits: their random
//! bytes are each server's own; TTLs within the tolerance) and keyspace events must match
//! after every step, for every release group (releases sending the same bodies). ARGV's time
//! (and the native commands' `NOW`) is a clock of the test's, the same on both sides, moving
//! 1 to 300 ms a step (each grant its own millisecond) and now and then past a whole window.
//!
//! Each body call on the native side is counted exactly once: natively, or as Lua under one
//! cause (`INFO lockmod`).

use crate::common;

use std::collections::BTreeSet;

use common::diff::env;
use common::rate_pair::{shown, RatePair};
use common::ratelimiter::{self as rl, evalsha};
use common::redisson::{info, raw_match, Scripts};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const NAME: &str = "lim";
const CLIENT: &str = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const LONG: i64 = 600_000;

/// The bodies one release group sends (`RRateLimiter` and its helpers).
struct Group {
    releases: Vec<String>,
    shas: BTreeSet<String>,
}

fn groups(scripts: &Scripts) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for (releases, shas) in &scripts.groups {
        let mine: BTreeSet<String> =
            shas.iter().filter(|s| scripts.body(s).class != "RedissonGcra.java").cloned().collect();
        match out.iter_mut().find(|g| g.shas == mine) {
            Some(g) => g.releases.extend(releases.iter().cloned()),
            None => out.push(Group { releases: releases.clone(), shas: mine }),
        }
    }
    out
}

fn b(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

struct Run<'a> {
    pair: &'a mut RatePair,
    rng: SmallRng,
    group: &'a Group,
    now: i64,
    per_client: bool,
    keys: Vec<String>,
    steps: usize,
    bodies_sent: u64,
    next_random: u64,
}

impl Run<'_> {
    fn has(&self, sha: &str) -> bool {
        self.group.shas.contains(sha)
    }

    fn one_of(&self, list: &[&'static str]) -> &'static str {
        list.iter().find(|s| self.has(s)).copied().unwrap_or_else(|| panic!("no body of {list:?}"))
    }

    fn random(&mut self) -> Vec<u8> {
        self.next_random += 1;
        let mut r = self.next_random.to_be_bytes().to_vec();
        r.extend_from_slice(&[0xd7; 8]);
        // Before 3.21 Redisson sent 8 random bytes.
        if self.rng.gen_ratio(1, 4) {
            r.truncate(8);
            r[0] = 0xd8;
        }
        self.pair.sent.insert(r.clone());
        r
    }

    /// The value key and grant zset of the state in use.
    fn state(&self) -> (String, String) {
        if self.per_client {
            (self.keys[2].clone(), self.keys[4].clone())
        } else {
            (self.keys[1].clone(), self.keys[3].clone())
        }
    }

    /// A body's call, or a native command, or another client's write.
    fn draw(&mut self) -> (Vec<Vec<u8>>, bool) {
        self.now += if self.rng.gen_ratio(1, 25) { 2_500 } else { self.rng.gen_range(1..300) };
        let now = self.now;
        let k = self.keys.clone();
        let permits = if self.rng.gen_ratio(1, 15) { 0 } else { self.rng.gen_range(1..=4) };
        let ka = if self.rng.gen_bool(0.5) { 0 } else { LONG };
        let ty = if self.per_client { "1" } else { "0" };
        let client = |mut v: Vec<Vec<u8>>| {
            v.extend([b("CLIENT"), b(CLIENT), b("NOW"), b(now)]);
            v
        };
        let (vk, pk) = self.state();
        match self.rng.gen_range(0..100) {
            0..=39 => {
                let random = self.random();
                (evalsha(self.one_of(&rl::ACQUIRE), &k, &[b(permits), b(now), random]), true)
            }
            40..=49 => (evalsha(rl::AVAILABLE, &k, &[b(now)]), true),
            50..=56 if self.has(rl::RELEASE) => (evalsha(rl::RELEASE, &k, &[b(self.rng.gen_range(1..=3))]), true),
            57..=60 if self.has(rl::SET_OR_UPDATE) => {
                let rate = self.rng.gen_range(3..=12);
                let keep = if self.rng.gen_ratio(4, 5) { "1" } else { "0" };
                (evalsha(rl::SET_OR_UPDATE, &k, &[b(rate), b(1000), b(ty), b(ka), b(now), b(keep), b("1")]), true)
            }
            61..=62 => {
                let sha = self.one_of(&rl::TRY_SET_RATE);
                let mut argv = vec![b(8), b(1000), b(ty)];
                if sha != rl::TRY_SET_RATE[0] {
                    argv.push(b(ka));
                }
                (evalsha(sha, &[NAME.into()], &argv), true)
            }
            63 => {
                let sha = self.one_of(&rl::SET_RATE);
                let keys = if sha == rl::SET_RATE[0] {
                    vec![NAME.into(), rl::suffix(NAME, "value"), rl::suffix(NAME, "permits")]
                } else {
                    k.clone()
                };
                let mut argv = vec![b(self.rng.gen_range(3..=12)), b(1000), b(ty)];
                if sha == rl::SET_RATE[2] || sha == rl::SET_RATE[3] {
                    argv.push(b(ka));
                }
                (evalsha(sha, &keys, &argv), true)
            }
            64..=65 => {
                let opt = ["", "NX", "XX", "GT", "LT"][self.rng.gen_range(0..5)];
                (evalsha(rl::EXPIRE, &k, &[b(LONG + self.rng.gen_range(0..1000)), b(opt)]), true)
            }
            66 => (evalsha(rl::CLEAR_EXPIRE, &k, &[]), true),
            67..=76 => (client(vec![b("RATELIMITER.ACQUIRE"), b(NAME), b(permits.max(1))]), false),
            77..=80 => (client(vec![b("RATELIMITER.AVAILABLE"), b(NAME)]), false),
            81..=84 => (client(vec![b("RATELIMITER.RELEASE"), b(NAME), b(self.rng.gen_range(1..=3))]), false),
            85 => {
                let mode = if self.per_client { "PER_CLIENT" } else { "OVERALL" };
                let mut v = vec![b("RATELIMITER.SETRATE"), b(NAME), b(mode), b(self.rng.gen_range(3..=12)), b(1000)];
                v.extend([b("KEEPSTATE"), b("CLIENT"), b(CLIENT), b("NOW"), b(now)]);
                (v, false)
            }
            86..=87 => (vec![b("DEL"), b(&vk)], false),
            88 => (vec![b("SET"), b(&vk), b(" 3")], false),
            89 => (vec![b("SET"), b(&vk), b(self.rng.gen_range(0..=8))], false),
            90 => (vec![b("DEL"), b(&pk)], false),
            _ => {
                let random = self.random();
                (evalsha(self.one_of(&rl::ACQUIRE), &k, &[b(permits), b(now), random]), true)
            }
        }
    }

    fn step(&mut self) {
        let (args, body) = self.draw();
        let resp3 = self.rng.gen_ratio(1, 8);
        let (lua, nat) = self.pair.call(&args, resp3);
        self.steps += 1;
        self.bodies_sent += u64::from(body);
        if !raw_match(&lua, &nat, false) {
            panic!(
                "{:?} step {} {} (resp3 {resp3})\n  lua:    {lua:?}\n  native: {nat:?}",
                self.group.releases,
                self.steps,
                shown(&args)
            );
        }
        if let Some(d) = self.pair.difference(None) {
            panic!("{:?} step {} {}: {d}", self.group.releases, self.steps, shown(&args));
        }
    }
}

fn counted(c: &mut redis::Connection) -> u64 {
    let m = info(c, "lockmod");
    m.iter()
        .filter(|(k, _)| k.as_str() == "lockmod_redisson_native_total" || k.starts_with("lockmod_redisson_lua_"))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

fn native_total(c: &mut redis::Connection) -> u64 {
    info(c, "lockmod").get("lockmod_redisson_native_total").and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[test]
fn redisson_ratelimiter_bodies_and_native_commands_answer_alike_on_one_limiter() {
    let seed = env("DIFF_SEED", 30);
    let steps = env("DIFF_OPS", 160) as usize;
    eprintln!("DIFF_SEED={seed} DIFF_OPS={steps}");
    let scripts = rl::load();
    let mut pair = RatePair::new(&scripts);
    let all = groups(&scripts);
    assert!(all.len() >= 8, "{} release groups", all.len());
    let (mut sent, mut native) = (0, 0);
    for (i, group) in all.iter().enumerate() {
        pair.flush();
        let rng = SmallRng::seed_from_u64(seed + i as u64);
        let per_client = i % 2 == 1;
        let keys = rl::keys(NAME, CLIENT);
        let mut run = Run {
            pair: &mut pair,
            rng,
            group,
            now: 1_700_000_000_000,
            per_client,
            keys,
            steps: 0,
            bodies_sent: 0,
            next_random: (i as u64) << 32,
        };
        let before = (counted(&mut run.pair.nc), native_total(&mut run.pair.nc));
        // The limiter as its release's `trySetRate` makes it.
        let sha = run.one_of(&rl::TRY_SET_RATE);
        let mut argv = vec![b(5), b(1000), b(if per_client { "1" } else { "0" })];
        if sha != rl::TRY_SET_RATE[0] {
            argv.push(b(if sha == rl::TRY_SET_RATE[2] { LONG } else { 0 }));
        }
        let first = evalsha(sha, &[NAME.into()], &argv);
        let (l, n) = run.pair.call(&first, false);
        assert_eq!(l, n);
        run.bodies_sent += 1;
        for _ in 0..steps {
            run.step();
        }
        let bodies = run.bodies_sent;
        let after = (counted(&mut pair.nc), native_total(&mut pair.nc));
        assert_eq!(after.0 - before.0, bodies, "{:?}: every body call counted once", group.releases);
        sent += bodies;
        native += after.1 - before.1;
        eprintln!(
            "{} .. {}: {} steps, {} body calls, {} natively",
            group.releases[0],
            group.releases[group.releases.len() - 1],
            steps,
            bodies,
            after.1 - before.1
        );
    }
    eprintln!("{sent} body calls, {native} ran natively");
    // Other clients' odd writes send a few to Lua; the rest run natively.
    assert!(native * 10 >= sent * 8, "{native} of {sent} ran natively");
}
