//! [`LockClient`]: what Redisson's `RedissonClient` is to its locks. It owns the library's
//! connections, the client uuid every owner name starts with, the settings the locks share,
//! and the background tasks (watchdogs, releases of dropped guards).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::sentinel::SentinelClient;
use redis::IntoConnectionInfo;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};
use crate::schedule::Schedule;
use crate::transport::topology::Topology;
use crate::transport::Transport;

/// Redisson's watchdog lease.
pub(crate) const WATCHDOG_LEASE: Duration = Duration::from_secs(30);
/// Redisson's fair-lock `threadWaitTime`.
pub(crate) const FAIR_WAIT: Duration = Duration::from_secs(300);
/// The shortest unlock latch.
const MIN_LATCH: Duration = Duration::from_secs(60);

/// Where the servers are.
///
/// The client opens its own connections from these addresses; TLS is redis-rs' (a `rediss://`
/// address, with one of redis-rs' TLS features on: docs/clients.md, "Connections and TLS").
pub enum Servers {
    /// One server (`redis::Client::open("redis://127.0.0.1/")`).
    Standalone(redis::Client),
    /// A Redis Cluster: some of its nodes (the rest are learned with `CLUSTER SLOTS`).
    Cluster(Vec<redis::ConnectionInfo>),
    /// A primary found through Sentinel (`SentinelServerType::Master`), looked up again after a
    /// failover.
    Sentinel(SentinelClient),
}

impl std::fmt::Debug for Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Servers::Standalone(c) => f.debug_tuple("Standalone").field(&c.get_connection_info().addr()).finish(),
            Servers::Cluster(nodes) => {
                f.debug_tuple("Cluster").field(&nodes.iter().map(|n| n.addr()).collect::<Vec<_>>()).finish()
            }
            // redis-rs' SentinelClient is not Debug.
            Servers::Sentinel(_) => f.debug_tuple("Sentinel").finish_non_exhaustive(),
        }
    }
}

impl Servers {
    /// A Redis Cluster from its nodes' addresses (`"redis://127.0.0.1:7000"`, ...).
    pub fn cluster<T: IntoConnectionInfo>(nodes: impl IntoIterator<Item = T>) -> Result<Servers> {
        let nodes = nodes.into_iter().map(|n| n.into_connection_info()).collect::<redis::RedisResult<Vec<_>>>()?;
        if nodes.is_empty() {
            return Err(Error::InvalidArgument("a cluster needs at least one node".into()));
        }
        Ok(Servers::Cluster(nodes))
    }
}

/// The settings every lock of a client shares, and the builder of [`LockClient`].
#[derive(Debug, Clone)]
#[must_use]
pub struct LockClientBuilder {
    watchdog_lease: Duration,
    renew_interval: Option<Duration>,
    command_timeout: Duration,
    connect_timeout: Duration,
    resolve_timeout: Duration,
    pub(crate) sync_replicas: bool,
    pub(crate) sync_timeout: Duration,
}

impl Default for LockClientBuilder {
    fn default() -> Self {
        LockClientBuilder {
            watchdog_lease: WATCHDOG_LEASE,
            renew_interval: None,
            command_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            resolve_timeout: Duration::from_secs(10),
            sync_replicas: true,
            sync_timeout: Duration::from_secs(1),
        }
    }
}

