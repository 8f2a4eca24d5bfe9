//! Every distinct body of Redisson's synchronizer scripts (`RSemaphore`,
//! `RPermitExpirableSemaphore`, `RCountDownLatch`), releases 3.17.0 to 4.7.0 and HEAD, by
//! SHA1: what the module runs instead, or why it leaves the body to Lua
//! (docs/redisson-sync-scripts.md has the same list with each body's KEYS and ARGV).
//!
//! Only the SHA1s, the body lengths and our mapping live here; the bodies stay in Redisson
//! (the tests read them from `../shared/redisson-sync-scripts/`).
//! `crate::redisson::table::ROWS` holds these rows after the locks'.

use crate::redisson::native::Publish;

/// What a synchronizer body does, as far as the native answer depends on it. The KEYS and
/// ARGV of each are in `super::rewrite`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// `RSemaphore.tryAcquire`: KEYS `name`, ARGV `permits` -> `SEMAPHORE.ACQUIRE`.
    SemAcquire,
    /// `release`: KEYS `name ch`, ARGV `permits [publish]`; replies nil.
    SemRelease { publish: Publish },
    /// `drainPermits`: KEYS `name`; replies the old value as a bulk string.
    SemDrain,
    /// `trySetPermits` of either semaphore: KEYS `name ch`, ARGV `permits [publish]`. `old`:
    /// the expirable semaphore's own body of 3.17.0-3.18.0 (same effect).
    TrySet { publish: Publish, old: bool },
    /// `trySetPermits(permits, ttl)`: KEYS `name ch`, ARGV `permits publish ttl_ms`.
    SemTrySetTtl,
    /// `addPermits`: KEYS `name ch`, ARGV `delta [publish]`; replies nil.
    SemAdd { publish: Publish },
    /// `countDown`: KEYS `name lch`, ARGV `0 [publish]`; replies nil.
    CountDown { publish: Publish },
    /// `trySetCount`: KEYS `name lch`, ARGV `1 count [publish]`.
    TrySetCount { publish: Publish },
    /// `tryAcquire` of the expirable semaphore: KEYS `name Z ch`. `ids` false (before 3.23.4):
    /// ARGV `permits until id now NL [publish]`, replies the id; true: ARGV `n until now NL
    /// publish id1..idn`, replies `OK`. Refused: `:<lowest score>` or nil.
    PAcquire { publish: Publish, ids: bool },
    /// `tryRelease(id)`: KEYS `name ch Z`, ARGV `id 1 now [publish]`.
    PReleaseOne { publish: Publish },
    /// `tryRelease(ids)`: KEYS `name ch Z`, ARGV `n now publish id1..idn`; `all`: 3.41+,
    /// all or nothing; else those still held are released.
    PReleaseMany { all: bool },
    /// `availablePermits`: KEYS `name Z ch`, ARGV `now [publish]`; replies the count reclaimed
    /// to (an integer), else the stored value (bulk) or 0.
    PAvailable { publish: Publish },
    /// `acquiredPermits`: KEYS `name Z ch`, ARGV `now [publish]`.
    PAcquired { publish: Publish },
    /// `updateLeaseTime`: KEYS `name Z ch`, ARGV `id until now [publish]`.
    PUpdateLease { publish: Publish },
    /// `setPermits`: KEYS `name ch Z`, ARGV `permits [publish]`; replies nil. `exact`: 3.23.4+,
    /// an unchanged total writes nothing (the older bodies still `INCRBY 0` and publish).
    PSetPermits { publish: Publish, exact: bool },
}

/// One body: its SHA1, byte length, what runs for it (or why Lua does), Redisson's class
/// and method, the releases that send it.
pub struct SyncRow {
    pub sha: &'static str,
    pub len: usize,
    pub kind: Result<SyncKind, &'static str>,
    pub method: &'static str,
    pub releases: &'static str,
}

use Publish::{Arg, Fixed};
use SyncKind::*;

const fn row(
    sha: &'static str,
    len: usize,
    kind: Result<SyncKind, &'static str>,
    method: &'static str,
    releases: &'static str,
) -> SyncRow {
    SyncRow { sha, len, kind, method, releases }
}

#[allow(non_snake_case)]
const fn Sync(k: SyncKind) -> Result<SyncKind, &'static str> {
    Ok(k)
}

