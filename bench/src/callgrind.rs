//! A `redis-server` run under `valgrind --tool=callgrind`, counting the instructions the server
//! executes inside `call()` (Redis' command execution: the command, its keyspace events and
//! module callbacks, its propagation), and nothing else (no I/O, no event loop, no cron).
//!
//! Time on a shared 2-core machine swings by tens of percent; instruction counts do not (the
//! only spread left comes from Redis' random hash seeds and table growth, about 1% between
//! runs), so a ratio of two of them can tell 1.10x from 1.20x where commandstats cannot. The counts are zeroed and dumped around the
//! measured calls with `callgrind_control`, so setup and warm-up are not counted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::Res;

/// The function whose inclusive cost is counted (exported by redis-server 7.x and Valkey 7/8).
const COLLECT: &str = "call";

/// A server under callgrind, killed on drop.
pub struct Callgrind {
    port: u16,
    child: Child,
    dir: PathBuf,
}

/// Whether `valgrind` and `callgrind_control` can be run here.
pub fn available() -> bool {
    let ok = |bin: &str| Command::new(bin).arg("--version").output().is_ok_and(|o| o.status.success());
    ok("valgrind") && Command::new("callgrind_control").arg("-h").output().is_ok()
}

impl Callgrind {
    /// Starts `binary` with `module` loaded, under callgrind.
    pub fn start(binary: &str, module: &Path, tag: &str) -> Res<Callgrind> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let dir = std::env::temp_dir().join(format!("lockmod-bench-{}-cg-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let child = Command::new("valgrind")
            .args(["--tool=callgrind", &format!("--toggle-collect={COLLECT}")])
            .arg(format!("--callgrind-out-file={}", dir.join("cg.out").display()))
            .arg(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(module)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start valgrind: {e}"))?;
        let mut s = Callgrind { port, child, dir };
        // Valgrind starts the server 20-50x slower than it runs natively.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = s.child.try_wait() {
                return Err(format!("redis-server under callgrind exited with {status}"));
            }
            if let Ok(mut c) = s.conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return Ok(s);
                }
            }
            if Instant::now() > deadline {
                return Err("redis-server under callgrind did not answer PING within 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn conn(&self) -> Res<redis::Connection> {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(10)))
            .map_err(|e| format!("connect to callgrind server: {e}"))?;
        c.set_read_timeout(Some(Duration::from_secs(300))).map_err(|e| e.to_string())?;
        Ok(c)
    }

    fn control(&self, flag: &str) -> Res<()> {
        let out = Command::new("callgrind_control")
            .args([flag, &self.child.id().to_string()])
            .output()
            .map_err(|e| format!("callgrind_control: {e}"))?;
        if !out.status.success() {
            return Err(format!("callgrind_control {flag}: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(())
    }

    /// Zeroes the counts (callgrind_control waits until the server has done it).
    pub fn zero(&self) -> Res<()> {
        self.control("-z")
    }

    /// Dumps the counts since the last zero or dump and returns the instructions counted.
    pub fn dump(&self) -> Res<u64> {
        self.control("-d")?;
        // Each dump is `cg.out.<k>`, k counting up from 1: read the newest, then remove it.
        let newest = std::fs::read_dir(&self.dir)
            .map_err(|e| e.to_string())?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let k: u64 = name.strip_prefix("cg.out.")?.parse().ok()?;
                Some((k, e.path()))
            })
            .max()
            .ok_or("callgrind wrote no dump")?;
        let text = std::fs::read_to_string(&newest.1).map_err(|e| format!("{}: {e}", newest.1.display()))?;
        let _ = std::fs::remove_file(&newest.1);
        text.lines()
            .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or_else(|| format!("no totals line in {}", newest.1.display()))
    }
}

impl Drop for Callgrind {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
