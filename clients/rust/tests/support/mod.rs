//! The crate's test harness: real `redis-server` (or Valkey) processes with the module, on free
//! 127.0.0.1 ports, killed on drop even when a test panics; a Redis Cluster by
//! scripts/cluster.sh, and a Sentinel setup. The server is `$REDIS_SERVER`, else the one
//! `SERVER=redis|redis8|valkey` names (scripts/server-bin.sh); the module `$LOCKMOD_MODULE`, else the
//! repository's debug build (built on first use). A missing one fails loudly.

#![allow(dead_code)]

pub mod sentinel;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use redis::Value;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

/// The module under test.
pub fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("LOCKMOD_MODULE") {
            return PathBuf::from(p);
        }
        let status = Command::new(env!("CARGO"))
            .args(["build", "--lib", "--quiet", "-p", "redis-lockmod"])
            .current_dir(root())
            .status()
            .expect("cargo build of the module failed to start");
        assert!(status.success(), "cargo build of the module failed");
        let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root().join("target"));
        let so = target.join("debug").join("libredis_lockmod.so");
        assert!(so.exists(), "module not found at {}", so.display());
        so
    })
    .clone()
}

/// The server binary.
pub fn server_binary() -> String {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(b) = std::env::var("REDIS_SERVER") {
            return b;
        }
        let which = std::env::var("SERVER").unwrap_or_else(|_| "redis".into());
        let out = Command::new("bash")
            .arg(root().join("scripts").join("server-bin.sh"))
            .arg(&which)
            .output()
            .expect("cannot run scripts/server-bin.sh");
        let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!bin.is_empty(), "SERVER={which} is not installed (scripts/install-deps.sh)");
        bin
    })
    .clone()
}

/// The repository's Python (`.venv`, `make python-env`), with clients/python installed.
pub fn python() -> PathBuf {
    let p = root().join(".venv").join("bin").join("python");
    assert!(p.is_file(), "no {} (make python-env)", p.display());
    p
}

