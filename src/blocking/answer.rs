//! Answering a parked client, so that every acquire gets exactly one reply and a grant counts
//! only once its reply reached the client.
//!
//! A grant is written when it is made (in `serve`), but its reply reaches the client only
//! when Redis handles unblocked clients, before it sleeps. Whatever happens to the client in
//! between is handled here and in `callbacks`:
//! - the answer carries the grant's [`GiveBack`]: if Redis drops it unwritten (`CLIENT
//!   UNBLOCK ... ERROR`, `CLIENT KILL`, a disconnect), it comes back through the disconnect
//!   callback, inside the command that drops it, and is given back there (`give_back`), as a
//!   release would, before any other command can see the grant;
//! - before Redis 7.4, where a timeout at that moment (the BLOCK time running out, `CLIENT
//!   UNBLOCK ... TIMEOUT`) would drop the answer with no reply at all (7.0) or trip the
//!   server's assertion (7.2) ([`crate::ffi::answers_due`]), the client stays parked in
//!   Redis' eyes, in [`ANSWERED`], until the hook hands the answers to Redis, right before
//!   Redis writes them (7.0: its before-sleep event; 7.2: a handle of the module's own in its
//!   list of unblocked clients). Until then Redis calls the client's own callbacks: a timeout
//!   is answered with the grant (what the command would reply now: the client holds it), an
//!   error or a disconnect gives the grant back. Exactly one reply either way, none lost.

use std::cell::RefCell;

use super::request::Request;
use super::waiter::{Handle, LockId, Waiter};
use crate::core::sync::permits;
use crate::core::Reply;
use crate::ffi::answers_due::{answers_wait, before_answers_written};
use crate::ffi::Ctx;

/// What undoes a grant: the release its holder would send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GiveBack {
    /// `LOCK.UNLOCK key owner lease` (fenced grants too: a token is never taken back).
    Lock { owner: Vec<u8>, lease: i64 },
    /// `RWLOCK.UNLOCK key owner READ lease`.
    Read { owner: Vec<u8>, lease: i64 },
    /// `RWLOCK.UNLOCK key owner WRITE lease`.
    Write { owner: Vec<u8>, lease: i64 },
    /// `FAIRLOCK.UNLOCK key owner lease`.
    Fair { owner: Vec<u8>, lease: i64 },
    /// `SEMAPHORE.RELEASE name permits`.
    Semaphore { permits: i64 },
    /// The permits' ids, released as `PSEMAPHORE.RELEASE name id...` releases them.
    Permits { ids: Vec<Vec<u8>> },
    /// `RATELIMITER.RELEASE name permits [CLIENT id]`: takes the permits off the newest grants,
    /// which the grant being given back is.
    Rate { name: Vec<u8>, client: Option<Vec<u8>>, permits: i64 },
}

impl GiveBack {
    /// What gives back the grant `req` was answered with `reply`; None when it took nothing
    /// (a latch's wait only reads).
    pub fn of(req: &Request, reply: &Reply) -> Option<GiveBack> {
        let owner = req.owner().to_vec();
        Some(match *req {
            Request::Lock { lease, .. } => GiveBack::Lock { owner, lease },
            Request::Read { lease, .. } => GiveBack::Read { owner, lease },
            Request::Write { lease, .. } => GiveBack::Write { owner, lease },
            Request::Fair { lease, .. } => GiveBack::Fair { owner, lease },
            Request::Semaphore { permits } => GiveBack::Semaphore { permits },
            Request::Permits { .. } => {
                let Reply::Array(ids) = reply else { return None };
                let id = |r: &Reply| match r {
                    Reply::Bulk(hex) => permits::parse_id(hex).ok(),
                    _ => None,
                };
                GiveBack::Permits { ids: ids.iter().filter_map(id).collect() }
            }
            Request::RateLimit { ref name, ref client, permits, .. } => {
                GiveBack::Rate { name: name.to_vec(), client: client.as_ref().map(|c| c.to_vec()), permits }
            }
            Request::Latch => return None,
        })
    }
}

/// A grant to give back, and its lock: what an answer carries in case it is lost.
pub type Undelivered = (LockId, GiveBack);

