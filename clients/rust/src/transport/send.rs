//! Writing one request and reading its replies on a connection of its own, within its
//! timeout; and ending it early when its caller stops waiting (`CLIENT UNBLOCK`).

use std::time::Duration;

use redis::{Pipeline, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::link::Link;
use super::{Node, Transport};
use crate::durations::{from_now, sleep_until};

/// The first pause before a cancelled request's unblock is sent again (it found nothing
/// parked), doubled each time up to [`UNBLOCK_RETRY_MAX`].
const UNBLOCK_RETRY: Duration = Duration::from_millis(2);
const UNBLOCK_RETRY_MAX: Duration = Duration::from_millis(100);

/// Why a request's replies did not come.
pub(super) struct SendError {
    pub what: String,
    /// The connection broke (as opposed to no reply in time).
    pub broken: bool,
}

impl Transport {
    /// Writes the pipeline and reads its replies, within `timeout`. A cancellation answers the
    /// parked request at once with `CLIENT UNBLOCK <id> TIMEOUT`: the server replies what the
    /// request got (a timeout, or a grant that came first: the module answers a grant racing
    /// the unblock with the grant, on every version, Redis 7.0 too), and that reply is read
    /// here for the caller to give back. An unblock that finds nothing parked (the request is
    /// not there yet, or its reply is on its way) is sent again, a little later each time,
    /// until the reply comes; the grace period bounds it all.
    pub(super) async fn send(
        &self,
        link: &mut Link,
        pipe: &Pipeline,
        n: usize,
        timeout: Option<Duration>,
        cancel: Option<&CancellationToken>,
        node: &Node,
    ) -> Result<(Vec<Value>, bool), SendError> {
        let client_id = link.client_id;
        let mut conn = link.conn.clone();
        let fut = conn.send_packed_commands(pipe, 0, n);
        tokio::pin!(fut);
        // No deadline: no limit (`BLOCK 0`), or one too far for an `Instant`.
        let mut deadline = timeout.and_then(from_now);
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        let mut unblocked = false;
        // When to send the unblock (again), and how long to wait after that one.
        let mut unblock_at: Option<Instant> = None;
        let mut backoff = UNBLOCK_RETRY;
        loop {
            let sleep = sleep_until(deadline);
            let retry = sleep_until(unblock_at);
            tokio::select! {
                // The request is written before an unblock can name its connection.
                biased;
                r = &mut fut => return r.map(|v| (v, unblocked)).map_err(|e| SendError { what: e.to_string(), broken: true }),
                _ = sleep => return Err(SendError { what: format!("no reply within {:?}", timeout.unwrap_or_default()), broken: false }),
                _ = cancel.cancelled(), if !unblocked => {
                    unblocked = true;
                    // The reply follows at once: the grace period bounds it from here.
                    deadline = match (deadline, from_now(self.grace)) {
                        (Some(d), Some(by)) => Some(d.min(by)),
                        (d, by) => d.or(by),
                    };
                    unblock_at = Some(Instant::now());
                }
                _ = retry => {
                    let Some(id) = client_id else {
                        return Err(SendError { what: "cancelled (no client id to unblock)".into(), broken: false });
                    };
                    match self.unblock(node, id).await {
                        Err(e) => return Err(SendError { what: format!("cancelled; CLIENT UNBLOCK failed: {e}"), broken: false }),
                        // It was parked: answered now, its reply is on its way.
                        Ok(true) => unblock_at = None,
                        Ok(false) => {
                            unblock_at = Some(Instant::now() + backoff);
                            backoff = (backoff * 2).min(UNBLOCK_RETRY_MAX);
                        }
                    }
                }
            }
        }
    }
}
