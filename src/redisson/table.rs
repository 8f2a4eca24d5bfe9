//! Every distinct body of Redisson's lock scripts, releases 3.17.0 to 4.7.0 and HEAD, by SHA1:
//! what the module runs instead, or why it leaves the body to Lua.
//!
//! Only the SHA1s (the name Redis itself gives a script), the body lengths (a cheap first test
//! for `EVAL`) and our mapping live here; the bodies are Redisson's and stay in Redisson (the
//! tests read them from `../shared/redisson-scripts/`). docs/design.md has the same table for
//! people. A body whose SHA1 is not here is never touched.

pub use super::native::Publish;
use super::rate::table::RateKind;
use super::sync::table::SyncKind;
use super::{rate, sync};
use crate::core::lock::rwlock::Side;

/// Which of Redisson's fair-lock acquire scripts: they differ where the queue is inconsistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FairVersion {
    /// 3.17-3.30: raises a Lua error on a queued waiter without a deadline (purge or tail), and
    /// an owner already queued gets `its deadline - wait - now`, not the lock's PTTL.
    Old,
    /// 3.32-3.44: raises a Lua error when the tail waiter has no deadline.
    Mid,
    /// 3.45+: the module's own semantics.
    Head,
}

/// What the module runs for a script (or why not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `RLock.tryLock`: KEYS `name`, ARGV `lease owner` -> `LOCK.ACQUIRE name owner lease`.
    LockAcquire,
    /// `RFencedLock`: KEYS `name token`, ARGV `lease owner` -> `LOCK.ACQUIRE ... TOKEN`;
    /// `token_reply` false: the form that replies nil/PTTL, not `[-1, token]`.
    LockAcquireFenced { token_reply: bool },
    /// `unlock`: KEYS `name channel [latch]`, ARGV `0 lease owner [publish] [latch_ms]`.
    LockUnlock { publish: Publish, latch: bool },
    /// The watchdog's `renewExpirationAsync`: KEYS `name`, ARGV `lease owner`; `task`: the
    /// batched `LockTask` form, which replies an array (accelerated for one lock per call).
    LockRenew { task: bool },
    /// `forceUnlock`: KEYS `name channel`, ARGV `0 [publish]`.
    LockForceUnlock { publish: Publish },
    /// `readLock().tryLock`: KEYS `name timeout_prefix`, ARGV `lease owner owner:write`.
    RwRead,
    /// `writeLock().tryLock`: KEYS `name`, ARGV `lease owner:write`.
    RwWrite,
    /// `readLock().unlock`: KEYS `name channel timeout_prefix key_prefix [latch]`, ARGV
    /// `0 owner [publish] [latch_ms]`. `free_is_one`: before 3.44 a free lock replies 1.
    RwUnlockRead { publish: Publish, latch: bool, free_is_one: bool },
    /// `writeLock().unlock`: KEYS `name channel [latch]`, ARGV `1 lease owner:write [publish]
    /// [latch_ms]`.
    RwUnlockWrite { publish: Publish, latch: bool, free_is_one: bool },
    /// `forceUnlock` of either side: KEYS `name channel`, ARGV `message [publish]`.
    RwForceUnlock { side: Side, publish: Publish },
    /// The read lock's watchdog before 4.4: renews the lock and *every* holder's read holds
    /// if `owner` reads. KEYS `name key_prefix`, ARGV `lease owner`. `task`: the batched
    /// `ReadLockTask` (array reply; one lock per call); `shadowed`: its 3.44-3.52 body, whose
    /// inner loop reuses `i` and so fails once any hold count reaches 2.
    RwRenewAll { task: bool, shadowed: bool },
    /// `ReadLockTask` since 4.4: renews only the owner's read holds. KEYS `name key_prefix`,
    /// ARGV `lease 1 owner` (one lock, one owner per call).
    RwRenewOwner,
    /// `FairLock.tryLock(wait, ...)`: KEYS `name queue timeouts`, ARGV `lease owner wait now`.
    FairAcquire(FairVersion),
    /// `FairLock.tryLock()`: KEYS `name queue timeouts`, ARGV `lease owner now wait`; `strict`:
    /// the purge raises a Lua error on a head waiter without a deadline (before 3.32).
    FairTry { strict: bool },
    /// `FairLock.unlock`: KEYS `name queue timeouts channel [latch]`, ARGV `0 lease owner now
    /// [publish] [latch_ms]`.
    FairUnlock { publish: Publish, latch: bool, strict: bool },
    /// `FairLock.forceUnlock`: KEYS `name queue timeouts channel`, ARGV `0 now [publish]`.
    FairForceUnlock { publish: Publish, strict: bool },
    /// `acquireFailed`: KEYS `queue timeouts`, ARGV `owner wait`; replies nothing (nil).
    FairCancel,
    /// One of the synchronizers' bodies (`super::sync::table`).
    Sync(SyncKind),
    /// One of the rate limiter's bodies (`super::rate::table`).
    Rate(RateKind),
    /// Left to Lua, with the reason.
    Lua(&'static str),
}

