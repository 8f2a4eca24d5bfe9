//! What a client asks for and one try at it: [`Request`] (enough to retry the same acquire)
//! and [`attempt`], the exact code path of the non-blocking command, run alike by the command
//! itself, a parked client's retry and a timeout, so a grant from a wake-up is the grant the
//! command would have made.

use crate::core::lock::reentrant::{self, Acquired};
use crate::core::lock::{fair, fencing, rwlock};
use crate::core::{Reply, Result};
use crate::effects::stats;
use crate::effects::RedisStore;

use crate::acl::Who;
use crate::core::access::{KeyUse, Need};
use crate::core::lock::rwlock::Writers;
use crate::core::rate::{limiter, window};
use crate::core::sync::{countdown, permits, semaphore};
use crate::core::wait_times::WaitKind;
use crate::ffi::{Args, Ctx};

/// What a parked client asked for: enough to retry the same acquire.
/// A command builds it around its own owner argument (`Request<&[u8]>`, no copy); a client
/// that parks keeps an owned one (`Request`, the default).
#[derive(Clone, Debug)]
pub enum Request<O = Vec<u8>> {
    /// `LOCK.ACQUIRE`, fenced with `TOKEN`.
    Lock { owner: O, lease: i64, token: bool },
    /// `RWLOCK.RLOCK`.
    Read { owner: O, lease: i64 },
    /// `RWLOCK.WLOCK`, fenced with `TOKEN`.
    Write { owner: O, lease: i64, token: bool },
    /// `FAIRLOCK.ACQUIRE`, fenced with `TOKEN`.
    Fair { owner: O, lease: i64, wait: i64, noqueue: bool, token: bool },
    /// `SEMAPHORE.ACQUIRE name permits`.
    Semaphore { permits: i64 },
    /// `PSEMAPHORE.ACQUIRE name permits lease_ms` (`lease` 0: no lease).
    Permits { permits: i64, lease: i64 },
    /// `COUNTDOWN.AWAIT name`.
    Latch,
    /// `RATELIMITER.ACQUIRE name permits [CLIENT id] [NOW ms]`: parked on the value key of the
    /// state it uses (`core::rate::limiter::state_key`), so each state has its own FIFO. A
    /// parked one never has `now` (`NOW` and `BLOCK` do not combine).
    RateLimit { name: O, client: Option<O>, permits: i64, now: Option<i64> },
}

/// The line a parked client waits in on its name: FIFO holds within a line, never across, as
/// each line is served by its own rule. A latch's waiters see the count reach 0, a semaphore's
/// take permits from it: a semaphore waiter that cannot have its permits must not hold back a
/// latch waiter on the same name (nor the reverse), while the semaphores' waiters (both kinds
/// take from one counter) keep their strict FIFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// The locks, by their own order (`serve`: arrival, the fair queue, readers together).
    Lock,
    /// `SEMAPHORE.ACQUIRE` and `PSEMAPHORE.ACQUIRE`; `RATELIMITER.ACQUIRE` (on its own value key,
    /// so never beside the others), strict FIFO too.
    Permits,
    /// `COUNTDOWN.AWAIT`.
    Latch,
}

/// The result of one acquire attempt: granted (with the acquire's reply) or not yet (with the
/// reply the non-blocking command would give now).
pub enum Attempt {
    Granted(Reply),
    Refused(Reply),
}

impl<O> Request<O> {
    /// The line this request waits in when parked.
    pub fn line(&self) -> Line {
        match self {
            Request::Semaphore { .. } | Request::Permits { .. } | Request::RateLimit { .. } => Line::Permits,
            Request::Latch => Line::Latch,
            _ => Line::Lock,
        }
    }
}

impl<O: AsRef<[u8]>> Request<O> {
    /// The request with its own copy of the owner, to outlive the command.
    pub fn to_owned(&self) -> Request {
        let owner = self.owner().to_vec();
        match *self {
            Request::Lock { lease, token, .. } => Request::Lock { owner, lease, token },
            Request::Read { lease, .. } => Request::Read { owner, lease },
            Request::Write { lease, token, .. } => Request::Write { owner, lease, token },
            Request::Fair { lease, wait, noqueue, token, .. } => Request::Fair { owner, lease, wait, noqueue, token },
            Request::Semaphore { permits } => Request::Semaphore { permits },
            Request::Permits { permits, lease } => Request::Permits { permits, lease },
            Request::Latch => Request::Latch,
            Request::RateLimit { ref name, ref client, permits, now } => Request::RateLimit {
                name: name.as_ref().to_vec(),
                client: client.as_ref().map(|c| c.as_ref().to_vec()),
                permits,
                now,
            },
        }
    }

    /// What it waits for, as `LOCK.INFO` and the wait-time histograms name it.
    pub fn wait_kind(&self) -> WaitKind {
        match self {
            Request::Lock { .. } => WaitKind::Lock,
            Request::Read { .. } => WaitKind::Read,
            Request::Write { .. } => WaitKind::Write,
            Request::Fair { .. } => WaitKind::Fair,
            Request::Semaphore { .. } => WaitKind::Semaphore,
            Request::Permits { .. } => WaitKind::Permits,
            Request::Latch => WaitKind::Latch,
            Request::RateLimit { .. } => WaitKind::RateLimit,
        }
    }

