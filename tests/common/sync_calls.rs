//! How Redisson calls each of its synchronizer scripts (`RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch`): the method a body belongs to (its role)
//! and the KEYS and ARGV that method sends, written from Redisson's sources at the releases
//! that send each body, independently of the module's table. Shared by the random
//! differential run (`tests/redisson/diff_sync.rs`) and the run over every kind of synchronizer
//! state (`tests/redisson/redisson_sync_states.rs`).
//!
//! Permit ids travel as Redisson sends them: 16 raw bytes (it decodes its hex ids).

use rand::rngs::SmallRng;
use rand::Rng;

/// Redisson's `nonExpirableTimeout`: the expiry of a permit taken without a lease.
pub const NO_LEASE: &str = "922337203685477";

/// Which synchronizer a body works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Semaphore,
    Expirable,
    Latch,
}

/// What a body is, from the Redisson method that sends it. `p`: the publish command is an
/// ARGV (3.22+), else the body calls `publish` itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    SemAcquire,
    SemRelease {
        p: bool,
    },
    SemReleaseIfExists,
    SemDrain,
    /// `trySetPermits` of either semaphore (the expirable one sends it too from 3.18.1).
    TrySet {
        p: bool,
    },
    SemTrySetTtl,
    SemAdd {
        p: bool,
    },
    CountDown {
        p: bool,
    },
    TrySetCount {
        p: bool,
    },
    LatchDelete {
        p: bool,
    },
    /// `tryAcquire` before 3.23.4: one id, the reply is the id.
    PAcquireOne {
        p: bool,
    },
    /// `tryAcquire(ids, until)` from 3.23.4: n ids, the reply is `OK`.
    PAcquireIds,
    PReleaseOne {
        p: bool,
    },
    /// `tryRelease(ids)` 3.23.4-3.40.2: releases those still held.
    PReleaseEach,
    /// `tryRelease(ids)` from 3.41: all or nothing.
    PReleaseAll,
    PAvailable {
        p: bool,
    },
    PTotal {
        p: bool,
    },
    PAcquired {
        p: bool,
    },
    /// The expirable semaphore's own `trySetPermits` of 3.17.0-3.18.0.
    PTrySetOld,
    PAdd {
        p: bool,
    },
    PUpdateLease {
        p: bool,
    },
    /// `setPermits`; `exact`: the 3.23.4+ body, which writes nothing for an unchanged total.
    PSetPermits {
        p: bool,
        exact: bool,
    },
    PLeaseTime,
}

/// Each body's method, read off Redisson's sources at the releases that send it.
pub fn role(sha: &str) -> Role {
    use Role::*;
    match &sha[..5] {
        "c7dc9" => SemAcquire,
        "6ef99" => SemRelease { p: false },
        "ae275" => SemRelease { p: true },
        "68838" => SemReleaseIfExists,
        "c8776" => SemDrain,
        "8d41a" => TrySet { p: false },
        "241ce" => TrySet { p: true },
        "38bf9" => SemTrySetTtl,
        "af883" => SemAdd { p: false },
        "98238" => SemAdd { p: true },
        "c103a" => CountDown { p: false },
        "38060" => CountDown { p: true },
        "956d6" => TrySetCount { p: false },
        "2a52d" => TrySetCount { p: true },
        "23bca" => LatchDelete { p: false },
        "47aed" => LatchDelete { p: true },
        "9dd7d" => PAcquireOne { p: false },
        "d47a2" => PAcquireOne { p: true },
        "992c9" => PAcquireIds,
        "2eac3" => PReleaseOne { p: false },
        "4ce07" => PReleaseOne { p: true },
        "bb41a" => PReleaseEach,
        "cf3ab" => PReleaseAll,
        "6aee5" => PAvailable { p: false },
        "26b39" => PAvailable { p: true },
        "795a1" => PTotal { p: false },
        "e242d" => PTotal { p: true },
        "dd0e6" => PAcquired { p: false },
        "6f0b0" => PAcquired { p: true },
        "44d63" => PTrySetOld,
        "575a0" => PAdd { p: false },
        "ec6fb" => PAdd { p: true },
        "5100a" => PUpdateLease { p: false },
        "2298b" => PUpdateLease { p: true },
        "f753b" => PSetPermits { p: false, exact: false },
        "055e7" => PSetPermits { p: true, exact: false },
        "494d8" => PSetPermits { p: true, exact: true },
        "8be95" => PLeaseTime,
        other => panic!("a synchronizer body this test does not know: {other}"),
    }
}

/// The synchronizers a body is sent for: `trySetPermits`' bodies serve both semaphores.
pub fn families(sha: &str) -> &'static [Family] {
    use Role::*;
    match role(sha) {
        TrySet { .. } => &[Family::Semaphore, Family::Expirable],
        SemAcquire | SemRelease { .. } | SemReleaseIfExists | SemDrain | SemTrySetTtl | SemAdd { .. } => {
            &[Family::Semaphore]
        }
        CountDown { .. } | TrySetCount { .. } | LatchDelete { .. } => &[Family::Latch],
        _ => &[Family::Expirable],
    }
}

/// `TrySet`'s bodies are sent by the expirable semaphore only from 3.18.1 (3.17.0-3.18.0 send
/// their own, `PTrySetOld`).
pub fn sent_by(sha: &str, fam: Family, release: &str) -> bool {
    if !families(sha).contains(&fam) {
        return false;
    }
    let old = ["3.17.", "3.18.0"].iter().any(|p| release.starts_with(p));
    !(fam == Family::Expirable && matches!(role(sha), Role::TrySet { .. }) && old)
}

