//! The transport: every request of the library goes out here, on the library's own
//! connections, to the server its key lives on.
//!
//! The rules (docs/clients.md, "How they behave"):
//! - A request is sent once. A reply that does not come (the request's timeout, a broken
//!   connection) is a [`Lost`] reply, for the caller to settle by asking the server; the
//!   transport never re-sends it. The connection it went out on is closed.
//! - An error reply that says the request was not run (`MOVED`, `ASK`, `TRYAGAIN`, and on a
//!   Cluster or behind Sentinel also `CLUSTERDOWN`, `LOADING`, `READONLY`, `MASTERDOWN`, a
//!   parked client `UNBLOCKED` by a role change) makes it learn the topology again and send the
//!   request again, which is safe because nothing was done.
//! - A request given a cancellation token that fires while it waits is answered at once with
//!   `CLIENT UNBLOCK <id> TIMEOUT` from another connection; the transport keeps reading its
//!   reply (a timeout, or a grant that came first: the module answers an unblock racing a grant
//!   with the grant, on every server version) for the caller to give back.

mod front;
mod kill;
mod link;
mod replicas;
mod requests;
mod send;
pub(crate) mod topology;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{Cmd, ConnectionInfo, Value};
use tokio_util::sync::CancellationToken;

use front::Front;
pub(crate) use link::Node;
use link::{Link, NodePool};
use replicas::Durability;
pub(crate) use replicas::Synced;
use topology::{io_error, Topology};

use crate::error::Error;
use crate::settle::Settles;

/// Sends of one request that the server refused without running it.
const MAX_REDIRECTS: usize = 6;

/// A reply that did not come: the request may or may not have run.
#[derive(Debug, Clone)]
pub(crate) struct Lost {
    /// The node it went to.
    pub node: Node,
    /// The server's id of the connection it went out on, for `CLIENT KILL ID`.
    pub client_id: Option<i64>,
    /// What happened (for messages).
    pub cause: String,
}

/// Why a request has no reply to read.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Sent, and its reply lost.
    Lost(Lost),
    /// Not run: an error reply, or no connection could be made.
    Failed(Error),
}

impl From<Error> for CallError {
    fn from(e: Error) -> Self {
        CallError::Failed(e)
    }
}

/// The replies of one request.
pub(crate) struct Replies {
    pub values: Vec<Value>,
    /// What the replica sync pipelined after the request replied (None: nothing to wait for).
    pub synced: Option<Synced>,
    /// The node that answered.
    pub node: Node,
}

/// One request: commands pipelined on one connection to the node of `key`.
pub(crate) struct Request<'a> {
    pub key: &'a str,
    pub cmds: &'a [Cmd],
    /// How long to wait for the replies (None: without limit, for `BLOCK 0`).
    pub timeout: Option<Duration>,
    /// Fires when the caller stops waiting (an acquire future dropped).
    pub cancel: Option<&'a CancellationToken>,
    /// Pipeline the replica sync (`WAIT`, `WAITAOF`) after the commands.
    pub sync: Option<Duration>,
}

pub(crate) struct Transport {
    /// What drops started, that later requests on a name wait for (crate::settle).
    pub settles: Settles,
    topology: Topology,
    /// The one node of a standalone server, found without a lookup.
    standalone: std::sync::OnceLock<Node>,
    nodes: Mutex<HashMap<String, Node>>,
    connect_timeout: Duration,
    /// How long a cancelled request's reply may take after `CLIENT UNBLOCK`.
    grace: Duration,
}

impl Transport {
    pub fn new(topology: Topology, connect_timeout: Duration, grace: Duration) -> Transport {
        Transport {
            settles: Settles::default(),
            topology,
            standalone: std::sync::OnceLock::new(),
            nodes: Mutex::new(HashMap::new()),
            connect_timeout,
            grace,
        }
    }

    fn node(&self, info: ConnectionInfo) -> Result<Node, Error> {
        let addr = info.addr().to_string();
        let mut nodes = self.nodes.lock().map_err(|_| Error::Closed)?;
        if let Some(n) = nodes.get(&addr) {
            return Ok(n.clone());
        }
        let n = Arc::new(NodePool::new(info, self.connect_timeout)?);
        nodes.insert(addr, n.clone());
        Ok(n)
    }

