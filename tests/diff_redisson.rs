//! Redisson's own scripts, sent by `EVALSHA` exactly as each Redisson release sends them, to a
//! plain server (Lua) and to one with `lockmod.redisson-scripts native`: replies byte for byte
//! in RESP2 and RESP3, keyspaces and published messages must match, for every release group
//! (releases sending the same bodies), and `INFO commandstats` must show that the module's
//! commands ran, not Lua.
//!
//! How each body is called (which KEYS, which ARGV) is written here from Redisson's sources,
//! independently of the module's table. Other clients' writes (a wrong type, a corrupt hold
//! count, an odd unlock latch, a queued waiter without a deadline) are mixed in, so the runs
//! also cover the calls the module answers by running the script itself.

mod common;

use common::diff::env;
use common::names;
use common::redisson::{calls, field, info, ScriptPair, Scripts};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What a body is, from the Redisson method that sends it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    Acquire,
    FencedToken,
    FencedNil,
    Unlock { pubarg: bool, latch: bool },
    Renew,
    RenewTask,
    Force { pubarg: bool },
    RLock,
    WLock,
    UnlockRead { pubarg: bool, latch: bool },
    UnlockWrite { pubarg: bool, latch: bool },
    ForceRead { pubarg: bool },
    ForceWrite { pubarg: bool },
    ReadRenew,
    ReadRenewTask,
    ReadRenewOwnerTask,
    IsLocked,
    FairAcquire,
    FairTry,
    FairUnlock { pubarg: bool, latch: bool },
    FairForce { pubarg: bool },
    FairCancel,
}

