//! Waiting inside the server: `BLOCK ms` parks a client until the lock is granted to it.
//!
//! Policy: per lock, parked clients are served in arrival order, and serving stops at the first
//! one that still cannot have the lock, so a later parked reader never overtakes an earlier
//! parked writer, while consecutive readers are granted together. A non-blocking call (and a
//! BLOCK call's first try) keeps Redisson's semantics and may take a free lock directly, with
//! two exceptions (`priority`): a new reader waits behind a parked writer unless it re-enters,
//! and no acquire of another kind takes a free name past a live fair waiter.
//!
//! A grant is computed by the same core function as the non-blocking command, on a store whose
//! writes propagate like any command's. Wake-ups come from three places:
//! - our own write commands: `serve_now` at the end of each serves the lock at once, in the
//!   same command, so a release hands over with no window for others to barge in;
//! - a change to a lock (or its fair queue) by anyone else, Redisson's Lua included: a 1 ms
//!   tick compares each parked lock's signature (`poll`) and serves the lock when it changed;
//!   `expired`/`evicted` events and FLUSHALL queue the lock in `pending`, served from a 0 ms
//!   timer (a notification callback is no place to write);
//! - lease expiry: a timer at the lock's absolute expiry, since Redis' own lazy or active
//!   expiry may come much later.
//!
//! Fair-lock waiters keep their place in the lock's queue while parked (`fair_waiters`).
//!
//! Every write the module starts on its own (a timer, a BLOCK timeout) first asks
//! [`paused::gate`]: while writes are paused it waits, in `pending` and the cancel list,
//! until they resume (`paused`).
//!
//! Invariant: a waiter is in the registry if and only if its `BlockedClient` has not been
//! released; every path out (grant, timeout, disconnect, CLIENT UNBLOCK) releases it once.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::caller::{Access, Who};
use crate::core::reentrant::{self, Acquired};
use crate::core::{fair, fencing, rwlock};
use crate::core::{LockError, Reply, Result};
use crate::effects::RedisStore;
use crate::ffi::events::{BlockedClient, TimerId};
use crate::ffi::{Args, Ctx, KeyKind};
use crate::stats;

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
}

