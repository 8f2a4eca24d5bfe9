//! The library's own connections, never the application's: one per request in flight (a
//! parked `BLOCK` must not hold up anything queued behind it), each with the server's id for
//! it (`CLIENT ID`), kept idle per node for reuse (at most [`IDLE_PER_NODE`]).
//!
//! Connections are redis-rs `MultiplexedConnection`s used one request at a time, with no
//! response timeout of their own: the transport bounds every request itself and closes a
//! connection whose reply did not come, so that a late reply never reaches another request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionInfo, Value};

use super::replicas::ReplicaState;

/// Idle connections kept per node: enough for every task of a busy process to find one (each
/// parked wait holds one, and a new connection costs a handshake and `CLIENT ID`).
pub(crate) const IDLE_PER_NODE: usize = 256;
/// Latch deletions kept for the next request (every unlock is one, so a handful in practice);
/// past this a latch is left to expire.
const MAX_LATCH_DELS: usize = 4096;

/// One server (a standalone server, a cluster primary, the sentinel-resolved primary) and
/// the idle connections to it.
pub(crate) struct NodePool {
    /// `host:port`, for messages and as the pool's key.
    pub addr: String,
    /// How to connect (an `ASK` target copies its settings).
    pub info: ConnectionInfo,
    client: Client,
    connect_timeout: Duration,
    idle: Mutex<Vec<Link>>,
    /// The replica count and AOF setting, for replica sync.
    pub durability: ReplicaState,
    /// Unlock latches to delete in front of the next request (transport/front.rs).
    latch_dels: Mutex<Vec<String>>,
    has_latch_dels: AtomicBool,
}

/// One of our connections.
pub(crate) struct Link {
    pub conn: MultiplexedConnection,
    /// The server's id of this connection (`CLIENT ID`); `None` when the ACL refuses it (a lost
    /// reply is then settled by asking only, with no barrier).
    pub client_id: Option<i64>,
    /// Its last reply is in doubt: closed instead of kept.
    pub broken: bool,
}

impl NodePool {
    pub fn new(info: ConnectionInfo, connect_timeout: Duration) -> redis::RedisResult<NodePool> {
        let addr = info.addr().to_string();
        Ok(NodePool {
            addr,
            client: Client::open(info.clone())?,
            info,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
            durability: ReplicaState::default(),
            latch_dels: Mutex::new(Vec::new()),
            has_latch_dels: AtomicBool::new(false),
        })
    }

    /// Deletes the unlock latch `key` with the node's next request.
    pub fn defer_latch_del(&self, key: String) {
        if let Ok(mut dels) = self.latch_dels.lock() {
            if dels.len() < MAX_LATCH_DELS {
                dels.push(key);
                self.has_latch_dels.store(true, Ordering::Release);
            }
        }
    }

    /// The latch deletions to send with a request now.
    pub fn take_latch_dels(&self) -> Vec<String> {
        if !self.has_latch_dels.load(Ordering::Acquire) {
            return Vec::new();
        }
        match self.latch_dels.lock() {
            Ok(mut dels) => {
                self.has_latch_dels.store(false, Ordering::Release);
                std::mem::take(&mut *dels)
            }
            Err(_) => Vec::new(),
        }
    }

    /// An idle connection, or a new one. Fails only before anything is sent.
    pub async fn take(&self) -> redis::RedisResult<Link> {
        let idle = self.idle.lock().map(|mut v| v.pop()).unwrap_or(None);
        if let Some(link) = idle {
            return Ok(link);
        }
        let config =
            AsyncConnectionConfig::new().set_response_timeout(None).set_connection_timeout(Some(self.connect_timeout));
        let mut conn = self.client.get_multiplexed_async_connection_with_config(&config).await?;
        let id = tokio::time::timeout(
            self.connect_timeout,
            conn.send_packed_command(&redis::cmd("CLIENT").arg("ID").clone()),
        )
        .await
        .map_err(|_| redis::RedisError::from((redis::ErrorKind::Io, "CLIENT ID timed out")))?;
        let client_id = match id {
            Ok(Value::Int(i)) => Some(i),
            Ok(_) => None,
            Err(e) if e.code().is_some() => None,
            Err(e) => return Err(e),
        };
        Ok(Link { conn, client_id, broken: false })
    }

    /// Keeps `link` for reuse (a link whose reply was lost is dropped instead, by the caller).
    pub fn put(&self, link: Link) {
        if link.broken {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < IDLE_PER_NODE {
                idle.push(link);
            }
        }
    }

    /// Closes every idle connection (their drivers end when the last handle goes).
    pub fn clear(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }
}

impl std::fmt::Debug for NodePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePool").field("addr", &self.addr).finish()
    }
}

/// A shared handle on a node.
pub(crate) type Node = Arc<NodePool>;