impl Kind {
    /// Whether the script publishes with `redis.call('publish', ...)` (not through its
    /// environment): such a call checks `PUBLISH` permission whatever the environment.
    pub fn publishes_fixed(self) -> bool {
        if let Kind::Sync(k) = self {
            return k.publishes_fixed();
        }
        matches!(
            self,
            Kind::LockUnlock { publish: Publish::Fixed, .. }
                | Kind::LockForceUnlock { publish: Publish::Fixed }
                | Kind::RwUnlockRead { publish: Publish::Fixed, .. }
                | Kind::RwUnlockWrite { publish: Publish::Fixed, .. }
                | Kind::RwForceUnlock { publish: Publish::Fixed, .. }
                | Kind::FairUnlock { publish: Publish::Fixed, .. }
                | Kind::FairForceUnlock { publish: Publish::Fixed, .. }
        )
    }
}

/// One body: its SHA1, byte length, Redisson class and method, the releases that send it.
#[derive(Clone, Copy)]
pub struct Row {
    pub sha: &'static str,
    pub len: usize,
    pub kind: Kind,
    pub method: &'static str,
    pub releases: &'static str,
}

use FairVersion as FA;
use Kind::*;
use Publish::{Arg, Fixed};

const fn row(sha: &'static str, len: usize, kind: Kind, method: &'static str, releases: &'static str) -> Row {
    Row { sha, len, kind, method, releases }
}

/// Every body the module knows: the locks' ([`LOCK_ROWS`]), then the synchronizers'
/// (`super::sync::table::ROWS`), then the rate limiter's (`super::rate::table::ROWS`). A row's
/// index is its identity everywhere (markers, the script cache's state).
pub static ROWS: [Row; COUNT] = concat();

/// How many bodies [`ROWS`] holds.
pub const COUNT: usize = LOCK_ROWS.len() + sync::table::ROWS.len() + rate::table::ROWS.len();

const fn concat() -> [Row; COUNT] {
    let mut out = [LOCK_ROWS[0]; COUNT];
    let sync_end = LOCK_ROWS.len() + sync::table::ROWS.len();
    let mut i = 0;
    while i < COUNT {
        out[i] = if i < LOCK_ROWS.len() {
            LOCK_ROWS[i]
        } else if i < sync_end {
            let r = &sync::table::ROWS[i - LOCK_ROWS.len()];
            let kind = match r.kind {
                Ok(k) => Kind::Sync(k),
                Err(reason) => Kind::Lua(reason),
            };
            Row { sha: r.sha, len: r.len, kind, method: r.method, releases: r.releases }
        } else {
            let r = &rate::table::ROWS[i - sync_end];
            Row { sha: r.sha, len: r.len, kind: Kind::Rate(r.kind), method: r.method, releases: r.releases }
        };
        i += 1;
    }
    out
}