/// clients/node, with its packages (`npm ci` there).
pub fn node_lib() -> PathBuf {
    let lib = root().join("clients").join("node");
    assert!(lib.join("node_modules").join("ioredis").is_dir(), "clients/node has no node_modules (npm ci there)");
    lib.canonicalize().expect("clients/node")
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

pub fn scratch_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir =
        std::env::temp_dir().join(format!("lockmod-rs-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create a scratch dir");
    dir
}

/// A running server, killed on drop.
pub struct Server {
    pub port: u16,
    child: Child,
    pub dir: PathBuf,
}

impl Server {
    /// A server with the module.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// A server with the module and extra configuration (`["--replicaof", ...]`).
    pub fn start_with(extra: &[&str]) -> Server {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir = scratch_dir();
            let child = Command::new(server_binary())
                .arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--enable-debug-command", "yes"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("server.log"))
                .arg("--loadmodule")
                .arg(module_path())
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", server_binary()));
            let mut s = Server { port, child, dir };
            if s.wait_ready() {
                return s;
            }
            last = std::fs::read_to_string(s.dir.join("server.log")).unwrap_or_default();
        }
        panic!("the server did not start: {last}");
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut c) =
                redis::Client::open(self.url()).and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
            {
                // The server answering must be this one: tests run side by side (nextest), and
                // a port found free may be taken by another test's server before this one
                // binds it (this one then exits, and the next try takes another port).
                // Then it must be done loading: `INFO` answers while it loads, `PING` does not.
                let own = format!("process_id:{}", self.child.id());
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                    if info.lines().any(|l| l.trim() == own) && redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return true;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    /// A plain synchronous connection, for assertions on the keyspace.
    pub fn conn(&self) -> redis::Connection {
        let c = self.client().get_connection_with_timeout(Duration::from_secs(2)).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        c
    }

    /// The number of clients parked in the server (`blocked_clients`).
    pub fn blocked(&self) -> i64 {
        info_field(&mut self.conn(), "clients", "blocked_clients")
    }

    /// Waits until `blocked_clients` is `n`.
    pub fn wait_blocked(&self, n: i64) {
        wait_until(Duration::from_secs(10), &format!("{n} blocked client(s)"), || self.blocked() == n);
    }

    /// Keeps the server busy (`DEBUG SLEEP`) from another connection; returns once it sleeps.
    pub fn sleep(&self, seconds: f64) -> std::thread::JoinHandle<()> {
        // Connected before the server sleeps: a connection made during the sleep would wait for
        // its handshake's reply.
        let mut probe = self.conn();
        let mut sleeper = self.conn();
        let t = std::thread::spawn(move || {
            let _ = sleeper.set_read_timeout(Some(Duration::from_secs(60)));
            let _: redis::RedisResult<Value> = redis::cmd("DEBUG").arg("SLEEP").arg(seconds).query(&mut sleeper);
        });
        probe.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        wait_until(Duration::from_secs(5), "the server asleep", || {
            redis::cmd("PING").query::<String>(&mut probe).is_err()
        });
        t
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One field of `INFO section`, as a number.
pub fn info_field(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let text: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
    text.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// Polls `cond` until it holds, or fails the test with `what`.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not reached within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `HGETALL key` as sorted pairs.
pub fn hgetall(c: &mut redis::Connection, key: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(c).expect("HGETALL");
    v.sort();
    v
}

pub fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).expect("PTTL")
}

/// A subscriber on every channel; `messages()` drains what it got as (channel, payload).
pub struct Subscriber {
    rx: std::sync::mpsc::Receiver<(String, String)>,
}

impl Subscriber {
    pub fn start(server: &Server) -> Subscriber {
        let mut conn = server.conn();
        let (tx, rx) = std::sync::mpsc::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut ps = conn.as_pubsub();
            if ps.psubscribe("*").is_err() {
                return;
            }
            let _ = ready_tx.send(());
            while let Ok(msg) = ps.get_message() {
                let payload: String = msg.get_payload().unwrap_or_default();
                if tx.send((msg.get_channel_name().to_string(), payload)).is_err() {
                    return;
                }
            }
        });
        ready_rx.recv_timeout(Duration::from_secs(5)).expect("subscriber ready");
        Subscriber { rx }
    }

    /// Waits for a message on `channel` and returns its payload.
    pub fn expect(&self, channel: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok((c, p)) if c == channel => return p,
                Ok(_) => continue,
                Err(_) => panic!("no message on {channel}"),
            }
        }
    }
}

/// How many times `name` was called (`INFO commandstats`; 0 when never).
pub fn command_calls(c: &mut redis::Connection, name: &str) -> i64 {
    let text: String = redis::cmd("INFO").arg("commandstats").query(c).expect("INFO");
    let want = format!("cmdstat_{}:", name.to_lowercase());
    text.lines()
        .find(|l| l.to_lowercase().starts_with(&want))
        .and_then(|l| l.split([':', ',']).find_map(|kv| kv.strip_prefix("calls=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Redisson's `tryAcquire` body of its rate limiter, 3.38.0 to HEAD.
pub const REDISSON_TRY_ACQUIRE: &str = "861d9229367b5aa9889ee26c5c31be7baeba2153";

/// One of Redisson's rate-limiter bodies, test data read at run time from
/// `shared/redisson-ratelimiter-scripts/` beside the repository (or
/// `$LOCKMOD_REDISSON_RATELIMITER_SCRIPTS`); missing, the test fails.
pub fn redisson_ratelimiter_body(sha: &str) -> String {
    let dir = std::env::var_os("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("..").join("shared").join("redisson-ratelimiter-scripts"));
    let path = dir.join("scripts").join(format!("{sha}.lua"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "Redisson's rate-limiter scripts are missing at {} ({e}): set LOCKMOD_REDISSON_RATELIMITER_SCRIPTS",
            path.display()
        )
    })
}
