//! The runtime the blocking calls run on: one worker thread of the client's own, which also
//! runs the watchdogs and the background releases of dropped guards.

use std::future::Future;

use crate::error::{Error, Result};

/// The runtime the blocking calls run on, and the async client on it.
pub(crate) struct Rt {
    client: Option<crate::LockClient>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Rt {
    pub(crate) fn new(client: crate::LockClient, runtime: tokio::runtime::Runtime) -> Rt {
        Rt { client: Some(client), runtime: Some(runtime) }
    }

    pub(crate) fn inner(&self) -> &crate::LockClient {
        // Set at construction and taken only in Drop, when no handle is left.
        self.client.as_ref().unwrap_or_else(|| unreachable!("the client is set until the last handle drops"))
    }

    pub(crate) fn block_on<F: Future>(&self, f: F) -> Result<F::Output> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::InvalidArgument(
                "the blocking API was called inside an async runtime: use the async API".into(),
            ));
        }
        match &self.runtime {
            Some(rt) => Ok(rt.block_on(f)),
            None => Err(Error::Closed),
        }
    }

    pub(crate) fn client(&self) -> Result<&crate::LockClient> {
        self.client.as_ref().ok_or(Error::Closed)
    }
}

impl std::fmt::Debug for Rt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rt")
    }
}

impl Drop for Rt {
    fn drop(&mut self) {
        let client = self.client.take();
        let Some(runtime) = self.runtime.take() else { return };
        if tokio::runtime::Handle::try_current().is_err() {
            // Let the releases of dropped guards go out before the runtime stops.
            if let Some(c) = client {
                let limit = c.core().command_timeout;
                runtime.block_on(async move {
                    let _ = tokio::time::timeout(limit, c.close()).await;
                });
            }
            drop(runtime);
        } else {
            drop(client);
            runtime.shutdown_background();
        }
    }
}