    /// The node serving `key` now (learning the topology first if it is not known).
    pub async fn node_for(&self, key: &str) -> Result<Node, Error> {
        if let Topology::Standalone(info) = &self.topology {
            if let Some(n) = self.standalone.get() {
                return Ok(n.clone());
            }
            let n = self.node(info.clone())?;
            return Ok(self.standalone.get_or_init(|| n).clone());
        }
        if let Some(info) = self.topology.route(key) {
            return self.node(info);
        }
        self.topology.refresh(self.connect_timeout).await?;
        let info = self.topology.route(key).ok_or_else(|| Error::Redis(io_error("no node serves the key's slot")))?;
        self.node(info)
    }

    /// Closes every idle connection.
    pub fn close(&self) {
        if let Ok(nodes) = self.nodes.lock() {
            for n in nodes.values() {
                n.clear();
            }
        }
    }

    /// Sends the latch deletions still waiting for a request to ride on (at `close`).
    pub async fn flush_latch_dels(&self, timeout: Duration) {
        let nodes: Vec<_> = match self.nodes.lock() {
            Ok(n) => n.values().cloned().collect(),
            Err(_) => return,
        };
        for node in nodes {
            let dels = node.take_latch_dels();
            if dels.is_empty() {
                continue;
            }
            let Ok(mut link) = node.take().await else { continue };
            let front = Front { dels: dels.len(), info: false, asking: false };
            let pipe = front.pipeline(&dels, &[], None);
            if let Ok(Ok(_)) = tokio::time::timeout(timeout, link.conn.send_packed_commands(&pipe, 0, dels.len())).await
            {
                node.put(link);
            }
        }
    }

    async fn refresh(&self, attempt: usize) {
        tokio::time::sleep(Duration::from_millis((50u64 << attempt.min(4)).min(1000))).await;
        if let Err(e) = self.topology.refresh(self.connect_timeout).await {
            tracing::debug!("redis-lockmod: topology refresh failed: {e}");
        }
    }

    /// Sends `req` and returns its replies (see the module docs for what is sent again). It
    /// first waits for the settles of its key (crate::settle) begun before it.
    pub async fn call(&self, req: Request<'_>) -> Result<Replies, CallError> {
        self.settles.wait(req.key).await;
        if req.cancel.is_some_and(CancellationToken::is_cancelled) {
            // Cancelled while it waited: nothing was sent, and nobody reads this.
            return Err(CallError::Failed(Error::Closed));
        }
        let mut ask: Option<ConnectionInfo> = None;
        let mut failure = Error::Redis(io_error("request refused too many times"));
        for attempt in 0..MAX_REDIRECTS {
            let last = attempt + 1 == MAX_REDIRECTS;
            let asking = ask.is_some();
            let node = match ask.take() {
                Some(info) => self.node(info)?,
                None => match self.node_for(req.key).await {
                    Ok(n) => n,
                    Err(e) if !last => {
                        failure = e;
                        self.refresh(attempt).await;
                        continue;
                    }
                    Err(e) => return Err(CallError::Failed(e)),
                },
            };
            let mut link = match node.take().await {
                Ok(l) => l,
                Err(e) => {
                    failure = Error::Redis(e);
                    // Nothing was sent: a Cluster or Sentinel may point elsewhere now.
                    if !last && !self.is_standalone() {
                        self.refresh(attempt).await;
                        continue;
                    }
                    return Err(CallError::Failed(failure));
                }
            };
            // Replica sync: INFO in front when the node's count is stale, the wait after.
            let known = req.sync.map(|_| node.durability.fresh());
            let ask_info = matches!(known, Some(None));
            let wait = match (known, req.sync) {
                (Some(Some(d)), Some(t)) => replicas::wait_cmd(d, t),
                _ => None,
            };
            let dels = node.take_latch_dels();
            let front = Front { dels: dels.len(), info: ask_info, asking };
            let pipe = front.pipeline(&dels, req.cmds, wait.as_ref());
            let client_id = link.client_id;
            let n = front.len() + req.cmds.len() + usize::from(wait.is_some());
            // The wait may take its own timeout after the request.
            let timeout =
                req.timeout.map(|t| t.saturating_add(req.sync.filter(|_| wait.is_some()).unwrap_or_default()));
            let sent = self.send(&mut link, &pipe, n, timeout, req.cancel, &node).await;
            let (mut values, unblocked) = match sent {
                Ok(v) => v,
                Err(cause) => {
                    if cause.broken {
                        // A failover or a restart closes every connection: drop the idle ones.
                        node.clear();
                    }
                    return Err(CallError::Lost(Lost { node, client_id, cause: cause.what }));
                }
            };
            let info = front.strip(&mut values);
            let mut durability = known.flatten();
            if let Some(info) = info {
                durability = Some(self.learned(&node, &info));
            }
            let wait_reply = if wait.is_some() && values.len() > req.cmds.len() { values.pop() } else { None };
            if let Some(err) = first_error(&values) {
                if unblocked {
                    drop(link);
                } else {
                    node.put(link);
                }
                if let Some(redirect) = self.redirect(&err) {
                    if !last {
                        if let Some((host, port)) = redirect.ask {
                            ask = Some(topology::with_addr(&node.info, host, port));
                        } else {
                            self.refresh(attempt).await;
                        }
                        failure = Error::Redis(err);
                        continue;
                    }
                }
                return Err(CallError::Failed(Error::Redis(err)));
            }
            let synced = match (durability, req.sync) {
                (Some(d), Some(t)) => self.verdict(&node, &mut link, d, wait_reply, t).await,
                _ => None,
            };
            if unblocked {
                // CLIENT UNBLOCK named this connection: never let it reach a later request.
                drop(link);
            } else {
                node.put(link);
            }
            return Ok(Replies { values, synced, node });
        }
        Err(CallError::Failed(failure))
    }