    /// The lease asked for (ms).
    pub fn lease(&self) -> i64 {
        match self {
            Request::Lock { lease, .. }
            | Request::Read { lease, .. }
            | Request::Write { lease, .. }
            | Request::Fair { lease, .. }
            | Request::Permits { lease, .. } => *lease,
            Request::Semaphore { .. } | Request::Latch | Request::RateLimit { .. } => 0,
        }
    }

    /// The command that asked, lowercase as Redis names it in errors.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Lock { .. } => "lock.acquire",
            Request::Read { .. } => "rwlock.rlock",
            Request::Write { .. } => "rwlock.wlock",
            Request::Fair { .. } => "fairlock.acquire",
            Request::Semaphore { .. } => "semaphore.acquire",
            Request::Permits { .. } => "psemaphore.acquire",
            Request::Latch => "countdown.await",
            Request::RateLimit { .. } => "ratelimiter.acquire",
        }
    }

    pub fn owner(&self) -> &[u8] {
        match self {
            Request::Lock { owner, .. }
            | Request::Read { owner, .. }
            | Request::Write { owner, .. }
            | Request::Fair { owner, .. } => owner.as_ref(),
            Request::Semaphore { .. } | Request::Permits { .. } | Request::Latch | Request::RateLimit { .. } => b"",
        }
    }

    /// A synchronizer's wait (no owner, no lease of a lock): served strictly in arrival order.
    pub fn is_sync(&self) -> bool {
        matches!(self, Request::Semaphore { .. } | Request::Permits { .. } | Request::Latch | Request::RateLimit { .. })
    }

    /// The permits a semaphore waiter wants (0 for the others), for `SYNC.INFO`.
    pub fn permits(&self) -> i64 {
        match self {
            Request::Semaphore { permits } | Request::Permits { permits, .. } | Request::RateLimit { permits, .. } => {
                *permits
            }
            _ => 0,
        }
    }

    /// What a synchronizer's waiter is answered when it leaves without being served (its
    /// `BLOCK` ran out): the refusal, with no write and no look at the keyspace, so it never
    /// takes permits past an earlier waiter. None for the locks, which look again.
    pub fn sync_refusal(&self) -> Option<Reply> {
        match self {
            // The rate limiter's is the wait read when it leaves ([`timeout_reply`]); 0, "retry
            // now", where there is no keyspace to read.
            Request::Semaphore { .. } | Request::Latch | Request::RateLimit { .. } => Some(Reply::Int(0)),
            Request::Permits { .. } => Some(Reply::Nil),
            _ => None,
        }
    }
}

/// Runs the acquire of `req` on `key`: the exact code path of the non-blocking command, for
/// the command itself, a parked client's retry and a timeout alike. Counts grants. `writers`:
/// whether a parked writer makes a new reader wait (see `priority`).
pub fn attempt<O: AsRef<[u8]>>(
    store: &mut RedisStore,
    key: &[u8],
    req: &Request<O>,
    writers: Writers,
) -> Result<Attempt> {
    attempt_as(store, key, req.owner(), req, writers).map_err(|e| e.in_command(req.command()))
}

/// [`attempt`] for a parked client, on a store acting for its user (`for_waiter`): Redis
/// checked the lock key when the client parked, but its user may have lost it since (or been
/// deleted), so the key is checked again, with everything the acquire touches, before any
/// write.
pub(super) fn attempt_for_waiter(
    store: &mut RedisStore,
    key: &[u8],
    req: &Request,
    writers: Writers,
) -> Result<Attempt> {
    let need = match req {
        // A latch's waiter only reads it.
        Request::Latch => Need::Key(key.to_vec(), KeyUse::Read),
        _ => crate::core::access::lock(key),
    };
    crate::core::permit(store, || vec![need])?;
    attempt(store, key, req, writers)
}

