//! A primary, a replica and one Sentinel, for the Sentinel tests; and a Redis Cluster started
//! by scripts/cluster.sh (as the module's own cluster tests start it). Both stop on drop.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_port, module_path, root, scratch_dir, server_binary, wait_until, Server};

/// The master name the Sentinel monitors.
pub const SERVICE: &str = "lockmod";

pub struct Sentinels {
    pub primary: Server,
    pub replica: Server,
    pub port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl Sentinels {
    pub fn start() -> Sentinels {
        let primary = Server::start();
        let replica = Server::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        // In sync, and listed online by the primary (what the library counts).
        wait_until(Duration::from_secs(10), "the replica in sync", || {
            let text: String = redis::cmd("INFO").arg("replication").query(&mut primary.conn()).unwrap_or_default();
            text.contains("state=online")
        });
        let dir = scratch_dir();
        let port = free_port();
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile {}\n\
                 sentinel monitor {SERVICE} 127.0.0.1 {} 1\n\
                 sentinel down-after-milliseconds {SERVICE} 1000\n\
                 sentinel failover-timeout {SERVICE} 10000\n",
                dir.display(),
                dir.join("sentinel.log").display(),
                primary.port
            ),
        )
        .expect("sentinel.conf");
        let child = Command::new(server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start the sentinel");
        let s = Sentinels { primary, replica, port, child, dir };
        wait_until(Duration::from_secs(10), "the sentinel knows the replica", || {
            let c = redis::Client::open(s.url()).and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)));
            let Ok(mut c) = c else { return false };
            let r: redis::RedisResult<Vec<redis::Value>> =
                redis::cmd("SENTINEL").arg("REPLICAS").arg(SERVICE).query(&mut c);
            r.map(|v| !v.is_empty()).unwrap_or(false)
        });
        s
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The sentinel's log (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// 3 primaries and 3 replicas with the module (scripts/cluster.sh).
pub struct Cluster {
    dir: std::path::PathBuf,
    pub ports: Vec<u16>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let dir = scratch_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let script = root().join("scripts").join("cluster.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg("--module")
            .arg(module_path())
            .arg("--dir")
            .arg(&dir)
            .env("REDIS_SERVER", server_binary())
            .output()
            .expect("cannot run scripts/cluster.sh");
        let mut c = Cluster { dir, ports: Vec::new() };
        assert!(
            out.status.success(),
            "cluster.sh: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        c.ports = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
        assert_eq!(c.ports.len(), 6);
        c
    }

    pub fn urls(&self) -> Vec<String> {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}/")).collect()
    }

    pub fn conn(&self, port: u16) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .expect("connect to a cluster node")
    }

    /// The port of the primary serving `key`.
    pub fn primary_for(&self, key: &str) -> u16 {
        for p in &self.ports {
            let mut c = self.conn(*p);
            let role: String = redis::cmd("INFO").arg("replication").query(&mut c).unwrap_or_default();
            if !role.contains("role:master") {
                continue;
            }
            let r: redis::RedisResult<redis::Value> = redis::cmd("EXISTS").arg(key).query(&mut c);
            if r.is_ok() {
                return *p;
            }
        }
        panic!("no primary serves {key}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = root().join("scripts").join("cluster.sh");
        let _ = Command::new("bash").arg(script).arg("stop").arg("--dir").arg(&self.dir).output();
    }
}
