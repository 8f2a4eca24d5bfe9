//! What a rewritten call becomes: the native commands Redisson's scripts map to ([`Native`]),
//! the arguments of a rewritten call ([`A`]), and what the mapping depends on besides the call
//! ([`Env`]). `super::rewrite` (the locks) and `super::sync::rewrite` (the synchronizers) map
//! the calls.

/// The native command a script becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Native {
    LockAcquire,
    LockUnlock,
    LockRenew,
    LockForceUnlock,
    RwRlock,
    RwWlock,
    RwUnlock,
    RwRenew,
    RwForceUnlock,
    FairAcquire,
    FairUnlock,
    FairCancel,
    FairForceUnlock,
    // The synchronizers (`super::sync::rewrite`).
    SemAcquire,
    SemRelease,
    SemTrySet,
    SemAdd,
    SemDrain,
    PsemTrySet,
    PsemSetPermits,
    PsemAcquire,
    PsemRelease,
    PsemUpdateLease,
    PsemAvailable,
    PsemAcquired,
    CountdownTrySet,
    CountdownDecr,
    // The rate limiter (`super::rate::rewrite`).
    RateTrySet,
    RateSet,
    RateAcquire,
    RateAvailable,
    RateRelease,
    /// `RedissonExpirable`'s helpers over a limiter's keys: no command of their own, they
    /// run under `RATELIMITER.SETRATE`'s entry (its flags, ACL, `INFO commandstats`).
    RateExpire,
    /// `RGcra`'s bodies, under the module's `GCRA` (only where it is registered).
    Gcra,
}

impl Native {
    /// The command's name as registered (lowercase).
    pub fn name(self) -> &'static str {
        match self {
            Native::LockAcquire => "lock.acquire",
            Native::LockUnlock => "lock.unlock",
            Native::LockRenew => "lock.renew",
            Native::LockForceUnlock => "lock.forceunlock",
            Native::RwRlock => "rwlock.rlock",
            Native::RwWlock => "rwlock.wlock",
            Native::RwUnlock => "rwlock.unlock",
            Native::RwRenew => "rwlock.renew",
            Native::RwForceUnlock => "rwlock.forceunlock",
            Native::FairAcquire => "fairlock.acquire",
            Native::FairUnlock => "fairlock.unlock",
            Native::FairCancel => "fairlock.cancel",
            Native::FairForceUnlock => "fairlock.forceunlock",
            Native::SemAcquire => "semaphore.acquire",
            Native::SemRelease => "semaphore.release",
            Native::SemTrySet => "semaphore.trysetpermits",
            Native::SemAdd => "semaphore.addpermits",
            Native::SemDrain => "semaphore.drain",
            Native::PsemTrySet => "psemaphore.trysetpermits",
            Native::PsemSetPermits => "psemaphore.setpermits",
            Native::PsemAcquire => "psemaphore.acquire",
            Native::PsemRelease => "psemaphore.release",
            Native::PsemUpdateLease => "psemaphore.updatelease",
            Native::PsemAvailable => "psemaphore.available",
            Native::PsemAcquired => "psemaphore.acquired",
            Native::CountdownTrySet => "countdown.trysetcount",
            Native::CountdownDecr => "countdown.decr",
            Native::RateTrySet => "ratelimiter.trysetrate",
            Native::RateSet | Native::RateExpire => "ratelimiter.setrate",
            Native::RateAcquire => "ratelimiter.acquire",
            Native::RateAvailable => "ratelimiter.available",
            Native::RateRelease => "ratelimiter.release",
            Native::Gcra => "gcra",
        }
    }
}

/// One argument of the native command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum A {
    /// `KEYS[i + 1]`, reused as it is.
    Key(usize),
    /// `ARGV[i + 1]`, reused as it is.
    Argv(usize),
    /// A keyword.
    Lit(&'static [u8]),
    /// Derived bytes (an owner without `:write`, a latch's request id, a fair lock's name).
    Own(Vec<u8>),
}

/// What the mapping depends on besides the call: how the module publishes.
#[derive(Clone, Copy, Debug)]
pub struct Env {
    pub sharded: bool,
    /// Redis Cluster: every key of a script must hash to one slot, or it fails `CROSSSLOT`.
    pub cluster: bool,
}

impl Env {
    /// The publish command Redisson passes when it publishes the way the module does.
    pub(crate) fn publish_cmd(self) -> &'static [u8] {
        if self.sharded {
            b"SPUBLISH"
        } else {
            b"PUBLISH"
        }
    }
}

/// The longest time accepted (about 34 years): no `now + time` can overflow, in Redis or here.
pub const MAX_MS: i64 = 1 << 40;

/// How a script publishes its unlock message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// `redis.call('publish', ...)`: only when the module publishes globally too.
    Fixed,
    /// `redis.call(ARGV[i], ...)` (1-based `i`): Redisson passes `PUBLISH` or `SPUBLISH`, which
    /// must be the way the module publishes (`lockmod.pubsub`).
    Arg(usize),
}