/// [`attempt`] with `req`'s owner given as `owner` (the same bytes): the command passes its
/// own argument, which the store recognises and hands to Redis without copying it.
pub(super) fn attempt_as<O: AsRef<[u8]>>(
    store: &mut RedisStore,
    key: &[u8],
    owner: &[u8],
    req: &Request<O>,
    writers: Writers,
) -> Result<Attempt> {
    debug_assert_eq!(owner, req.owner());
    if req.is_sync() {
        // A parked waiter, served in arrival order: nobody is ahead of it.
        return attempt_sync(store, key, req, false);
    }
    let token = match req {
        Request::Lock { token, .. } | Request::Write { token, .. } | Request::Fair { token, .. } => *token,
        Request::Read { .. }
        | Request::Semaphore { .. }
        | Request::Permits { .. }
        | Request::Latch
        | Request::RateLimit { .. } => false,
    };
    let grant = |store: &mut RedisStore| match req {
        Request::Lock { lease, .. } => reentrant::acquire(store, key, owner, *lease),
        Request::Read { lease, .. } => rwlock::read_lock(store, key, owner, *lease, writers),
        Request::Write { lease, .. } => rwlock::write_lock(store, key, owner, *lease),
        Request::Fair { lease, wait, noqueue, .. } => {
            let if_refused = if *noqueue { fair::IfRefused::NoQueue } else { fair::IfRefused::Queue };
            fair::acquire(store, key, owner, *lease, *wait, if_refused)
        }
        Request::Semaphore { .. } | Request::Permits { .. } | Request::Latch | Request::RateLimit { .. } => {
            Ok(Acquired::Refused(0))
        }
    };
    let (outcome, reply) = if token {
        fencing::fenced(store, key, grant)?
    } else {
        let outcome = grant(store)?;
        (outcome, outcome.reply())
    };
    Ok(match outcome {
        Acquired::Refused(_) => Attempt::Refused(reply),
        Acquired::New => {
            stats::ACQUIRED.inc();
            let now = crate::core::Store::now(store);
            // Its expiry, were it to come first, is counted by an `expired` event.
            crate::ffi::events::watch_keyspace(store.ctx());
            let joins = matches!(req, Request::Read { .. });
            stats::granted(store.db(), key, now.saturating_add(req.lease()), now, joins);
            Attempt::Granted(reply)
        }
        Acquired::Reentered => {
            stats::ACQUIRED.inc();
            stats::REENTRIES.inc();
            Attempt::Granted(reply)
        }
    })
}

/// One try of a synchronizer's wait (`req.is_sync()`), the exact code path of its
/// non-blocking command: take the permits (none while `queued_ahead`: someone is parked
/// first), or see the latch open. Replies: `1`/`0` (semaphore, latch), the new permits' ids
/// or nil (expirable semaphore).
pub(super) fn attempt_sync<O: AsRef<[u8]>>(
    store: &mut RedisStore,
    key: &[u8],
    req: &Request<O>,
    queued_ahead: bool,
) -> Result<Attempt> {
    let yes_no = |ok: bool| if ok { Attempt::Granted(Reply::Int(1)) } else { Attempt::Refused(Reply::Int(0)) };
    let outcome = match *req {
        Request::Semaphore { permits } => yes_no(semaphore::acquire(store, key, permits, queued_ahead)?),
        Request::Permits { permits, lease } => {
            let now = crate::core::Store::now(store);
            let until = if lease == 0 { permits::NO_LEASE } else { crate::core::deadline(now, lease)? };
            let new_id = crate::ffi::random::bytes::<{ permits::ID_LEN }>;
            match permits::acquire(store, key, permits, until, queued_ahead, new_id)? {
                permits::Acquire::Granted(ids) => {
                    let hex = |id: &permits::PermitId| Reply::Bulk(permits::id_hex(id).into_bytes());
                    Attempt::Granted(Reply::Array(ids.iter().map(hex).collect()))
                }
                permits::Acquire::Refused { .. } => Attempt::Refused(Reply::Nil),
            }
        }
        Request::Latch => yes_no(countdown::is_open(store, key)?),
        Request::RateLimit { ref name, ref client, permits, now } => {
            let now = now.unwrap_or_else(|| crate::core::Store::now(store));
            let random = crate::ffi::random::unique::<{ window::RANDOM_LEN }>();
            let client = client.as_ref().map(AsRef::as_ref);
            match limiter::acquire(store, name.as_ref(), client, permits, now, &random, queued_ahead)? {
                limiter::Acquire::Granted => {
                    stats::RATE_GRANTED.inc();
                    Attempt::Granted(Reply::Nil)
                }
                limiter::Acquire::Wait(ms) => {
                    stats::RATE_REFUSED.inc();
                    Attempt::Refused(Reply::Int(ms))
                }
            }
        }
        _ => return Err(crate::core::LockError::Syntax),
    };
    if let Attempt::Granted(_) = outcome {
        stats::SYNC_GRANTED.inc();
    }
    Ok(outcome)
}

/// What a synchronizer's waiter is answered when its `BLOCK` runs out, by reads alone (no
/// permits are taken past an earlier waiter, and a timeout may fall in a write pause): the
/// fixed refusal, or for a rate limiter the wait it would be told now, checked against the
/// waiter's user. None for the locks.
pub(super) fn timeout_reply(ctx: &Ctx, req: &Request, who: &Who) -> Option<Reply> {
    let Request::RateLimit { name, client, permits, .. } = req else { return req.sync_refusal() };
    let args = Args::empty();
    let now = Ctx::now_ms();
    let mut store = RedisStore::at(ctx, &args, now).for_waiter(who).read_only();
    Some(match limiter::wait(&mut store, name, client.as_deref(), *permits, now) {
        Ok(ms) => Reply::Int(ms),
        Err(e) => Reply::Error(e.in_command(req.command()).to_string()),
    })
}