#[rustfmt::skip]
const LOCK_ROWS: &[Row] = &[
    // -- RedissonLock, RedissonBaseLock, RedissonFencedLock, renewal/LockTask ------------------
    row("dad0f8d619e548e04f21fb48d50be5034df3adae", 339, LockAcquire, "RedissonLock.tryLockInnerAsync", "3.17.0-3.18.1"),
    row("149c5a8bf18676fd99e9e6e24923bd64d9b62f94", 234, LockAcquire, "RedissonLock.tryLockInnerAsync", "3.19.0-HEAD"),
    row("49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", 288, LockAcquireFenced { token_reply: true }, "RedissonFencedLock.tryLockInnerAsync (token)", "3.19.0-HEAD"),
    row("46b5551ba403d6152a7a6eca122e08728d6c8c66", 262, LockAcquireFenced { token_reply: false }, "RedissonFencedLock.tryLockInnerAsync", "3.19.0-HEAD"),
    row("3ffe249c16dee540ac8ab32e39bd408626b9aff7", 305, LockUnlock { publish: Fixed, latch: false }, "RedissonLock.unlockInnerAsync", "3.17.0-3.21.3"),
    row("778cea8aada230ae060b432fc333adaec85f2f4c", 303, LockUnlock { publish: Arg(4), latch: false }, "RedissonLock.unlockInnerAsync", "3.22.0-3.23.5"),
    row("6866459238a13a701d42f4971f12d9f3a50e2442", 471, LockUnlock { publish: Arg(4), latch: true }, "RedissonLock.unlockInnerAsync", "3.24.0-HEAD"),
    row("8e19a1ddbdee9138df9f32a480c57addab4353d1", 120, LockRenew { task: false }, "RedissonBaseLock.renewExpirationAsync", "3.17.0-3.43.0"),
    row("6a3d31570dc6f4b0bd32bcdc8e75667747c6f635", 220, LockRenew { task: true }, "renewal.LockTask.renew", "3.44.0-HEAD"),
    row("7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1", 109, LockForceUnlock { publish: Fixed }, "RedissonLock.forceUnlockAsync", "3.17.0-3.21.3"),
    row("605e338249a7a1d40df83b04f7658354f883b41b", 107, LockForceUnlock { publish: Arg(2) }, "RedissonLock.forceUnlockAsync", "3.22.0-HEAD"),
    // -- RedissonReadLock, RedissonWriteLock, renewal/ReadLockTask ----------------------------
    row("95553a6ff11176c18e71344e89d116b06fd6f753", 717, RwRead, "RedissonReadLock.tryLockInnerAsync", "3.17.0-HEAD"),
    row("6306ba3bf1f563b284bed52d305fce615c6664d9", 508, RwWrite, "RedissonWriteLock.tryLockInnerAsync", "3.17.0-HEAD"),
    row("f5469be4bfe5232d519471092634b3ee84e5ee6f", 1026, RwUnlockRead { publish: Fixed, latch: false, free_is_one: true }, "RedissonReadLock.unlockInnerAsync", "3.17.0-3.21.3"),
    row("92a54c31a4dc3b46f81e24a6dd5bb7d677c6f882", 1022, RwUnlockRead { publish: Arg(3), latch: false, free_is_one: true }, "RedissonReadLock.unlockInnerAsync", "3.22.0-3.23.5"),
    row("5947c0fee6ca25ae094ec1b3e7a2559a9273d29f", 1293, RwUnlockRead { publish: Arg(3), latch: true, free_is_one: true }, "RedissonReadLock.unlockInnerAsync", "3.24.0-3.43.0"),
    row("6e1b10e11ac0a3ed8e902562ecd32ce01b553039", 1295, RwUnlockRead { publish: Arg(3), latch: true, free_is_one: false }, "RedissonReadLock.unlockInnerAsync", "3.44.0-HEAD"),
    row("baa634f6184acc1b8f145e810a0e0e00967a3cbe", 637, RwUnlockWrite { publish: Fixed, latch: false, free_is_one: true }, "RedissonWriteLock.unlockInnerAsync", "3.17.0-3.21.3"),
    row("319a1cdf1b56c767a0a9adf2224250bf811f110c", 633, RwUnlockWrite { publish: Arg(4), latch: false, free_is_one: true }, "RedissonWriteLock.unlockInnerAsync", "3.22.0-3.23.5"),
    row("d29c5559782035515d32e926762830b3304b49be", 858, RwUnlockWrite { publish: Arg(4), latch: true, free_is_one: true }, "RedissonWriteLock.unlockInnerAsync", "3.24.0-3.43.0"),
    row("21f5fb0f8ddfa9be5c3e0c9757c128796add75c6", 860, RwUnlockWrite { publish: Arg(4), latch: true, free_is_one: false }, "RedissonWriteLock.unlockInnerAsync", "3.44.0-HEAD"),
    row("23f9bc91439172625235ce2ee06d6647f08a7e27", 150, RwForceUnlock { side: Side::Read, publish: Fixed }, "RedissonReadLock.forceUnlockAsync", "3.17.0-3.21.3"),
    row("27dbe744e95c1d854a7f556cc6817030de2d0d01", 148, RwForceUnlock { side: Side::Read, publish: Arg(2) }, "RedissonReadLock.forceUnlockAsync", "3.22.0-HEAD"),
    row("23639b0b2d18d26ce352e148ff4ac5b8e984b696", 151, RwForceUnlock { side: Side::Write, publish: Fixed }, "RedissonWriteLock.forceUnlockAsync", "3.17.0-3.21.3"),
    row("2e2cb2a3b13e2e80e4236ef6a25beaf365dba608", 149, RwForceUnlock { side: Side::Write, publish: Arg(2) }, "RedissonWriteLock.forceUnlockAsync", "3.22.0-HEAD"),
    row("6563941ff57e01b8cf61e86907b80686438a2f74", 475, RwRenewAll { task: false, shadowed: false }, "RedissonReadLock.renewExpirationAsync", "3.17.0-3.43.0"),
    row("1affef780a01e1406cb1968c62918f618d10d6a3", 596, RwRenewAll { task: true, shadowed: true }, "renewal.ReadLockTask.renew", "3.44.0-3.52.0"),
    row("d6564f42b98d6eece0e940a478ee248f80b8a90a", 596, RwRenewAll { task: true, shadowed: false }, "renewal.ReadLockTask.renew", "4.0.0-4.3.1"),
    row("38d2b478dfbe264ab67c221b7e4be62245f00ba0", 574, RwRenewOwner, "renewal.ReadLockTask.renew", "4.4.0-HEAD"),
    row("8ad44f1ba014938c20da38206b6d496c85ec1aed", 157, Lua("a read-only status query (isLocked): no native command answers it"), "RedissonReadLock.isLocked", "3.24.0-HEAD"),
    // -- RedissonFairLock -------------------------------------------------------------------
    row("762bfafa6be221431a0b668685dd15c926483619", 1453, FairAcquire(FA::Old), "RedissonFairLock.tryLockInnerAsync (EVAL_LONG)", "3.17.0-3.30.0"),
    row("929defe0321e0a4c943b4244951d3a730b6eaabc", 1484, FairAcquire(FA::Mid), "RedissonFairLock.tryLockInnerAsync (EVAL_LONG)", "3.32.0-3.44.0"),
    row("8f6ed299ffd259f0539c20f89253998c0777ea75", 1541, FairAcquire(FA::Head), "RedissonFairLock.tryLockInnerAsync (EVAL_LONG)", "3.45.0-HEAD"),
    row("aa0a28d2eb7cbeb50151315a58eb75302d8dfa40", 908, FairTry { strict: true }, "RedissonFairLock.tryLockInnerAsync (EVAL_NULL_BOOLEAN)", "3.17.0-3.30.0"),
    row("d20501c26a30adf6fb0fe9883bbbcc497e6157e2", 929, FairTry { strict: false }, "RedissonFairLock.tryLockInnerAsync (EVAL_NULL_BOOLEAN)", "3.32.0-HEAD"),
    row("35d32367b21753c39b55dc64d1906fee627cc9a8", 931, FairUnlock { publish: Fixed, latch: false, strict: true }, "RedissonFairLock.unlockInnerAsync", "3.17.0-3.21.3"),
    row("14f85250fb2a386500bf8e4b25a8e95db140ff0c", 927, FairUnlock { publish: Arg(5), latch: false, strict: true }, "RedissonFairLock.unlockInnerAsync", "3.22.0-3.23.5"),
    row("ca303f8587d0942f8a0021f62338626ca4dd0118", 1152, FairUnlock { publish: Arg(5), latch: true, strict: true }, "RedissonFairLock.unlockInnerAsync", "3.24.0-3.30.0"),
    row("367f80bd2e300e411fb0936d9b601e5bcb3fd4b6", 1173, FairUnlock { publish: Arg(5), latch: true, strict: false }, "RedissonFairLock.unlockInnerAsync", "3.32.0-HEAD"),
    row("95cdf4b03f82c82edf987c7d216b4b67d861b14f", 536, FairForceUnlock { publish: Fixed, strict: true }, "RedissonFairLock.forceUnlockAsync", "3.17.0-3.21.3"),
    row("047c11d7fec40d0102fe9903ff1e19e9a1dec610", 534, FairForceUnlock { publish: Arg(3), strict: true }, "RedissonFairLock.forceUnlockAsync", "3.22.0-3.30.0"),
    row("71ed11d4e4818119ac560b3d670a7f08256afc46", 555, FairForceUnlock { publish: Arg(3), strict: false }, "RedissonFairLock.forceUnlockAsync", "3.32.0-HEAD"),
    row("d1ddef65ad80886b5d36e023c99930044ddd653a", 305, FairCancel, "RedissonFairLock.acquireFailedAsync", "3.17.0-HEAD"),
];

