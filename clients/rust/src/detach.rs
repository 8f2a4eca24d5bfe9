//! Requests that outlive the future awaiting them.
//!
//! An acquire runs in a task of its own; the caller's future only awaits its result. Dropping
//! that future (a `select!`, a `tokio::time::timeout`) fires a cancellation token, which ends the
//! wait in the server (`CLIENT UNBLOCK`, see the transport), and the task runs to its end. What
//! it was granted meanwhile is a guard that nobody receives: dropping it gives the grant back,
//! so no grant is ever left that nobody knows of.

use std::future::Future;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::client::Core;
use crate::error::{Error, Result};

/// Runs `work` in a task of the client; its result is returned, or dropped (and so given back)
/// if this future is dropped first.
pub(crate) async fn detached<T, F, Fut>(core: &Core, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let cancel = CancellationToken::new();
    // Cancels when this future is dropped before the result came.
    let on_drop = cancel.clone().drop_guard();
    let (tx, rx) = oneshot::channel();
    let fut = work(cancel);
    core.spawn(async move {
        // A failed send drops the result here: a guard in it releases what it holds.
        let _ = tx.send(fut.await);
    });
    let result = rx.await.map_err(|_| Error::Closed)?;
    on_drop.disarm();
    result
}