    /// Records what `INFO` said of `node`'s replicas (refused: none can be counted, so nothing
    /// is waited for, and a warning says so).
    fn learned(&self, node: &Node, info: &Value) -> Durability {
        let d = match info {
            Value::ServerError(e) => {
                tracing::warn!(
                    "redis-lockmod: cannot count the replicas of {} (INFO refused: {e:?}): grants are not synced",
                    node.addr
                );
                Durability::default()
            }
            v => crate::reply::opt_text(v).ok().flatten().map(|t| replicas::parse_durability(&t)).unwrap_or_default(),
        };
        node.durability.set(d);
        d
    }

    /// The wait's verdict. A count just learned with replicas and no wait sent yet gets its
    /// wait now, on the same connection (`WAIT` covers the connection's own writes). A wait
    /// answered otherwise than counted, or failed, makes the next call count again.
    async fn verdict(
        &self,
        node: &Node,
        link: &mut Link,
        d: Durability,
        reply: Option<Value>,
        t: Duration,
    ) -> Option<Synced> {
        let reply = match reply {
            Some(r) => r,
            None => {
                let wait = replicas::wait_cmd(d, t)?;
                let late =
                    tokio::time::timeout(t.saturating_add(self.grace), link.conn.send_packed_command(&wait)).await;
                match late {
                    Ok(Ok(v)) => v,
                    Ok(Err(e)) if e.code().is_some() => Value::Int(0),
                    // The connection is in doubt: its next user must not read this wait's reply.
                    _ => {
                        node.durability.drop_reading();
                        link.client_id = None;
                        link.broken = true;
                        return Some(Synced { expected: d.online, acked: 0 });
                    }
                }
            }
        };
        let acked = replicas::acked(d, &reply);
        if acked != d.online {
            // A replica came, went, or lags: count them again next time.
            node.durability.drop_reading();
        }
        Some(Synced { expected: d.online, acked })
    }

    fn is_standalone(&self) -> bool {
        matches!(self.topology, Topology::Standalone(_))
    }

    /// Whether `err` says the request was not run, and where to send it (`ASK`).
    fn redirect(&self, err: &redis::RedisError) -> Option<Redirect> {
        let code = err.code().unwrap_or("");
        match code {
            "ASK" => {
                let ask = err.redirect_node().and_then(|(addr, _)| {
                    let (h, p) = addr.rsplit_once(':')?;
                    Some((h.to_string(), p.parse().ok()?))
                });
                Some(Redirect { ask })
            }
            "MOVED" | "TRYAGAIN" => Some(Redirect { ask: None }),
            "CLUSTERDOWN" | "LOADING" | "READONLY" | "MASTERDOWN" | "UNBLOCKED" if !self.is_standalone() => {
                Some(Redirect { ask: None })
            }
            _ => None,
        }
    }
}

struct Redirect {
    ask: Option<(String, u16)>,
}

/// The first error reply among `values`, as a redis-rs error.
fn first_error(values: &[Value]) -> Option<redis::RedisError> {
    values.iter().find_map(|v| match v {
        Value::ServerError(e) => Some(redis::RedisError::from(e.clone())),
        _ => None,
    })
}

/// A command's name, for messages.
pub(crate) fn command_name(c: &Cmd) -> String {
    match c.args_iter().next() {
        Some(redis::Arg::Simple(b)) => String::from_utf8_lossy(b).into_owned(),
        _ => String::new(),
    }
}