/// The row of a SHA1 given as 40 hex digits, in either case (as `EVALSHA` accepts it).
pub fn by_sha(sha: &[u8]) -> Option<usize> {
    if sha.len() != 40 {
        return None;
    }
    ROWS.iter().position(|r| r.sha.as_bytes().eq_ignore_ascii_case(sha))
}

/// True if some body has this length: the test an `EVAL` body passes before it is hashed.
pub fn is_body_len(len: usize) -> bool {
    ROWS.iter().any(|r| r.len == len)
}

/// The row of an `EVAL` body: its length first, then its SHA1.
pub fn by_body(body: &[u8]) -> Option<usize> {
    if !is_body_len(body.len()) {
        return None;
    }
    let digest = sha1_smol::Sha1::from(body).digest().bytes();
    ROWS.iter().position(|r| hex_is(r.sha, &digest))
}

/// True if `hex` (40 lowercase hex digits) spells `bytes`.
fn hex_is(hex: &str, bytes: &[u8; 20]) -> bool {
    let nibble = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => 16,
    };
    let h = hex.as_bytes();
    h.len() == 40 && bytes.iter().enumerate().all(|(i, b)| nibble(h[2 * i]) == b >> 4 && nibble(h[2 * i + 1]) == b & 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sha_is_distinct_lowercase_hex() {
        for (i, r) in ROWS.iter().enumerate() {
            assert!(r.sha.len() == 40 && r.sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            assert_eq!(by_sha(r.sha.as_bytes()), Some(i), "{}", r.sha);
            assert_eq!(by_sha(r.sha.to_uppercase().as_bytes()), Some(i));
        }
        assert_eq!(LOCK_ROWS.len(), 43);
        assert_eq!(ROWS.len(), 43 + 38 + 20);
    }

    #[test]
    fn a_body_is_found_by_its_sha1_not_its_length() {
        // Same length as a Redisson body, different bytes.
        let body = vec![b' '; 120];
        assert!(is_body_len(120));
        assert_eq!(by_body(&body), None);
        assert_eq!(by_body(b"return 1"), None);
    }
}