/// Each body's method, read off Redisson's sources at the releases that send it.
fn role(sha: &str) -> Role {
    use Role::*;
    let (p, l) = (true, true);
    match &sha[..5] {
        "dad0f" | "149c5" => Acquire,
        "49bab" => FencedToken,
        "46b55" => FencedNil,
        "3ffe2" => Unlock { pubarg: false, latch: false },
        "778ce" => Unlock { pubarg: p, latch: false },
        "68664" => Unlock { pubarg: p, latch: l },
        "8e19a" => Renew,
        "6a3d3" => RenewTask,
        "7e9c8" => Force { pubarg: false },
        "605e3" => Force { pubarg: p },
        "95553" => RLock,
        "6306b" => WLock,
        "f5469" => UnlockRead { pubarg: false, latch: false },
        "92a54" => UnlockRead { pubarg: p, latch: false },
        "5947c" | "6e1b1" => UnlockRead { pubarg: p, latch: l },
        "baa63" => UnlockWrite { pubarg: false, latch: false },
        "319a1" => UnlockWrite { pubarg: p, latch: false },
        "d29c5" | "21f5f" => UnlockWrite { pubarg: p, latch: l },
        "23f9b" => ForceRead { pubarg: false },
        "27dbe" => ForceRead { pubarg: p },
        "23639" => ForceWrite { pubarg: false },
        "2e2cb" => ForceWrite { pubarg: p },
        "65639" => ReadRenew,
        "1affe" | "d6564" => ReadRenewTask,
        "38d2b" => ReadRenewOwnerTask,
        "8ad44" => IsLocked,
        "762bf" | "929de" | "8f6ed" => FairAcquire,
        "aa0a2" | "d2050" => FairTry,
        "35d32" => FairUnlock { pubarg: false, latch: false },
        "14f85" => FairUnlock { pubarg: p, latch: false },
        "ca303" | "367f8" => FairUnlock { pubarg: p, latch: l },
        "95cdf" => FairForce { pubarg: false },
        "047c1" | "71ed1" => FairForce { pubarg: p },
        "d1dde" => FairCancel,
        other => panic!("a body this test does not know: {other}"),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Reentrant,
    ReadWrite,
    Fair,
}

fn family(class: &str) -> Family {
    match class {
        "RedissonReadLock.java" | "RedissonWriteLock.java" | "renewal/ReadLockTask.java" => Family::ReadWrite,
        "RedissonFairLock.java" => Family::Fair,
        _ => Family::Reentrant,
    }
}

const NAMES: &[&str] = &["lock", "{tagged}", "a{b}c"];
const OWNERS: &[&str] = &[
    "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:1",
    "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:2",
    "0d9e8f7a-6b5c-4d3e-8f1a-abcdefabcdef:77",
];
const LEASES: &[&str] = &["15", "40", "120", "30000"];

/// A random call and whether its integer replies are times.
struct Call {
    sha: String,
    keys: Vec<String>,
    argv: Vec<String>,
    ttl: bool,
}

struct Gen {
    latches: u32,
}

impl Gen {
    /// KEYS and ARGV as Redisson builds them for `role` (RedissonLock & co.).
    fn call(&mut self, r: &mut SmallRng, sha: &str, role: Role, name: &str, owner: &str) -> Call {
        use Role::*;
        let lease = LEASES[r.gen_range(0..LEASES.len())].to_string();
        let s = |x: &str| x.to_string();
        let publish = |pubarg: bool, v: &mut Vec<String>| {
            if pubarg {
                v.push(s("PUBLISH"));
            }
        };
        let latch_ms = s(["20", "500"][r.gen_range(0..2)]);
        let wait = s(["300", "5000"][r.gen_range(0..2)]);
        if r.gen_bool(0.6) {
            self.latches += 1;
        }
        let request = format!("{:016x}", self.latches);
        let latch = || names::latch(name, &request);
        let now = s("<now>");
        let (keys, argv, ttl) = match role {
            Acquire => (vec![s(name)], vec![lease, s(owner)], true),
            FencedToken | FencedNil => (vec![s(name), names::token(name)], vec![lease, s(owner)], true),
            Unlock { pubarg, latch: l } => {
                let mut keys = vec![s(name), names::lock_channel(name)];
                let mut argv = vec![s("0"), lease, s(owner)];
                publish(pubarg, &mut argv);
                if l {
                    keys.push(latch());
                    argv.push(latch_ms);
                }
                (keys, argv, false)
            }
            Renew => (vec![s(name)], vec![lease, s(owner)], false),
            RenewTask => {
                // LockTask batches every lock it renews; usually one, sometimes two.
                if r.gen_bool(0.2) {
                    let other = NAMES[(NAMES.iter().position(|n| *n == name).unwrap_or(0) + 1) % NAMES.len()];
                    (vec![s(name), s(other)], vec![lease, s(owner), s(owner)], false)
                } else {
                    (vec![s(name)], vec![lease, s(owner)], false)
                }
            }
            Force { pubarg } => {
                let mut argv = vec![s("0")];
                publish(pubarg, &mut argv);
                (vec![s(name), names::lock_channel(name)], argv, false)
            }
            RLock => (
                vec![s(name), names::read_timeout_prefix(name, owner)],
                vec![lease, s(owner), format!("{owner}:write")],
                true,
            ),
            WLock => (vec![s(name)], vec![lease, format!("{owner}:write")], true),
            UnlockRead { pubarg, latch: l } => {
                let mut keys = vec![
                    s(name),
                    names::rwlock_channel(name),
                    names::read_timeout_prefix(name, owner),
                    names::key_prefix(name),
                ];
                let mut argv = vec![s("0"), s(owner)];
                publish(pubarg, &mut argv);
                if l {
                    keys.push(latch());
                    argv.push(latch_ms);
                }
                (keys, argv, false)
            }
            UnlockWrite { pubarg, latch: l } => {
                let mut keys = vec![s(name), names::rwlock_channel(name)];
                let mut argv = vec![s("1"), lease, format!("{owner}:write")];
                publish(pubarg, &mut argv);
                if l {
                    keys.push(latch());
                    argv.push(latch_ms);
                }
                (keys, argv, false)
            }
            ForceRead { pubarg } | ForceWrite { pubarg } => {
                let mut argv = vec![s(if matches!(role, ForceRead { .. }) { "0" } else { "1" })];
                publish(pubarg, &mut argv);
                (vec![s(name), names::rwlock_channel(name)], argv, false)
            }
            ReadRenew | ReadRenewTask => (vec![s(name), names::key_prefix(name)], vec![lease, s(owner)], false),
            ReadRenewOwnerTask => (vec![s(name), names::key_prefix(name)], vec![lease, s("1"), s(owner)], false),
            IsLocked => (vec![s(name)], vec![], false),
            FairAcquire => (
                vec![s(name), names::fair_queue(name), names::fair_timeouts(name)],
                vec![lease, s(owner), wait, now],
                true,
            ),
            FairTry => (
                vec![s(name), names::fair_queue(name), names::fair_timeouts(name)],
                vec![lease, s(owner), now, wait],
                true,
            ),
            FairUnlock { pubarg, latch: l } => {
                let mut keys =
                    vec![s(name), names::fair_queue(name), names::fair_timeouts(name), names::lock_channel(name)];
                let mut argv = vec![s("0"), lease, s(owner), now];
                publish(pubarg, &mut argv);
                if l {
                    keys.push(latch());
                    argv.push(latch_ms);
                }
                (keys, argv, false)
            }
            FairForce { pubarg } => {
                let mut argv = vec![s("0"), now];
                publish(pubarg, &mut argv);
                (
                    vec![s(name), names::fair_queue(name), names::fair_timeouts(name), names::lock_channel(name)],
                    argv,
                    false,
                )
            }
            FairCancel => (vec![names::fair_queue(name), names::fair_timeouts(name)], vec![s(owner), wait], false),
        };
        Call { sha: sha.to_string(), keys, argv, ttl }
    }
}

/// Another client's write, the same on both sides: states the scripts and the module must
/// agree on (or the module must hand to the script).
fn foreign(r: &mut SmallRng, fam: Family, name: &str, owner: &str) -> Vec<String> {
    let s = |x: &str| x.to_string();
    match (fam, r.gen_range(0..6)) {
        (_, 0) => vec![s("DEL"), s(name)],
        (_, 1) => vec![s("SET"), s(name), s("not-a-lock"), s("PX"), s("60")],
        (Family::ReadWrite, 2) => vec![s("PEXPIRE"), format!("{}:1", names::read_timeout_prefix(name, owner)), s("30")],
        (_, 2) => vec![s("HSET"), s(name), s(owner), s("many")],
        (Family::Fair, 3) => vec![s("RPUSH"), names::fair_queue(name), s("no-deadline:1")],
        (Family::Fair, 4) => vec![s("DEL"), names::fair_queue(name), names::fair_timeouts(name)],
        (_, 3) => vec![s("SET"), names::latch(name, &format!("{:016x}", r.gen_range(0..4))), s("7"), s("PX"), s("80")],
        _ => vec![s("PING")],
    }
}

/// The native commands of each family, for the commandstats check.
fn commands(fam: Family) -> &'static [&'static str] {
    match fam {
        Family::Reentrant => &["lock.acquire", "lock.unlock", "lock.renew", "lock.forceunlock"],
        Family::ReadWrite => &["rwlock.rlock", "rwlock.wlock", "rwlock.unlock", "rwlock.renew", "rwlock.forceunlock"],
        Family::Fair => {
            &["fairlock.acquire", "fairlock.unlock", "fairlock.cancel", "fairlock.forceunlock", "lock.renew"]
        }
    }
}

