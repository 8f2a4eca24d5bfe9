//! Ending a request from another connection to the same node: `CLIENT UNBLOCK` (a cancelled
//! wait) and `CLIENT KILL ID` (the barrier before a lost reply is settled by asking).

use std::time::Duration;

use super::topology::io_error;
use super::{Lost, Node, Transport};
use crate::error::Error;

impl Transport {
    /// `CLIENT UNBLOCK id TIMEOUT` on another connection to `node`: true if the connection was
    /// parked (it is answered now), false if nothing was; an error when refused (the ACL).
    pub(super) async fn unblock(&self, node: &Node, id: i64) -> Result<bool, Error> {
        let mut link = node.take().await?;
        let mut c = redis::cmd("CLIENT");
        c.arg("UNBLOCK").arg(id).arg("TIMEOUT");
        match tokio::time::timeout(self.grace, link.conn.send_packed_command(&c)).await {
            Ok(Ok(v)) => {
                node.put(link);
                match v {
                    // An error reply comes as a value (`NOPERM`): nothing was unblocked.
                    redis::Value::ServerError(e) => Err(Error::Redis(e.into())),
                    v => Ok(matches!(v, redis::Value::Int(1))),
                }
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
    /// (or the id), or with the node gone, the settling read relies on the server having read
    /// that connection first.
    pub async fn barrier(&self, lost: &Lost, timeout: Duration) {
        let Some(id) = lost.client_id else { return };
        let mut c = redis::cmd("CLIENT");
        c.arg("KILL").arg("ID").arg(id);
        for attempt in 0..3u32 {
            if let Ok(mut link) = lost.node.take().await {
                match tokio::time::timeout(timeout, link.conn.send_packed_command(&c)).await {
                    // Killed, or "No such client" (gone already, with whatever it had not run
                    // yet), or refused (`NOPERM`, an error reply that comes as a value): asking
                    // again changes nothing.
                    Ok(Ok(_)) => {
                        lost.node.put(link);
                        return;
                    }
                    Ok(Err(e)) if e.code().is_some() => {
                        lost.node.put(link);
                        return;
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
    }
}
