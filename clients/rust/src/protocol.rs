//! Settling lost replies, as every library of this repository does (docs/clients.md):
//!
//! - An acquire or an unlock is sent once. A lost reply is settled by asking: first a barrier
//!   (`CLIENT KILL ID` of the connection that carried the request, so that it has either run
//!   or never will), then `*.HOLDS`: a hold count above the one before means the acquire was
//!   granted. Only reads are sent again.
//! - Every unlock carries `LATCH <request id> <ms>`: a lost unlock reply is settled by sending
//!   the same request again, which the latch answers with the first outcome instead of applying
//!   it twice, within half the latch's life; later it is settled by asking, as an acquire. An
//!   unlock answered on its first send cannot be sent again: its latch is deleted then (with
//!   the node's next request, transport/front.rs), as Redisson deletes its own.

use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;

use crate::client::Core;
use crate::durations::from_now;
use crate::error::Error;
use crate::kinds::Kind;
use crate::names;
use crate::reply;
use crate::transport::{CallError, Lost, Request, Synced};

/// Times a latched unlock is sent in all.
const UNLOCK_ATTEMPTS: usize = 3;

/// What an acquire's settling needs to know.
pub(crate) struct Target<'a> {
    pub core: &'a Core,
    pub kind: &'static Kind,
    pub name: &'a str,
    pub owner: &'a str,
}

impl Target<'_> {
    /// The owner's hold count (and, fenced, the token counter in the same transaction: while
    /// the owner holds the lock, the last token issued is its own), asked until answered or
    /// `resolve_timeout` passes.
    pub async fn holds(&self, fenced: bool, why: &str) -> Result<(i64, Option<u64>), Error> {
        let holds = self.kind.holds_cmd(self.name, self.owner);
        let cmds: Vec<Cmd> = if fenced {
            vec![
                redis::cmd("MULTI"),
                holds,
                redis::cmd("GET").arg(names::token_key(self.name)).clone(),
                redis::cmd("EXEC"),
            ]
        } else {
            vec![holds]
        };
        let give_up = from_now(self.core.resolve_timeout);
        let mut delay = Duration::from_millis(25);
        loop {
            let req = Request {
                key: self.name,
                cmds: &cmds,
                timeout: Some(self.core.settle_timeout),
                cancel: None,
                sync: None,
            };
            match self.core.transport.call(req).await {
                Ok(r) => {
                    let last = r.values.last().unwrap_or(&Value::Nil);
                    if !fenced {
                        return Ok((self.kind.parse_holds(last)?, None));
                    }
                    let exec = reply::items(last)?;
                    let count = self.kind.parse_holds(exec.first().unwrap_or(&Value::Nil))?;
                    let token =
                        exec.get(1).map(reply::opt_int).transpose()?.flatten().and_then(|t| u64::try_from(t).ok());
                    return Ok((count, token));
                }
                Err(CallError::Failed(e)) if !is_connection(&e) => return Err(e),
                Err(CallError::Failed(e)) if passed(give_up) => {
                    return Err(Error::unknown(self.kind.holds, self.name, format!("{why}; {e}")))
                }
                Err(CallError::Lost(l)) if passed(give_up) => {
                    return Err(Error::unknown(self.kind.holds, self.name, format!("{why}; {}", l.cause)))
                }
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    /// After a lost acquire reply: was it granted? `(granted, token)`. The barrier goes first,
    /// so that the request has either run or never will when the hold count is read (best
    /// effort: without the permission, or with its node gone, the read relies on the server
    /// having dropped that connection by then).
    pub async fn settle_acquire(&self, lost: &Lost, fenced: bool, before: i64) -> Result<(bool, Option<u64>), Error> {
        self.core.transport.barrier(lost, self.core.settle_timeout).await;
        let why = format!("{} reply lost ({})", self.kind.acquire, lost.cause);
        let (holds, token) = self.holds(fenced, &why).await?;
        let granted = holds > before;
        tracing::warn!(
            "redis-lockmod: {} {} for {}: {}; settled with {}: {}",
            self.kind.acquire,
            self.name,
            self.owner,
            lost.cause,
            self.kind.holds,
            if granted { "granted" } else { "not granted" }
        );
        Ok((granted, if granted { token } else { None }))
    }

    /// Sends a latched unlock; a lost reply re-sends the very same request (same latch id),
    /// which the server answers with the first outcome. Past half the latch's life the unlock
    /// is settled by asking. `latch`: the latch's key, deleted when the first send is answered
    /// (`None`: a copy may have gone out before, the latch stays). Returns the unlock's reply
    /// (nil, 0 or 1) and what the replica sync pipelined after it replied.
    pub async fn release(
        &self,
        unlock: Cmd,
        mut latch: Option<String>,
        sync: Option<Duration>,
        before: i64,
    ) -> Result<(Value, Option<Synced>), Error> {
        let resend_by = from_now(self.core.latch / 2);
        let cmds = vec![unlock];
        let mut lost_on: Vec<Lost> = Vec::new();
        for attempt in 0..UNLOCK_ATTEMPTS {
            if attempt > 0 && passed(resend_by) {
                break;
            }
            let timeout = if attempt == 0 { self.core.command_timeout } else { self.core.settle_timeout };
            match self
                .core
                .transport
                .call(Request { key: self.name, cmds: &cmds, timeout: Some(timeout), cancel: None, sync })
                .await
            {
                Ok(mut r) => {
                    if let (0, Some(key)) = (attempt, latch.take()) {
                        // Answered on its only send: nothing can send it again.
                        r.node.defer_latch_del(key);
                    }
                    return Ok((r.values.pop().unwrap_or(Value::Nil), r.synced));
                }
                Err(CallError::Failed(e)) => return Err(e),
                Err(CallError::Lost(l)) => {
                    tracing::warn!(
                        "redis-lockmod: {} {}: reply lost ({}); sending the same LATCH request again",
                        self.kind.unlock,
                        self.name,
                        l.cause
                    );
                    lost_on.push(l);
                }
            }
        }
        // The latch may be gone: end every connection it went out on, then compare the hold
        // count with the one before. Only the owner changes its own count.
        for l in &lost_on {
            self.core.transport.barrier(l, self.core.settle_timeout).await;
        }
        let why = format!("{} reply lost", self.kind.unlock);
        let (holds, _) = self.holds(false, &why).await?;
        if holds < before {
            return Ok((Value::Int(i64::from(holds == 0)), None));
        }
        Err(Error::unknown(self.kind.unlock, self.name, "no reply to any send of the unlock"))
    }
}

/// Whether `at` has passed (`None`: never).
fn passed(at: Option<Instant>) -> bool {
    at.is_some_and(|at| Instant::now() >= at)
}

/// A connection failure (as opposed to an error reply, which is final).
pub(crate) fn is_connection(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.code().is_none())
}