fn run_family(fam: Family, seed: u64) {
    // One family at a time: four servers per family on a small machine are plenty, and the
    // fewer processes compete, the closer each pair of calls runs.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let scripts = Scripts::load();
    let (seed, ops) = (env("DIFF_SEED", seed), env("DIFF_OPS", 300));
    eprintln!("DIFF_SEED={seed} DIFF_OPS={ops} (per release group)");
    let mut r = SmallRng::seed_from_u64(seed);
    let mut pair = ScriptPair::new(&scripts);
    let mut g = Gen { latches: 0 };
    let mut tested = 0;
    for (releases, shas) in &scripts.groups {
        // The group's bodies of this family; the fair lock renews with the reentrant renewal.
        let mine: Vec<&String> = shas
            .iter()
            .filter(|sha| {
                let f = family(&scripts.body(sha).class);
                f == fam || (fam == Family::Fair && matches!(role(sha), Role::Renew | Role::RenewTask))
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        tested += 1;
        eprintln!("group {}..{}: {} bodies", releases[0], releases[releases.len() - 1], mine.len());
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut pair.nc).expect("RESETSTAT");
        pair.scripts_sent = 0;
        for i in 0..ops {
            let name = NAMES[r.gen_range(0..NAMES.len())];
            let owner = OWNERS[r.gen_range(0..OWNERS.len())];
            let resp3 = r.gen_bool(0.3);
            if r.gen_ratio(1, 25) {
                let cmd = foreign(&mut r, fam, name, owner);
                pair.step(&cmd, resp3, false);
            } else {
                let sha = mine[r.gen_range(0..mine.len())];
                let role = role(sha);
                if role == Role::IsLocked && r.gen_bool(0.8) {
                    continue;
                }
                let c = g.call(&mut r, sha, role, name, owner);
                pair.eval(&c.sha, &c.keys, &c.argv, resp3, c.ttl);
            }
            if r.gen_ratio(1, 15) {
                std::thread::sleep(std::time::Duration::from_millis(r.gen_range(1..50)));
            }
            if i % 50 == 49 {
                pair.check();
            }
        }
        pair.check();
        assert_ran_natively(&mut pair, fam, releases);
        pair.flush();
    }
    assert!(tested >= 3, "only {tested} release groups have bodies of this family");
}

/// The module's commands ran for the scripts (the EVALSHA calls that remain are the ones the
/// module left to Lua or answered by running the script), and they were most of them.
fn assert_ran_natively(pair: &mut ScriptPair, fam: Family, releases: &[String]) {
    let stats = info(&mut pair.nc, "commandstats");
    let native = field(&mut pair.nc, "redisson_native_total");
    let fallbacks = field(&mut pair.nc, "redisson_fallbacks");
    let left = field(&mut pair.nc, "redisson_left_to_lua");
    let sent = pair.scripts_sent;
    let what = format!("releases {releases:?}: sent {sent}, native {native}, fallbacks {fallbacks}, left {left}");
    eprintln!("  {what}");
    assert_eq!(native + fallbacks + left, sent, "{what}");
    assert_eq!(calls(&stats, "evalsha"), fallbacks + left, "{what}");
    let module_calls: u64 = [
        "lock.acquire",
        "lock.unlock",
        "lock.renew",
        "lock.forceunlock",
        "rwlock.rlock",
        "rwlock.wlock",
        "rwlock.unlock",
        "rwlock.renew",
        "rwlock.forceunlock",
        "fairlock.acquire",
        "fairlock.unlock",
        "fairlock.cancel",
        "fairlock.forceunlock",
    ]
    .iter()
    .map(|c| calls(&stats, c))
    .sum();
    assert_eq!(module_calls, native + fallbacks, "{what}");
    assert!(native * 10 >= sent * 8, "{what}: under 80% ran natively");
    for c in commands(fam).iter().take(2) {
        assert!(calls(&stats, c) > 0, "{what}: {c} never ran");
    }
}

#[test]
fn redissons_reentrant_and_fenced_lock_scripts_run_natively_with_the_luas_replies() {
    run_family(Family::Reentrant, 0x5c1);
}

#[test]
fn redissons_read_write_lock_scripts_run_natively_with_the_luas_replies() {
    run_family(Family::ReadWrite, 0x5c2);
}

#[test]
fn redissons_fair_lock_scripts_run_natively_with_the_luas_replies() {
    run_family(Family::Fair, 0x5c3);
}
