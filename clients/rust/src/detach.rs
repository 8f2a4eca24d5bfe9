//! Requests that outlive the future awaiting them.
//!
//! A wait (an acquire, a latch's await) runs in the caller's future, with no task of its own.
//! Dropping that future (a `select!`, a `tokio::time::timeout`) fires a cancellation token,
//! which ends the wait in the server (`CLIENT UNBLOCK`, see the transport), and moves the wait,
//! where it stood, into a task of the client that runs it to its end and gives back what it was
//! granted meanwhile (a grant that nobody receives: [`GiveBack`]). That task is registered as a
//! settle of the name (crate::settle) before `drop` returns, so the caller's next request on
//! that name waits for it: no grant is left that nobody knows of, and nothing the caller does
//! next meets one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_util::sync::CancellationToken;

use crate::client::Core;
use crate::error::{Error, Result};
use crate::settle;

/// A wait's result that holds something (a lock, permits): what to do with it when the caller
/// is gone. Run as a settle, awaited before the caller's next request on the name.
pub(crate) trait GiveBack: Send + 'static {
    fn give_back(self) -> impl Future<Output = ()> + Send;
}

impl<T: GiveBack> GiveBack for Option<T> {
    async fn give_back(self) {
        if let Some(held) = self {
            held.give_back().await;
        }
    }
}

/// A latch's wait holds nothing.
impl GiveBack for bool {
    async fn give_back(self) {}
}

type Work<T> = Pin<Box<dyn Future<Output = Result<T>> + Send>>;

/// Runs `work` (a wait on the name `key`) in the caller's future; if that future is dropped
/// first, the work goes on in a task of the client, as a settle of `key`, and what it gets is
/// given back. On a client whose runtime shut down: [`Error::RuntimeShutdown`].
pub(crate) async fn detached<T, F, Fut>(core: &Arc<Core>, key: &str, work: F) -> Result<T>
where
    T: GiveBack,
    F: FnOnce(CancellationToken) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    if core.runtime_gone.is_cancelled() {
        return Err(Error::RuntimeShutdown);
    }
    let cancel = CancellationToken::new();
    let work: Work<T> = Box::pin(settle::scope(cancel.clone(), work(cancel.clone())));
    Waiting { work: Some(work), cancel, core: core.clone(), key: key.to_string() }.await
}

/// The caller's side of a wait; its drop before the result came is the cancellation.
struct Waiting<T: GiveBack> {
    work: Option<Work<T>>,
    cancel: CancellationToken,
    core: Arc<Core>,
    key: String,
}

impl<T: GiveBack> Future for Waiting<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let Some(work) = self.work.as_mut() else { return Poll::Ready(Err(Error::Closed)) };
        let out = work.as_mut().poll(cx);
        if out.is_ready() {
            self.work = None;
        }
        out
    }
}

impl<T: GiveBack> Drop for Waiting<T> {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else { return };
        self.cancel.cancel();
        // Before `drop` returns: the caller's next request on the name waits for this.
        let settling = self.core.transport.settles.begin(&self.key);
        self.core.spawn(async move {
            let _settling = settling;
            if let Ok(unreceived) = work.await {
                settle::as_settle(unreceived.give_back()).await;
            }
        });
    }
}