#[allow(non_snake_case)]
const fn Lua(reason: &'static str) -> Result<SyncKind, &'static str> {
    Err(reason)
}

const NO_COMMAND: &str = "no native command answers it (issue 26 names none)";

#[rustfmt::skip]
pub const ROWS: &[SyncRow] = &[
    // -- RedissonSemaphore --------------------------------------------------------------------
    row("c7dc9d189c1715465a31a06ddbc008585e0c20be", 184, Sync(SemAcquire), "RedissonSemaphore.tryAcquireAsync", "3.17.0-HEAD"),
    row("6ef996845b2b97db21c5bc1ed04b8eae2babe56f", 93, Sync(SemRelease { publish: Fixed }), "RedissonSemaphore.releaseAsync", "3.17.0-3.21.3"),
    row("ae27582488dd01f4e238cc0733a12146d410eb44", 91, Sync(SemRelease { publish: Arg(2) }), "RedissonSemaphore.releaseAsync", "3.22.0-HEAD"),
    row("6883802454c09d455e3234c8b01549adf1fb8b4c", 154, Lua(NO_COMMAND), "RedissonSemaphore.releaseIfExistsAsync", "4.0.0-HEAD"),
    row("c87766d572855e9461c4ecd453db5d1cbab6119e", 126, Sync(SemDrain), "RedissonSemaphore.drainPermitsAsync", "3.17.0-HEAD"),
    row("8d41a082c3a98f3e882844af9c9e9f9fbd7f8573", 167, Sync(TrySet { publish: Fixed, old: false }), "RedissonSemaphore/RedissonPermitExpirableSemaphore.trySetPermitsAsync", "3.17.0-3.21.3"),
    row("241ce4e87e652b4f9b39d33cbcd7df9ee8ed906c", 165, Sync(TrySet { publish: Arg(2), old: false }), "RedissonSemaphore/RedissonPermitExpirableSemaphore.trySetPermitsAsync", "3.22.0-HEAD"),
    row("38bf99884eb94708a40a9aabacb15b4c5f16e804", 180, Sync(SemTrySetTtl), "RedissonSemaphore.trySetPermitsAsync(permits, ttl)", "3.29.0-HEAD"),
    row("af883fdf25153ad9a41ad1c0d5dfde728728961a", 175, Sync(SemAdd { publish: Fixed }), "RedissonSemaphore.addPermitsAsync", "3.17.0-3.21.3"),
    row("98238d408c6755085344670d3a2ddaa55cf177a9", 173, Sync(SemAdd { publish: Arg(2) }), "RedissonSemaphore.addPermitsAsync", "3.22.0-HEAD"),
    // -- RedissonCountDownLatch -----------------------------------------------------------------
    row("c103a1b27e5635c206edc800af5851a8c4cc8305", 143, Sync(CountDown { publish: Fixed }), "RedissonCountDownLatch.countDownAsync", "3.17.0-3.21.3"),
    row("38060fab26b0e7c5982a5cfd7ad542e44d3da19b", 141, Sync(CountDown { publish: Arg(2) }), "RedissonCountDownLatch.countDownAsync", "3.22.0-HEAD"),
    row("956d64ccf21d1feed0339006db8295e2aa04a8d8", 147, Sync(TrySetCount { publish: Fixed }), "RedissonCountDownLatch.trySetCountAsync", "3.17.0-3.21.3"),
    row("2a52d54a6f35bc8af5e84a2930b2ca1aa2a15892", 145, Sync(TrySetCount { publish: Arg(3) }), "RedissonCountDownLatch.trySetCountAsync", "3.22.0-HEAD"),
    row("23bcabf6e8e3267791df8ea2e9ed607944b28658", 107, Lua(NO_COMMAND), "RedissonCountDownLatch.deleteAsync", "3.17.0-3.21.3"),
    row("47aed1b8133417c9bc009ffc08602e37ed4a1bb3", 105, Lua(NO_COMMAND), "RedissonCountDownLatch.deleteAsync", "3.22.0-HEAD"),
    // -- RedissonPermitExpirableSemaphore -------------------------------------------------------
    row("9dd7dc38c905805c04c8f14cb8aae2bd5dd529b0", 758, Sync(PAcquire { publish: Fixed, ids: false }), "RedissonPermitExpirableSemaphore.tryAcquireAsync", "3.17.0-3.21.3"),
    row("d47a2fd3852467e5e7f2d1618c92a1ca719fcf7a", 756, Sync(PAcquire { publish: Arg(6), ids: false }), "RedissonPermitExpirableSemaphore.tryAcquireAsync", "3.22.0-3.23.3"),
    row("992c96b09a3d8ea0b37f5dc12e5347a44d93909d", 781, Sync(PAcquire { publish: Arg(5), ids: true }), "RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, until)", "3.23.4-HEAD"),
    row("2eac39f9e36394f850326ea7cd240d6ebc715ae2", 312, Sync(PReleaseOne { publish: Fixed }), "RedissonPermitExpirableSemaphore.tryReleaseAsync(id)", "3.17.0-3.21.3"),
    row("4ce079451bee2993ce00c8a4e205b536c6ccad67", 310, Sync(PReleaseOne { publish: Arg(4) }), "RedissonPermitExpirableSemaphore.tryReleaseAsync(id)", "3.22.0-HEAD"),
    row("bb41a8ec1cd921c89e9d8f2ddde38ad13a2e8b74", 563, Sync(PReleaseMany { all: false }), "RedissonPermitExpirableSemaphore.tryReleaseAsync(ids)", "3.23.4-3.40.2"),
    row("cf3ab77b1c0ae1226ae0e06e5cb18ee75f56c96b", 678, Sync(PReleaseMany { all: true }), "RedissonPermitExpirableSemaphore.tryReleaseAsync(ids)", "3.41.0-HEAD"),
    row("6aee5085c7e0b3ff5d8612116a9b5f2ceb1fdab2", 379, Sync(PAvailable { publish: Fixed }), "RedissonPermitExpirableSemaphore.availablePermitsAsync", "3.17.0-3.21.3"),
    row("26b3972b2c9e617556282f404cb79709d746a713", 377, Sync(PAvailable { publish: Arg(2) }), "RedissonPermitExpirableSemaphore.availablePermitsAsync", "3.22.0-HEAD"),
    row("795a15adb7654812d3711bed0f526f84076f8f4e", 532, Lua(NO_COMMAND), "RedissonPermitExpirableSemaphore.getPermitsAsync", "3.19.1-3.21.3"),
    row("e242db5c1c68811b0d26a41937dcf22415b6d872", 530, Lua(NO_COMMAND), "RedissonPermitExpirableSemaphore.getPermitsAsync", "3.22.0-HEAD"),
    row("dd0e62727caf54b589ae8e4bf22c32ec5ec33250", 394, Sync(PAcquired { publish: Fixed }), "RedissonPermitExpirableSemaphore.acquiredPermitsAsync", "3.19.1-3.21.3"),
    row("6f0b0be79a0c146c778cb14f40c10eb5b706e574", 392, Sync(PAcquired { publish: Arg(2) }), "RedissonPermitExpirableSemaphore.acquiredPermitsAsync", "3.22.0-HEAD"),
    row("44d63d4882cfdb9af87c32c96c24a9e1e15cffd5", 181, Sync(TrySet { publish: Fixed, old: true }), "RedissonPermitExpirableSemaphore.trySetPermitsAsync", "3.17.0-3.18.0"),
    row("575a088d37e6b44b707ce3103c04a03c2cd504bd", 221, Lua("no native command publishes the delta (SEMAPHORE.ADDPERMITS publishes the sum)"), "RedissonPermitExpirableSemaphore.addPermitsAsync", "3.17.0-3.21.3"),
    row("ec6fb1cd5f66817424e8fe70fee7929391b7c6f0", 219, Lua("no native command publishes the delta (SEMAPHORE.ADDPERMITS publishes the sum)"), "RedissonPermitExpirableSemaphore.addPermitsAsync", "3.22.0-HEAD"),
    row("5100a65fefa9ca6c9ed0977c06c41c68e2e847e8", 440, Sync(PUpdateLease { publish: Fixed }), "RedissonPermitExpirableSemaphore.updateLeaseTimeAsync", "3.17.0-3.21.3"),
    row("2298b02cc67a89f2a638e47503db3675c73d77f5", 438, Sync(PUpdateLease { publish: Arg(4) }), "RedissonPermitExpirableSemaphore.updateLeaseTimeAsync", "3.22.0-HEAD"),
    row("f753b3fd2954a5f1ed4d8f95a9c41819ecc27f41", 440, Sync(PSetPermits { publish: Fixed, exact: false }), "RedissonPermitExpirableSemaphore.setPermitsAsync", "3.19.1-3.21.3"),
    row("055e71dede7c0d07958c639e4661ab8bd36c4ab9", 436, Sync(PSetPermits { publish: Arg(2), exact: false }), "RedissonPermitExpirableSemaphore.setPermitsAsync", "3.22.0-3.23.3"),
    row("494d8561fee0cdb033f6c28d74c052c52189a578", 446, Sync(PSetPermits { publish: Arg(2), exact: true }), "RedissonPermitExpirableSemaphore.setPermitsAsync", "3.23.4-HEAD"),
    row("8be95cb5221cc7ee883cacb8859a8b32ef501a0e", 472, Lua(NO_COMMAND), "RedissonPermitExpirableSemaphore.getLeaseTimeAsync", "3.41.0-HEAD"),
];

impl SyncKind {
    /// Whether the body publishes with `redis.call('publish', ...)` itself.
    pub fn publishes_fixed(self) -> bool {
        matches!(
            self,
            SemRelease { publish: Fixed }
                | TrySet { publish: Fixed, .. }
                | SemAdd { publish: Fixed }
                | CountDown { publish: Fixed }
                | TrySetCount { publish: Fixed }
                | PAcquire { publish: Fixed, .. }
                | PReleaseOne { publish: Fixed }
                | PAvailable { publish: Fixed }
                | PAcquired { publish: Fixed }
                | PUpdateLease { publish: Fixed }
                | PSetPermits { publish: Fixed, .. }
        )
    }
}