impl LockClientBuilder {
    /// The lease a lock acquired without one is taken for, renewed by the watchdog (30 s, as
    /// Redisson's `lockWatchdogTimeout`). Keep it the same for every client of a lock.
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.watchdog_lease = lease;
        self
    }

    /// How often the watchdog renews (a third of the watchdog lease by default, so that a
    /// renewal may fail twice).
    pub fn renew_interval(mut self, every: Duration) -> Self {
        self.renew_interval = Some(every);
        self
    }

    /// How long a command may take before its reply counts as lost (10 s); a `BLOCK` wait
    /// gets its wait on top.
    pub fn command_timeout(mut self, t: Duration) -> Self {
        self.command_timeout = t;
        self
    }

    /// How long making a connection may take (5 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }

    /// How long the library keeps asking the server to settle a lost reply (10 s) before it
    /// returns [`Error::StateUnknown`].
    pub fn resolve_timeout(mut self, t: Duration) -> Self {
        self.resolve_timeout = t;
        self
    }

    /// After each grant, renewal and release, wait until the primary's replicas have it
    /// (`WAIT`; on by default, as Redisson's `checkLockSyncedSlaves`). Off: nothing is waited for.
    pub fn sync_replicas(mut self, on: bool) -> Self {
        self.sync_replicas = on;
        self
    }

    /// How long that wait may take (1 s, Redisson's `slavesSyncTimeout`).
    pub fn sync_timeout(mut self, t: Duration) -> Self {
        self.sync_timeout = t;
        self
    }

    /// The client, on `servers`. Must be called inside a tokio runtime: the client's
    /// background tasks run on it.
    pub fn build(self, servers: Servers) -> Result<LockClient> {
        let runtime = Handle::try_current()
            .map_err(|_| Error::InvalidArgument("LockClient must be built inside a tokio runtime".into()))?;
        self.build_on(servers, runtime)
    }

    pub(crate) fn build_on(self, servers: Servers, runtime: Handle) -> Result<LockClient> {
        for (what, d) in [("watchdog_lease", self.watchdog_lease), ("command_timeout", self.command_timeout)] {
            if d.as_millis() == 0 {
                return Err(Error::InvalidArgument(format!("{what} must be at least 1 ms")));
            }
        }
        let topology = match servers {
            Servers::Standalone(c) => Topology::Standalone(c.get_connection_info().clone()),
            Servers::Cluster(seeds) => Topology::Cluster { seeds, slots: Default::default() },
            Servers::Sentinel(s) => {
                Topology::Sentinel { client: Box::new(tokio::sync::Mutex::new(s)), primary: Default::default() }
            }
        };
        let renew_interval = self.renew_interval.unwrap_or(self.watchdog_lease / 3).max(Duration::from_millis(1));
        // The reads and re-sent unlocks that settle a lost reply wait longer than a command:
        // the server that lost a reply may still be busy. (Saturating: no setting panics.)
        let settle_timeout = self.command_timeout.saturating_mul(2).max(Duration::from_secs(1));
        let latch = settle_timeout.saturating_mul(6).max(MIN_LATCH);
        let core = Core {
            transport: Transport::new(topology, self.connect_timeout, self.command_timeout),
            uuid: uuid::Uuid::new_v4().to_string(),
            owners: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            watchdog_lease: self.watchdog_lease,
            renew_interval,
            command_timeout: self.command_timeout,
            settle_timeout,
            resolve_timeout: self.resolve_timeout,
            latch,
            sync_replicas: self.sync_replicas,
            sync_timeout: self.sync_timeout,
            schedule: Schedule::default(),
            runtime_gone: CancellationToken::new(),
            runtime,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        };
        // A task that lives as long as the client: a runtime that shuts down first drops it,
        // which fires `runtime_gone`. Not tracked: `close` does not wait for it.
        let gone = core.runtime_gone.clone().drop_guard();
        let shutdown = core.shutdown.clone();
        core.runtime.spawn(async move {
            shutdown.cancelled().await;
            gone.disarm();
        });
        Ok(LockClient { handle: Arc::new(ClientHandle { core: Arc::new(core) }) })
    }
}