/// The result of one acquire attempt: granted (with the acquire's reply) or not yet (with the
/// reply the non-blocking command would give now).
pub enum Attempt {
    Granted(Reply),
    Refused(Reply),
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
        }
    }

    /// The lease asked for (ms).
    pub fn lease(&self) -> i64 {
        match self {
            Request::Lock { lease, .. }
            | Request::Read { lease, .. }
            | Request::Write { lease, .. }
            | Request::Fair { lease, .. } => *lease,
        }
    }

    /// The command that asked, lowercase as Redis names it in errors.
    pub fn command(&self) -> &'static str {
        match self {
            Request::Lock { .. } => "lock.acquire",
            Request::Read { .. } => "rwlock.rlock",
            Request::Write { .. } => "rwlock.wlock",
            Request::Fair { .. } => "fairlock.acquire",
        }
    }

    pub fn owner(&self) -> &[u8] {
        match self {
            Request::Lock { owner, .. }
            | Request::Read { owner, .. }
            | Request::Write { owner, .. }
            | Request::Fair { owner, .. } => owner.as_ref(),
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
fn attempt_for_waiter(store: &mut RedisStore, key: &[u8], req: &Request, writers: Writers) -> Result<Attempt> {
    crate::core::permit(store, || vec![crate::access::lock(key)])?;
    attempt(store, key, req, writers)
}

/// [`attempt`] with `req`'s owner given as `owner` (the same bytes): the command passes its
/// own argument, which the store recognises and hands to Redis without copying it.
fn attempt_as<O: AsRef<[u8]>>(
    store: &mut RedisStore,
    key: &[u8],
    owner: &[u8],
    req: &Request<O>,
    writers: Writers,
) -> Result<Attempt> {
    debug_assert_eq!(owner, req.owner());
    let token = match req {
        Request::Lock { token, .. } | Request::Write { token, .. } | Request::Fair { token, .. } => *token,
        Request::Read { .. } => false,
    };
    let grant = |store: &mut RedisStore| match req {
        Request::Lock { lease, .. } => reentrant::acquire(store, key, owner, *lease),
        Request::Read { lease, .. } => rwlock::read_lock(store, key, owner, *lease, writers),
        Request::Write { lease, .. } => rwlock::write_lock(store, key, owner, *lease),
        Request::Fair { lease, wait, noqueue, .. } => {
            let if_refused = if *noqueue { fair::IfRefused::NoQueue } else { fair::IfRefused::Queue };
            fair::acquire(store, key, owner, *lease, *wait, if_refused)
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
            stats::granted(store.db(), key, now.saturating_add(req.lease()), now);
            Attempt::Granted(reply)
        }
        Acquired::Reentered => {
            stats::ACQUIRED.inc();
            stats::REENTRIES.inc();
            Attempt::Granted(reply)
        }
    })
}

/// An acquire command: granted now if it can be, else parked when `block` is given (the
/// timeout in ms, 0 = no limit), else the refusal.
/// `owner` is the command's own argument (`req` borrows it; a client that parks keeps a copy).
pub fn acquire(
    ctx: &Ctx,
    args: &Args,
    key: &[u8],
    owner: &[u8],
    req: Request<&[u8]>,
    block: Option<i64>,
) -> Result<Reply> {
    let writers = priority::writers_ahead(ctx, key, &req);
    let mut store = RedisStore::new(ctx, args);
    let outcome = attempt_as(&mut store, key, owner, &req, writers).map_err(|e| e.in_command(req.command()));
    drop(store);
    // A fair acquire may have purged or joined the queue of a lock others are parked on.
    serve_now(ctx);
    match (outcome?, block) {
        (Attempt::Granted(reply), _) => Ok(reply),
        (Attempt::Refused(reply), block) => {
            stats::REFUSED.inc();
            match block {
                Some(ms) => park(ctx, key, req.to_owned(), ms, reply),
                None => Ok(reply),
            }
        }
    }
}

mod changes;
mod fair_waiters;
mod paused;
pub mod poll;
mod timers;

pub use changes::{any_parked, changed, on_key_gone, recheck_all, ServedBy};
use changes::{unwatch_lock, watch_lock};
pub use timers::on_timer;
mod priority;

pub use crate::core::rwlock::Writers;
mod waiters;

use waiters::Waiters;

/// Why a timer was armed.
pub enum TimerData {
    /// Serve every lock in `pending`.
    Pending,
    /// The lease of a lock with parked clients runs out now.
    Expiry { db: i32, key: Vec<u8> },
    /// Keep parked fair waiters' queue places alive, and serve their locks.
    FairTick,
    /// Take fair waiters that gave up out of their queues.
    FairCancels,
    /// Look for changes by others to locks with parked clients (`poll`).
    Poll,
    /// Writes were paused: run what waited, if they may run now (`paused`).
    Resume,
}

/// A lock: its database and key.
type LockId = (i32, Vec<u8>);

struct Waiter {
    client: u64,
    bc: BlockedClient,
    req: Request,
    /// The user it ran as: its grant is checked against that user's ACL.
    who: Who,
    /// When it parked (ms), for `LOCK.INFO`.
    since: i64,
}

#[derive(Default)]
struct Registry {
    locks: HashMap<LockId, Waiters>,
    /// Lock key -> the databases where it has parked clients: resolves a name the command
    /// filter saw (it does not know the database) or the store wrote.
    by_name: HashMap<Vec<u8>, Vec<i32>>,
    pending: Vec<LockId>,
    pending_timer: Option<TimerId>,
    expiry_timers: HashMap<LockId, (TimerId, i64)>,
    fair_tick: Option<TimerId>,
}

thread_local! {
    // Redis runs every module callback on its main thread.
    static REGISTRY: RefCell<Registry> = RefCell::default();
}

/// Runs `f` on the registry. Never re-entered: no Redis call that can call back into this
/// module (a write, a timer) is made while the registry is borrowed.
fn with<R>(f: impl FnOnce(&mut Registry) -> R) -> Option<R> {
    REGISTRY.with(|r| r.try_borrow_mut().ok().map(|mut g| f(&mut g)))
}

/// Parks the client until `req` is granted on `key`, for up to `block_ms` (0 = no limit).
/// Returns `refused` unchanged where the client cannot block (MULTI, scripts).
pub fn park(ctx: &Ctx, key: &[u8], req: Request, block_ms: i64, refused: Reply) -> Result<Reply> {
    // On a (writable) replica nothing may be granted from outside a command: never parked.
    if !ctx.can_block() || ctx.is_replica() {
        return Ok(refused);
    }
    crate::ffi::events::watch_keyspace(ctx);
    let who = Access::caller().who(ctx);
    let Some(bc) = ctx.block_client(priority::block_limit(block_ms)) else { return Ok(refused) };
    let id = (ctx.selected_db(), key.to_vec());
    let client = ctx.client_id();
    stats::PARKED.inc();
    let fair = matches!(req, Request::Fair { .. }).then(|| req.owner().to_vec());
    let waiter = Waiter { client, bc, req, who, since: Ctx::now_ms() };
    with(|r| {
        if !r.locks.contains_key(&id) {
            watch_lock(r, &id);
        }
        r.locks.entry(id.clone()).or_default().push_back(&id, waiter)
    });
    arm_expiry(ctx, &id);
    poll::parked(ctx, &id);
    if let Some(owner) = fair {
        fair_waiters::parked(ctx, &id, &owner);
    }
    Err(LockError::Blocked)
}

/// Number of clients parked now.
pub fn parked_now() -> usize {
    with(|r| r.locks.values().map(Waiters::len).sum()).unwrap_or(0)
}

/// The first `limit` clients parked on `key` in `db`, in arrival order, and how many there
/// are, for `LOCK.INFO`.
pub fn parked_on(db: i32, key: &[u8], limit: usize) -> (Vec<crate::core::info::Parked>, usize) {
    let now = Ctx::now_ms();
    let id = (db, key.to_vec());
    let list = |w: &Waiter| {
        let request = match &w.req {
            Request::Lock { .. } => "lock",
            Request::Read { .. } => "read",
            Request::Write { .. } => "write",
            Request::Fair { .. } => "fair",
        };
        let owner = w.req.owner().to_vec();
        crate::core::info::Parked { client: w.client, request, owner, waited_ms: now - w.since }
    };
    with(|r| r.locks.get(&id).map(|q| (q.iter().take(limit).map(list).collect(), q.len())))
        .flatten()
        .unwrap_or_default()
}

/// Serves the locks of the current database that changed during this command. Called by every
/// write command after its own effects, so a release hands the lock over at once.
pub fn serve_now(ctx: &Ctx) {
    let db = ctx.selected_db();
    // The usual case, nobody parked or nothing changed: one look at an empty list.
    let ready: Vec<LockId> = with(|r| {
        if r.pending.is_empty() {
            return Vec::new();
        }
        let (mine, others): (Vec<_>, Vec<_>) = r.pending.drain(..).partition(|id| id.0 == db);
        r.pending = others;
        mine
    })
    .unwrap_or_default();
    if ready.is_empty() {
        return;
    }
    // Inside a command writes are allowed, but for a `CLIENT PAUSE` run in the same MULTI.
    if paused::gate(ctx) != paused::Gate::Open {
        with(|r| r.pending.extend(ready));
        return;
    }
    for id in ready {
        serve(ctx, &id);
    }
}

/// Grants `id` to its parked clients, in order, while they can have it. For a fair lock the
/// queue, not the order of parking, decides who is first (Redisson clients queue too, and a
/// parked waiter may have lost its place): when the first parked waiter is refused, the parked
/// waiter at the head of the queue, if any, is tried too. At most two attempts per grant.
fn serve(ctx: &Ctx, id: &LockId) {
    let who_and_req = |w: &Waiter| (w.req.clone(), w.who.clone());
    while let Some((front, who)) = with(|r| r.locks.get(id).and_then(|q| q.front()).map(who_and_req)).flatten() {
        if try_grant(ctx, id, 0, &front, &who) {
            continue;
        }
        // A reentrant acquire is refused while a fair waiter is first in line: that waiter,
        // parked further back, must not wait behind it. Only a parked fair waiter can be.
        let fair_parked = || {
            with(|r| r.locks.get(id).is_some_and(|q| q.iter().any(|w| matches!(w.req, Request::Fair { .. }))))
                .unwrap_or(false)
        };
        if !matches!(front, Request::Fair { .. } | Request::Lock { .. }) || !fair_parked() {
            break;
        }
        let head = fair_waiters::first_in_line(ctx, id);
        let at_head = with(|r| {
            let q = r.locks.get(id)?;
            q.iter().position(|w| matches!(&w.req, Request::Fair { owner, .. } if Some(owner) == head.as_ref()))
        })
        .flatten();
        match at_head {
            Some(i) if i > 0 => {
                let Some((req, who)) = with(|r| r.locks.get(id).and_then(|q| q.get(i)).map(who_and_req)).flatten()
                else {
                    break;
                };
                if !try_grant(ctx, id, i, &req, &who) {
                    break;
                }
            }
            _ => break,
        }
    }
    // Served as the keyspace is now: a change reported meanwhile (the grants' own writes
    // included) needs no second pass from the pending timer.
    with(|r| r.pending.retain(|p| p != id));
    arm_expiry(ctx, id);
}

/// Runs the acquire of the `i`-th parked waiter of `id`; if it is granted (or fails), answers
/// and releases that client. True if the client was answered.
fn try_grant(ctx: &Ctx, id: &LockId, i: usize, req: &Request, who: &Who) -> bool {
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(who).served_by_writer();
    // Served in arrival order: a parked reader ahead of a parked writer goes first.
    let outcome = attempt_for_waiter(&mut store, &id.1, req, Writers::None);
    drop(store);
    let reply = match outcome {
        Ok(Attempt::Refused(_)) => return false,
        Ok(Attempt::Granted(reply)) => reply,
        // The key changed type under the waiter, or its user lost a permission: it gets the
        // error the command would give.
        Err(e) => Reply::Error(e.to_string()),
    };
    if let Some(w) = with(|r| r.locks.get_mut(id).and_then(|q| q.remove(i))).flatten() {
        stats::HANDOFFS.inc();
        w.bc.unblock(Some(reply));
    }
    true
}

/// Keeps one timer per lock with parked clients, at its lease's absolute expiry; forgets the
/// lock when nobody waits for it any more.
fn arm_expiry(ctx: &Ctx, id: &LockId) {
    let waiting = with(|r| {
        let waiting = r.locks.get(id).is_some_and(|q| !q.is_empty());
        if !waiting && r.locks.remove(id).is_some() {
            unwatch_lock(r, id);
        }
        waiting
    })
    .unwrap_or(false);
    if !waiting {
        poll::forget(ctx, id);
    }
    let expires_at = if waiting { expiry_of(ctx, id).or_else(|| priority::queue_expiry(ctx, id)) } else { None };
    // A timer due no later than the lock's expiry is kept: when it fires early it serves the
    // lock (refused) and re-arms for the expiry then. A hand-off moves the expiry at every
    // grant; re-creating the timer each time would cost more than the rest of the hand-off.
    let stale = with(|r| match (r.expiry_timers.get(id), expires_at) {
        (Some(&(_, at)), Some(want)) if at <= want => None,
        _ => r.expiry_timers.remove(id).map(|(t, _)| t),
    })
    .flatten();
    if let Some(t) = stale {
        ctx.stop_timer(t);
    }
    if let Some(at) = expires_at {
        let already = with(|r| r.expiry_timers.contains_key(id)).unwrap_or(true);
        if !already {
            // +1: Redis considers a key expired only once its expiry time has passed. A lease
            // years long wakes the lock early and re-arms (Redis' timers count in us).
            let ms = (at - Ctx::now_ms()).saturating_add(1).min(priority::MAX_TIMER_MS);
            let t = ctx.create_timer(ms, TimerData::Expiry { db: id.0, key: id.1.clone() });
            with(|r| r.expiry_timers.insert(id.clone(), (t, at)));
        }
    }
}

/// The absolute expiry of the lock key, if it has one (in the lock's database).
fn expiry_of(ctx: &Ctx, id: &LockId) -> Option<i64> {
    let previous = ctx.selected_db();
    if previous != id.0 && !ctx.select_db(id.0) {
        return None;
    }
    let name = ctx.string(&id.1);
    let key = ctx.open_key(name.as_ref(), false);
    let at = if key.kind() == KeyKind::Empty { None } else { key.expire_at() };
    drop(key);
    if previous != id.0 {
        ctx.select_db(previous);
    }
    at
}

/// Queues `id` to be served by `by`: from a 0 ms timer, or by the writer right after.
fn queue(ctx: &Ctx, id: LockId, by: ServedBy) {
    let need_timer = with(|r| {
        if !r.pending.contains(&id) {
            r.pending.push(id);
        }
        by == ServedBy::Timer && r.pending_timer.is_none()
    })
    .unwrap_or(false);
    if need_timer {
        stats::SERVE_TIMERS.inc();
        let t = ctx.create_timer(0, TimerData::Pending);
        with(|r| r.pending_timer = Some(t));
    }
}

/// FLUSHALL / FLUSHDB deleted locks without per-key events: serve every lock.
pub fn on_flush(ctx: &Ctx) {
    stats::forget_all();
    let all: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    for id in all {
        queue(ctx, id, ServedBy::Timer);
    }
}

/// A parked client's time ran out: reply what the non-blocking command replies now (which
/// may be a grant, if the lock came free this very moment). While the module may not write,
/// the refusal computed by reads alone (`paused::refusal`).
pub fn on_timeout(ctx: &Ctx) -> Reply {
    let client = ctx.client_id();
    let Some((id, w)) = with(|r| waiters::take_by_client(&mut r.locks, client)).flatten() else { return Reply::Nil };
    stats::TIMEOUTS.inc();
    let writers = priority::writers_at_timeout(&id, &w.req);
    let args = Args::empty();
    // The waiter's user is checked on both paths: a refusal replies the lock's TTL too, which
    // its user may no longer read.
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms()).for_waiter(&w.who);
    let open = paused::gate(ctx) == paused::Gate::Open;
    let (reply, granted) = if open {
        match attempt_for_waiter(&mut store, &id.1, &w.req, writers) {
            Ok(Attempt::Granted(r)) => (r, true),
            Ok(Attempt::Refused(r)) => (r, false),
            Err(e) => (Reply::Error(e.to_string()), false),
        }
    } else {
        match crate::core::permit(&mut store, || vec![crate::access::lock(&id.1)]) {
            Ok(()) => (paused::refusal(ctx, &id.1, &w.req), false),
            Err(e) => (Reply::Error(e.to_string()), false),
        }
    };
    drop(store);
    if !granted {
        // The client reads its timeout reply right after this callback: its queue place must
        // be gone by then (a reader of the queue would otherwise still see it), so the cancel
        // runs here when the module may write, and from the cancel timer only in a pause.
        if open {
            fair_waiters::cancel_now(ctx, &id, &w.req, &w.who);
        } else {
            fair_waiters::gave_up(ctx, &id, &w.req, &w.who);
        }
    }
    w.bc.unblock(None);
    arm_expiry(ctx, &id);
    reply
}