/// A client answered but still parked in Redis' eyes (before Redis 7.4): see the file's notes.
pub(super) struct Answered {
    client: u64,
    pub(super) bc: Handle,
    pub(super) reply: Reply,
    pub(super) give_back: Option<Undelivered>,
}

thread_local! {
    /// The answers waiting for the before-sleep hook, in the order they were made.
    static ANSWERED: RefCell<Vec<Answered>> = const { RefCell::new(Vec::new()) };
}

/// Answers `w`, which left its lock's waiters, with `reply`; `give_back` undoes the grant the
/// reply reports, should the reply never reach the client.
pub(super) fn answer(ctx: &Ctx, w: Waiter, reply: Reply, give_back: Option<Undelivered>) {
    if !answers_wait() || !before_answers_written(ctx, before_sleep) {
        return w.bc.answer(reply, give_back);
    }
    let a = Answered { client: w.client, bc: w.bc, reply, give_back };
    ANSWERED.with(|l| l.borrow_mut().push(a));
}

/// The answer waiting for the client with id `client`, taken out (its timeout came first).
pub(super) fn take_by_client(client: u64) -> Option<Answered> {
    take(|a| a.client == client)
}

/// The answer waiting for the client whose handle is `bc`, taken out (it went away, or was
/// unblocked with an error, first).
pub(super) fn take_by_handle(bc: usize) -> Option<Answered> {
    take(|a| a.bc.id() == bc)
}

fn take(is: impl Fn(&Answered) -> bool) -> Option<Answered> {
    // The list holds one event-loop iteration's grants: usually empty, a search is cheap.
    ANSWERED.with(|l| {
        let mut l = l.borrow_mut();
        let i = l.iter().position(is)?;
        Some(l.remove(i))
    })
}

/// The hook: hands every waiting answer to Redis, which writes them right after.
/// True if it handed any.
fn before_sleep(_ctx: &Ctx) -> bool {
    let due = ANSWERED.with(|l| std::mem::take(&mut *l.borrow_mut()));
    let handed = !due.is_empty();
    for a in due {
        a.bc.answer(a.reply, a.give_back);
    }
    handed
}

// Test code only (compiled under cfg(test)): an unwrap, expect or panic here is a failed test,
// never reachable from the loaded module.
#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    #[test]
    fn a_grant_is_given_back_by_the_release_its_holder_would_send() {
        let o = || b"me".to_vec();
        let cases: &[(Request, Reply, Option<GiveBack>)] = &[
            (Request::Lock { owner: o(), lease: 5, token: false }, Reply::Nil, Some(GiveBack::Lock { owner: o(), lease: 5 })),
            (Request::Lock { owner: o(), lease: 5, token: true }, Reply::Array(vec![Reply::Int(-1), Reply::Int(7)]), Some(GiveBack::Lock { owner: o(), lease: 5 })),
            (Request::Read { owner: o(), lease: 6 }, Reply::Nil, Some(GiveBack::Read { owner: o(), lease: 6 })),
            (Request::Write { owner: o(), lease: 7, token: false }, Reply::Nil, Some(GiveBack::Write { owner: o(), lease: 7 })),
            (Request::Fair { owner: o(), lease: 8, wait: 1, noqueue: false, token: false }, Reply::Nil, Some(GiveBack::Fair { owner: o(), lease: 8 })),
            (Request::Semaphore { permits: 3 }, Reply::Int(1), Some(GiveBack::Semaphore { permits: 3 })),
            (Request::Latch, Reply::Int(1), None),
        ];
        for (req, reply, want) in cases {
            assert_eq!(&GiveBack::of(req, reply), want, "{req:?}");
        }
    }

    #[test]
    fn expirable_permits_are_given_back_by_their_ids() {
        let hex = |b: u8| Reply::Bulk(permits::id_hex(&[b; permits::ID_LEN]).into_bytes());
        let req = Request::Permits { permits: 2, lease: 100 };
        let got = GiveBack::of(&req, &Reply::Array(vec![hex(1), hex(2)]));
        assert_eq!(got, Some(GiveBack::Permits { ids: vec![vec![1; permits::ID_LEN], vec![2; permits::ID_LEN]] }));
    }
}