/// What the locks and background tasks share.
pub(crate) struct Core {
    pub transport: Transport,
    pub uuid: String,
    owners: AtomicU64,
    requests: AtomicU64,
    pub watchdog_lease: Duration,
    pub renew_interval: Duration,
    pub command_timeout: Duration,
    pub settle_timeout: Duration,
    pub resolve_timeout: Duration,
    pub latch: Duration,
    pub sync_replicas: bool,
    pub sync_timeout: Duration,
    /// Every hold of the client, for the watchdog to renew or declare lost (crate::watchdog).
    pub schedule: Schedule,
    /// Fires when the runtime the client was built on has shut down.
    pub runtime_gone: CancellationToken,
    runtime: Handle,
    tasks: TaskTracker,
    /// Fires when the last handle of the client is gone, or at `close`: watchdogs stop.
    pub shutdown: CancellationToken,
}

impl Core {
    /// The replica sync of every change, if on.
    pub fn sync(&self) -> Option<Duration> {
        self.sync_replicas.then_some(self.sync_timeout)
    }

    /// `Err(NoSyncedReplicas)` when the wait after a change found no replica acknowledging it.
    pub fn check_synced(&self, command: &str, name: &str, synced: Option<crate::transport::Synced>) -> Result<()> {
        match synced.filter(|s| s.acked == 0) {
            Some(s) => Err(Error::NoSyncedReplicas {
                command: command.to_string(),
                name: name.to_string(),
                replicas: s.expected,
                synced: s.acked,
                timeout: self.sync_timeout,
            }),
            None => Ok(()),
        }
    }

    /// A new unlock request id for `LATCH`: unique across clients and requests (the client's
    /// uuid and a counter), without a random draw per unlock.
    pub fn next_request_id(&self) -> String {
        format!("{}:r{}", self.uuid, self.requests.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// A new owner name, `<client uuid>:<n>`: Redisson's `<uuid>:<thread id>`.
    pub fn next_owner(&self) -> String {
        format!("{}:{}", self.uuid, self.owners.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Runs `fut` on the client's runtime, tracked so that `close` waits for it. Works from
    /// any thread, inside a runtime or not, and never blocks (a `Drop` may call it). On a
    /// runtime that has shut down, `fut` is dropped unrun and the handle reports it cancelled.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn_on(fut, &self.runtime)
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("uuid", &self.uuid).finish_non_exhaustive()
    }
}

/// The handle the application holds; when the last one goes, watchdogs stop.
struct ClientHandle {
    core: Arc<Core>,
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        self.core.shutdown.cancel();
    }
}

/// The entry point: locks and synchronizers are made from it, and share its uuid (every owner
/// name is `<uuid>:<n>`), its connections and its watchdog settings. Cheap to clone.
///
/// The client opens its own connections from the address it is given and never uses the
/// application's: a wait parked in the server (`BLOCK`) holds a connection of its own.
#[derive(Clone)]
pub struct LockClient {
    handle: Arc<ClientHandle>,
}

impl std::fmt::Debug for LockClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockClient").field("uuid", &self.handle.core.uuid).finish_non_exhaustive()
    }
}

impl LockClient {
    /// A client of one server, with the default settings. Call it inside a tokio runtime.
    pub fn new(client: redis::Client) -> Result<LockClient> {
        LockClientBuilder::default().build(Servers::Standalone(client))
    }

    /// The builder, to change the settings ([`LockClientBuilder`]).
    pub fn builder() -> LockClientBuilder {
        LockClientBuilder::default()
    }

    /// The uuid every owner name of this client starts with.
    pub fn id(&self) -> &str {
        &self.handle.core.uuid
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// Waits for the background work (releases of dropped guards, given-back grants) and
    /// closes the idle connections. Watchdogs stop: locks still held are not renewed any more
    /// and free themselves at the end of their lease. Call it before the runtime shuts down,
    /// or a dropped guard's release may never be sent.
    pub async fn close(&self) {
        let core = self.core();
        core.shutdown.cancel();
        core.tasks.close();
        core.tasks.wait().await;
        core.tasks.reopen();
        core.transport.flush_latch_dels(core.command_timeout).await;
        core.transport.close();
    }
}