/// A parked client went away (or was unblocked with CLIENT UNBLOCK ... ERROR): forget it.
pub fn on_disconnect(ctx: &Ctx, bc: usize) {
    // Found through the index in O(log n): a pool of thousands disconnecting at once must not
    // search every queue for each client.
    if let Some((id, w)) = with(|r| waiters::take_by_handle(&mut r.locks, bc)).flatten() {
        stats::DISCONNECTS.inc();
        fair_waiters::gave_up(ctx, &id, &w.req, &w.who);
        w.bc.unblock(None);
        arm_expiry(ctx, &id);
    }
}

/// The error a parked client gets when its server stops being a primary: Redis's own text for
/// clients it unblocks on a role change, so clients handle both alike.
pub const DEMOTED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// This server became a replica: no lock may be granted here any more, so every parked client
/// gets an error at once (it retries on the new primary) instead of waiting forever.
pub fn on_demoted(ctx: &Ctx) {
    let all: Vec<LockId> = with(|r| r.locks.keys().cloned().collect()).unwrap_or_default();
    for id in all {
        while let Some(w) = with(|r| r.locks.get_mut(&id).and_then(Waiters::pop_front)).flatten() {
            stats::DISCONNECTS.inc();
            w.bc.unblock(Some(Reply::Error(DEMOTED.into())));
        }
        arm_expiry(ctx, &id);
    }
}
