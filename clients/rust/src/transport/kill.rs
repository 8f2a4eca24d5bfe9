//! Ending a request from another connection to the same node: `CLIENT UNBLOCK` (a cancelled
//! wait) and `CLIENT KILL ID` (the barrier before a lost reply is settled by asking).

use std::time::Duration;

use super::topology::io_error;
use super::{Lost, Node, Transport};
use crate::error::Error;

impl Transport {
    /// `CLIENT UNBLOCK id TIMEOUT` on another connection to `node`.
    pub(super) async fn unblock(&self, node: &Node, id: i64) -> Result<(), Error> {
        let mut link = node.take().await?;
        let mut c = redis::cmd("CLIENT");
        c.arg("UNBLOCK").arg(id).arg("TIMEOUT");
        match tokio::time::timeout(self.grace, link.conn.send_packed_command(&c)).await {
            Ok(Ok(_)) => {
                node.put(link);
                Ok(())
            }
            Ok(Err(e)) if e.code().is_some() => {
                node.put(link);
                Err(Error::Redis(e))
            }
            Ok(Err(e)) => Err(Error::Redis(e)),
            Err(_) => Err(Error::Redis(io_error("CLIENT UNBLOCK timed out"))),
        }
    }

    /// `CLIENT KILL ID` of the connection a lost request went out on, on the same node: once it
    /// answers, that request has either run or never will. Best effort: without the permission
    /// (or the id) the settling read relies on the server having read that connection first.
    /// True when that is certain (killed now, or already gone).
    pub async fn barrier(&self, lost: &Lost, timeout: Duration) -> bool {
        let Some(id) = lost.client_id else { return false };
        let mut c = redis::cmd("CLIENT");
        c.arg("KILL").arg("ID").arg(id);
        for attempt in 0..3u32 {
            if let Ok(mut link) = lost.node.take().await {
                match tokio::time::timeout(timeout, link.conn.send_packed_command(&c)).await {
                    Ok(Ok(_)) => {
                        lost.node.put(link);
                        return true;
                    }
                    // "No such client": gone already, with whatever it had not run yet.
                    Ok(Err(e)) if e.code().is_some() => {
                        lost.node.put(link);
                        return e.to_string().contains("No such client");
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        false
    }
}
