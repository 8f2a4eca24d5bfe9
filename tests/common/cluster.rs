//! A Redis Cluster (3 primaries, one replica each, module on every node) for the cluster and
//! failover tests.
//!
//! It is started and stopped with scripts/cluster.sh, so the tests prove the script the README
//! documents; [`Cluster`] stops it on drop, even when the test panics. The server binary is the
//! harness's choice (`SERVER=redis|redis8|valkey`), passed to the script as `REDIS_SERVER`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{module_path, scratch_dir, server_binary};

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct Node {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    /// The primary's id, for a replica.
    pub primary_id: Option<String>,
    /// Slot ranges `(first, last)` served, for a primary.
    pub slots: Vec<(u16, u16)>,
}

/// A running cluster, stopped (exactly its processes) on drop.
pub struct Cluster {
    dir: PathBuf,
    pub ports: Vec<u16>,
    /// One cluster at a time per test binary: six servers per test on a small machine are
    /// plenty, and concurrent starts would race for ports.
    _serial: MutexGuard<'static, ()>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts").join("cluster.sh")
}

impl Cluster {
    pub fn start() -> Cluster {
        static SERIAL: Mutex<()> = Mutex::new(());
        // A panicking test poisons the lock; the next test can still use it.
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = scratch_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg("--module")
            .arg(module_path())
            .arg("--dir")
            .arg(&dir)
            .env("REDIS_SERVER", server_binary())
            .output()
            .expect("cannot run scripts/cluster.sh");
        // Built before the checks so that a failed start is stopped too.
        let mut cluster = Cluster { dir, ports: Vec::new(), _serial: serial };
        assert!(
            out.status.success(),
            "scripts/cluster.sh start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.ports = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert_eq!(cluster.ports.len(), 6, "the script printed six ports");
        cluster
    }

    pub fn url(port: u16) -> String {
        format!("redis://127.0.0.1:{port}/")
    }

    /// A plain connection to one node (no redirects followed).
    pub fn conn(&self, port: u16) -> redis::Connection {
        let c = redis::Client::open(Cluster::url(port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("cannot connect to a cluster node");
        c.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        c
    }

    /// The `redis` crate's cluster client, seeded with every node.
    pub fn client(&self) -> redis::cluster::ClusterConnection {
        let urls: Vec<String> = self.ports.iter().map(|p| Cluster::url(*p)).collect();
        redis::cluster::ClusterClientBuilder::new(urls)
            .connection_timeout(Duration::from_secs(2))
            .response_timeout(Duration::from_secs(30))
            .build()
            .and_then(|c| c.get_connection())
            .expect("cannot build the cluster client")
    }

    /// `CLUSTER NODES` as seen by the first live node (or `port` when given).
    pub fn nodes_from(&self, port: u16) -> Vec<Node> {
        let text: String = redis::cmd("CLUSTER").arg("NODES").query(&mut self.conn(port)).expect("CLUSTER NODES");
        text.lines()
            .filter(|l| !l.contains("fail") && !l.contains("noaddr"))
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port = f.get(1)?.split('@').next()?.rsplit(':').next()?.parse().ok()?;
                let primary = f.get(2)?.contains("master");
                let slots = f[8.min(f.len())..]
                    .iter()
                    .filter(|s| !s.starts_with('['))
                    .filter_map(|s| match s.split_once('-') {
                        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                        None => s.parse().ok().map(|n| (n, n)),
                    })
                    .collect();
                let primary_id = (!primary).then(|| f[3].to_string());
                Some(Node { id: f[0].to_string(), port, primary, primary_id, slots })
            })
            .collect()
    }

    /// The primaries that serve slots, by port.
    pub fn primaries(&self, via: u16) -> Vec<Node> {
        self.nodes_from(via).into_iter().filter(|n| n.primary && !n.slots.is_empty()).collect()
    }

    /// `CLUSTER KEYSLOT name` (the server's answer, not a local computation).
    pub fn keyslot(&self, name: &str) -> u16 {
        let mut c = self.conn(self.ports[0]);
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(name).query(&mut c).expect("CLUSTER KEYSLOT")
    }

    /// The primary serving `key`'s slot, seen from node `via`.
    pub fn primary_for(&self, key: &str, via: u16) -> Node {
        let slot = self.keyslot(key);
        self.primaries(via)
            .into_iter()
            .find(|n| n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .expect("no primary serves the slot")
    }

    /// The replica of the primary `id`, seen from node `via`.
    pub fn replica_of(&self, id: &str, via: u16) -> Node {
        self.nodes_from(via)
            .into_iter()
            .find(|n| n.primary_id.as_deref() == Some(id))
            .expect("the primary has no replica")
    }

    /// The pid of the node on `port` (from the script's state files).
    pub fn pid(&self, port: u16) -> u32 {
        let ports = std::fs::read_to_string(self.dir.join("ports")).expect("ports file");
        let pids = std::fs::read_to_string(self.dir.join("pids")).expect("pids file");
        let i = ports.lines().position(|p| p.trim() == port.to_string()).expect("unknown port");
        pids.lines().nth(i).and_then(|p| p.trim().parse().ok()).expect("pid")
    }

    /// Waits until node `port` reports `role:master` and `cluster_state:ok`.
    pub fn wait_primary(&self, port: u16, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let mut c = self.conn(port);
            let role: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap_or_default();
            let state: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap_or_default();
            if role.contains("role:master") && state.contains("cluster_state:ok") {
                return;
            }
            assert!(Instant::now() < deadline, "node {port} did not become a primary: {role}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A node's log (for failure messages).
    pub fn log(&self, port: u16) -> String {
        std::fs::read_to_string(self.dir.join(port.to_string()).join("server.log")).unwrap_or_default()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").arg("--dir").arg(&self.dir).output();
    }
}
