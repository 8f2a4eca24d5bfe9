//! Settles: what a `drop` starts comes before what the caller does next.
//!
//! `Drop` cannot wait, so what a drop starts runs in a task of the client: ending a cancelled
//! wait in the server (`CLIENT UNBLOCK`), giving back a grant that raced the cancellation,
//! releasing a dropped guard. Each of those is a *settle* of the name it concerns, registered
//! before the drop returns. Every later request of the client on that name first waits for
//! the settles registered before it ([`Settles::wait`]), so an unlock right after a cancelled
//! wait cannot hand the lock to that waiter, and the next acquire never meets a grant that is
//! being given back.
//!
//! A settle's own requests never wait (they run in a task whose [`SETTLING`] token has
//! fired), so settles never wait for each other and cannot deadlock. A settle is done when
//! every [`Settling`] handle of it is dropped (the task that does its work, and the one that
//! gives back a result nobody received), whatever way that task ends.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

tokio::task_local! {
    /// In a task that may become a settle (an acquire run for a caller): fired once it is one.
    /// Requests made after that do not wait for settles.
    pub(crate) static SETTLING: CancellationToken;
}

/// Runs `fut` as (possibly) a settle: its requests stop waiting for settles once `token` fires.
pub(crate) fn scope<F: Future>(token: CancellationToken, fut: F) -> impl Future<Output = F::Output> {
    SETTLING.scope(token, fut)
}

/// Runs `fut` as a settle (its requests never wait for settles).
pub(crate) fn as_settle<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    let token = CancellationToken::new();
    token.cancel();
    SETTLING.scope(token, fut)
}

/// Whether the current task is a settle.
fn in_settle() -> bool {
    SETTLING.try_with(|t| t.is_cancelled()).unwrap_or(false)
}

#[derive(Debug, Default)]
struct Pending {
    /// Per name: the settles registered and not done, by id.
    by_key: Mutex<HashMap<String, Vec<(u64, CancellationToken)>>>,
    /// How many there are: requests skip the map while it is 0.
    count: AtomicUsize,
    ids: AtomicU64,
}

/// The client's settles in progress.
#[derive(Debug, Default)]
pub(crate) struct Settles {
    pending: Arc<Pending>,
}

/// One settle's handle: the settle is done when the last clone of its `Arc` is dropped.
#[derive(Debug)]
pub(crate) struct Settling {
    pending: Arc<Pending>,
    key: String,
    id: u64,
    done: CancellationToken,
    registered: AtomicBool,
}

impl Settles {
    /// A settle of `key` not registered yet ([`Settling::register`] makes later requests wait).
    pub fn prepare(&self, key: &str) -> Arc<Settling> {
        let id = self.pending.ids.fetch_add(1, Ordering::Relaxed);
        Arc::new(Settling {
            pending: self.pending.clone(),
            key: key.to_string(),
            id,
            done: CancellationToken::new(),
            registered: AtomicBool::new(false),
        })
    }

    /// A settle of `key`, registered: every later request on `key` waits for it.
    pub fn begin(&self, key: &str) -> Arc<Settling> {
        let s = self.prepare(key);
        s.register();
        s
    }

    /// Waits for every settle of `key` registered before this call (at once inside a settle).
    pub async fn wait(&self, key: &str) {
        if self.pending.count.load(Ordering::Acquire) == 0 || in_settle() {
            return;
        }
        let tokens: Vec<CancellationToken> = match self.pending.by_key.lock() {
            Ok(map) => map.get(key).map(|v| v.iter().map(|(_, t)| t.clone()).collect()).unwrap_or_default(),
            Err(_) => return,
        };
        for t in tokens {
            t.cancelled().await;
        }
    }

    /// Whether a settle of `key` is in progress (for tests and messages).
    #[cfg(test)]
    pub fn pending(&self, key: &str) -> usize {
        self.pending.by_key.lock().map(|m| m.get(key).map_or(0, Vec::len)).unwrap_or(0)
    }
}

impl Settling {
    /// From now on, requests on its key wait for this settle.
    pub fn register(&self) {
        let Ok(mut map) = self.pending.by_key.lock() else { return };
        if self.registered.swap(true, Ordering::AcqRel) {
            return;
        }
        map.entry(self.key.clone()).or_default().push((self.id, self.done.clone()));
        self.pending.count.fetch_add(1, Ordering::AcqRel);
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        if *self.registered.get_mut() {
            if let Ok(mut map) = self.pending.by_key.lock() {
                if let Some(v) = map.get_mut(&self.key) {
                    v.retain(|(id, _)| *id != self.id);
                    if v.is_empty() {
                        map.remove(&self.key);
                    }
                }
            }
            self.pending.count.fetch_sub(1, Ordering::AcqRel);
        }
        self.done.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_request_waits_for_the_settles_of_its_name_registered_before_it() {
        let settles = Settles::default();
        let a = settles.begin("a");
        let other = settles.begin("b");
        let waiting = tokio::spawn({
            let settles = Settles { pending: settles.pending.clone() };
            async move { settles.wait("a").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "waits while the settle of its name runs");
        let held = a.clone();
        drop(a);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "done only when the last handle goes");
        drop(held);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap();
        assert_eq!((settles.pending("a"), settles.pending("b")), (0, 1));
        drop(other);
        assert_eq!(settles.pending.count.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn a_settle_never_waits_and_an_unregistered_one_holds_nothing_up() {
        let settles = Settles::default();
        let _a = settles.begin("a");
        let prepared = settles.prepare("a");
        tokio::time::timeout(Duration::from_secs(5), as_settle(settles.wait("a"))).await.unwrap();
        drop(_a);
        tokio::time::timeout(Duration::from_secs(5), settles.wait("a")).await.unwrap();
        drop(prepared);
        assert_eq!(settles.pending.count.load(Ordering::Acquire), 0, "never registered, nothing to remove");
    }
}
