//! How Redisson calls each of its lock scripts: which method a body belongs to (its role) and
//! the KEYS and ARGV that method sends, written from Redisson's sources independently of the
//! module's table. Shared by the random differential run (`tests/redisson/diff_redisson.rs`) and
//! the run over every kind of lock state (`tests/redisson/redisson_states.rs`).

use rand::rngs::SmallRng;
use rand::Rng;

use super::names;

/// What a body is, from the Redisson method that sends it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
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
pub fn role(sha: &str) -> Role {
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
pub enum Family {
    Reentrant,
    ReadWrite,
    Fair,
}

pub fn family(class: &str) -> Family {
    match class {
        "RedissonReadLock.java" | "RedissonWriteLock.java" | "renewal/ReadLockTask.java" => Family::ReadWrite,
        "RedissonFairLock.java" => Family::Fair,
        _ => Family::Reentrant,
    }
}

/// A random call and whether its integer replies are times.
pub struct Call {
    pub sha: String,
    pub keys: Vec<String>,
    pub argv: Vec<String>,
    pub ttl: bool,
}

/// The free choices of a call: drawn at random by the differential run, fixed by the state run.
#[derive(Clone, Debug)]
pub struct Choices {
    pub lease: String,
    pub latch_ms: String,
    pub wait: String,
    /// The unlock latch's request id.
    pub request: String,
    /// The publish command passed as an argument: Redisson sends `PUBLISH`; ports of it to
    /// other languages that reuse its scripts may send `publish`.
    pub publish: String,
    /// A second lock a batched renewal (`LockTask`) renews in the same call.
    pub second: Option<String>,
}

/// The leases the runs draw from: some short enough to run out during a run.
pub const LEASES: &[&str] = &["15", "40", "120", "30000"];

pub struct Gen {
    pub latches: u32,
}

impl Gen {
    /// A random call of `role` on `name` by `owner`; `names` are the lock names in play.
    pub fn call(&mut self, r: &mut SmallRng, sha: &str, role: Role, name: &str, owner: &str, names: &[&str]) -> Call {
        if r.gen_bool(0.6) {
            self.latches += 1;
        }
        // LockTask batches every lock it renews; usually one, sometimes two.
        let second = (role == Role::RenewTask && r.gen_bool(0.2))
            .then(|| names[(names.iter().position(|n| *n == name).unwrap_or(0) + 1) % names.len()].to_string());
        let c = Choices {
            lease: LEASES[r.gen_range(0..LEASES.len())].to_string(),
            latch_ms: ["20", "500"][r.gen_range(0..2)].to_string(),
            wait: ["300", "5000"][r.gen_range(0..2)].to_string(),
            request: format!("{:016x}", self.latches),
            publish: if r.gen_ratio(1, 10) { "publish" } else { "PUBLISH" }.to_string(),
            second,
        };
        call(sha, role, name, owner, &c)
    }
}

/// KEYS and ARGV as Redisson builds them for `role` (RedissonLock & co.).
pub fn call(sha: &str, role: Role, name: &str, owner: &str, c: &Choices) -> Call {
    use Role::*;
    let s = |x: &str| x.to_string();
    let lease = c.lease.clone();
    let publish = |pubarg: bool, v: &mut Vec<String>| {
        if pubarg {
            v.push(c.publish.clone());
        }
    };
    let latch_ms = c.latch_ms.clone();
    let wait = c.wait.clone();
    let latch = || names::latch(name, &c.request);
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
        RenewTask => match &c.second {
            Some(other) => (vec![s(name), s(other)], vec![lease, s(owner), s(owner)], false),
            None => (vec![s(name)], vec![lease, s(owner)], false),
        },
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
        FairAcquire => {
            (vec![s(name), names::fair_queue(name), names::fair_timeouts(name)], vec![lease, s(owner), wait, now], true)
        }
        FairTry => {
            (vec![s(name), names::fair_queue(name), names::fair_timeouts(name)], vec![lease, s(owner), now, wait], true)
        }
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
            (vec![s(name), names::fair_queue(name), names::fair_timeouts(name), names::lock_channel(name)], argv, false)
        }
        FairCancel => (vec![names::fair_queue(name), names::fair_timeouts(name)], vec![s(owner), wait], false),
    };
    Call { sha: sha.to_string(), keys, argv, ttl }
}