/// `redisson_sc:{name}` (the locks' prefix rule: a name with its own tag keeps it).
pub fn semaphore_channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_sc:{name}")
    } else {
        format!("redisson_sc:{{{name}}}")
    }
}

/// `{name}:timeout` (Redisson's `suffixName`).
pub fn timeouts(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

/// `redisson_countdownlatch__channel__{name}`: always braced.
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A call of a body: KEYS and ARGV as bytes (ids are raw), and whether an integer reply is a
/// time (`getLeaseTime`).
#[derive(Clone, Debug)]
pub struct Call {
    pub sha: String,
    pub keys: Vec<Vec<u8>>,
    pub argv: Vec<Vec<u8>>,
    pub ttl: bool,
}

impl Call {
    /// `EVALSHA sha n KEYS... ARGV...`.
    pub fn evalsha(&self) -> Vec<Vec<u8>> {
        let mut a = vec![b"EVALSHA".to_vec(), self.sha.as_bytes().to_vec(), self.keys.len().to_string().into_bytes()];
        a.extend(self.keys.iter().cloned());
        a.extend(self.argv.iter().cloned());
        a
    }
}

/// The free choices of a call.
#[derive(Clone, Debug)]
pub struct Choices {
    /// Permits (or a latch's count, or a delta: may be negative for `addPermits`).
    pub permits: i64,
    /// The permit ids the call names (acquired or released).
    pub ids: Vec<[u8; 16]>,
    /// The absolute expiry of a lease (`now + lease`), or [`NO_LEASE`].
    pub until: String,
    /// The client's clock, `System.currentTimeMillis()`.
    pub now: i64,
    /// `trySetPermits(permits, ttl)`'s TTL in ms.
    pub ttl_ms: i64,
    /// `PUBLISH`, as Redisson sends it, or `publish` (ports that reuse its scripts).
    pub publish: String,
}

/// KEYS and ARGV as Redisson builds them for `role` on synchronizer `name`.
pub fn call(sha: &str, name: &str, c: &Choices) -> Call {
    use Role::*;
    let b = |s: &str| s.as_bytes().to_vec();
    let n = |v: i64| v.to_string().into_bytes();
    let ids = || c.ids.iter().map(|i| i.to_vec());
    let id = c.ids.first().map(|i| i.to_vec()).unwrap_or_else(|| vec![0; 16]);
    let (name_k, ch, z, lch) = (b(name), b(&semaphore_channel(name)), b(&timeouts(name)), b(&latch_channel(name)));
    let publish = b(&c.publish);
    let tail = |p: bool, mut v: Vec<Vec<u8>>| {
        if p {
            v.push(publish.clone());
        }
        v
    };
    let now = n(c.now);
    let until = b(&c.until);
    let role = role(sha);
    let (keys, argv) = match role {
        SemAcquire => (vec![name_k], vec![n(c.permits)]),
        SemRelease { p } | SemAdd { p } => (vec![name_k, ch], tail(p, vec![n(c.permits)])),
        SemReleaseIfExists => (vec![name_k, ch], vec![n(c.permits), publish]),
        SemDrain => (vec![name_k], vec![]),
        TrySet { p } => (vec![name_k, ch], tail(p, vec![n(c.permits)])),
        SemTrySetTtl => (vec![name_k, ch], vec![n(c.permits), publish, n(c.ttl_ms)]),
        CountDown { p } => (vec![name_k, lch], tail(p, vec![b("0")])),
        TrySetCount { p } => (vec![name_k, lch], tail(p, vec![b("1"), n(c.permits)])),
        LatchDelete { p } => (vec![name_k, lch], tail(p, vec![b("1")])),
        PAcquireOne { p } => (vec![name_k, z, ch], tail(p, vec![n(c.permits), until, id, now, b(NO_LEASE)])),
        PAcquireIds => {
            let mut argv = vec![n(c.ids.len() as i64), until, now, b(NO_LEASE), publish];
            argv.extend(ids());
            (vec![name_k, z, ch], argv)
        }
        PReleaseOne { p } => (vec![name_k, ch, z], tail(p, vec![id, b("1"), now])),
        PReleaseEach | PReleaseAll => {
            let mut argv = vec![n(c.ids.len() as i64), now, publish];
            argv.extend(ids());
            (vec![name_k, ch, z], argv)
        }
        PAvailable { p } | PTotal { p } | PAcquired { p } => (vec![name_k, z, ch], tail(p, vec![now])),
        PTrySetOld => (vec![name_k, ch], vec![n(c.permits)]),
        PAdd { p } => (vec![name_k, ch], tail(p, vec![n(c.permits)])),
        PUpdateLease { p } => (vec![name_k, z, ch], tail(p, vec![id, until, now])),
        PSetPermits { p, .. } => (vec![name_k, ch, z], tail(p, vec![n(c.permits)])),
        PLeaseTime => (vec![name_k, z, ch], vec![id, b(NO_LEASE), now, publish]),
    };
    Call { sha: sha.to_string(), keys, argv, ttl: role == PLeaseTime }
}

/// A fresh permit id: 16 random bytes, as Redisson's `generateId`.
pub fn new_id(r: &mut SmallRng) -> [u8; 16] {
    let mut id = [0u8; 16];
    r.fill(&mut id);
    id
}
