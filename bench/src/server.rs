//! The servers a benchmark run talks to: `redis-server` children on free loopback ports, with or
//! without the module, killed on drop (so an error or a failed assertion never leaves one behind).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis::Value;

pub type Res<T> = Result<T, String>;

/// A running `redis-server`, killed on drop.
pub struct Server {
    pub port: u16,
    pub module: bool,
    child: Child,
    dir: PathBuf,
}

fn free_port() -> Res<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

impl Server {
    /// Starts a server; `module` is the path of the module to load, if any.
    pub fn start(binary: &str, module: Option<&Path>, tag: &str) -> Res<Server> {
        Server::start_under(&[], binary, module, tag)
    }

    /// Starts a server run by `wrapper` (a command line the server's own is appended to, e.g.
    /// `valgrind --tool=callgrind ...`); an empty wrapper runs the server directly.
    pub fn start_under(wrapper: &[String], binary: &str, module: Option<&Path>, tag: &str) -> Res<Server> {
        Server::spawn(wrapper, binary, module, tag, &[])
    }

    /// Starts a server with configuration arguments of its own after the usual ones (a second
    /// `--loadmodule`, `--replicaof host port`, `--appendonly yes`).
    pub fn start_with(binary: &str, module: Option<&Path>, tag: &str, extra: &[&str]) -> Res<Server> {
        Server::spawn(&[], binary, module, tag, extra)
    }

    fn spawn(wrapper: &[String], binary: &str, module: Option<&Path>, tag: &str, extra: &[&str]) -> Res<Server> {
        let mut last = String::new();
        for attempt in 0..5 {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("lockmod-bench-{}-{tag}-{attempt}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut cmd = match wrapper.split_first() {
                Some((w, rest)) => {
                    let mut c = Command::new(w);
                    c.args(rest).arg(binary);
                    c
                }
                None => Command::new(binary),
            };
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--maxclients", "10000", "--enable-debug-command", "yes"])
                .arg("--dir")
                .arg(&dir)
                .arg("--logfile")
                .arg(dir.join("server.log"));
            if let Some(m) = module {
                cmd.arg("--loadmodule").arg(m);
            }
            cmd.args(extra);
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            let child = cmd.spawn().map_err(|e| format!("cannot start {binary} (run scripts/install-deps.sh): {e}"))?;
            let mut s = Server { port, module: module.is_some(), child, dir };
            // Under valgrind a server takes seconds to start.
            let wait = Duration::from_secs(if wrapper.is_empty() { 10 } else { 120 });
            match s.wait_ready(wait) {
                Ok(()) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(format!("redis-server did not start: {last}"))
    }

    fn wait_ready(&mut self, wait: Duration) -> Res<()> {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            if let Ok(mut c) = self.conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("no PING reply within {} s", wait.as_secs()))
    }

    /// The server's own directory (its log, and whatever a wrapper writes there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new connection with generous timeouts (a 10,000-waiter Lua call takes tens of ms).
    pub fn conn(&self) -> Res<redis::Connection> {
        let c = redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .map_err(|e| format!("connect to {}: {e}", self.port))?;
        c.set_read_timeout(Some(Duration::from_secs(120))).map_err(|e| e.to_string())?;
        Ok(c)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs one command given as strings.
pub fn call(c: &mut redis::Connection, args: &[String]) -> Res<Value> {
    let mut cmd = redis::cmd(args.first().map(String::as_str).unwrap_or("PING"));
    for a in args.iter().skip(1) {
        cmd.arg(a.as_str());
    }
    cmd.query::<Value>(c).map_err(|e| format!("{}: {e}", args.join(" ")))
}

/// Runs a slice of `&str` arguments.
pub fn call_s(c: &mut redis::Connection, args: &[&str]) -> Res<Value> {
    call(c, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// Sends commands as one pipeline and returns every reply (errors included, as values).
pub fn pipeline(c: &mut redis::Connection, cmds: &[Vec<String>]) -> Res<Vec<Value>> {
    if cmds.is_empty() {
        return Ok(vec![]);
    }
    let mut p = redis::pipe();
    for args in cmds {
        let mut cmd = redis::cmd(args.first().map(String::as_str).unwrap_or("PING"));
        for a in args.iter().skip(1) {
            cmd.arg(a.as_str());
        }
        p.add_command(cmd);
    }
    // Replies one by one, so a reply that is an error does not abort the whole pipeline.
    let packed = p.get_packed_pipeline();
    c.send_packed_command(&packed).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(cmds.len());
    for _ in 0..cmds.len() {
        match c.recv_response() {
            Ok(v) => out.push(v),
            Err(e) if e.kind() == redis::ErrorKind::ResponseError || e.code().is_some() => {
                out.push(Value::SimpleString(format!("ERR {e}")))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(out)
}

/// `INFO section` as a field map.
pub fn info(c: &mut redis::Connection, section: &str) -> Res<HashMap<String, String>> {
    let text: String = redis::cmd("INFO").arg(section).query(c).map_err(|e| e.to_string())?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect())
}

/// One numeric `INFO` field (0 when absent).
pub fn info_f64(c: &mut redis::Connection, section: &str, field: &str) -> Res<f64> {
    Ok(info(c, section)?.get(field).and_then(|v| v.parse().ok()).unwrap_or(0.0))
}

/// Server CPU seconds so far (user + system).
pub fn cpu_seconds(c: &mut redis::Connection) -> Res<f64> {
    let i = info(c, "cpu")?;
    let g = |k: &str| i.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Ok(g("used_cpu_sys") + g("used_cpu_user"))
}

/// `(calls, usec)` of one command in `INFO commandstats` (any case).
pub fn command_stat(c: &mut redis::Connection, name: &str) -> Res<(u64, u64)> {
    let i = info(c, "commandstats")?;
    // Redis keeps a module command's name as registered (upper case here), a core one in lower.
    let want = format!("cmdstat_{name}");
    let Some(line) = i.iter().find(|(k, _)| k.eq_ignore_ascii_case(&want)).map(|(_, v)| v) else { return Ok((0, 0)) };
    let field = |k: &str| {
        line.split(',').find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('='))).and_then(|v| v.parse().ok())
    };
    Ok((field("calls").unwrap_or(0), field("usec").unwrap_or(0)))
}

/// Whether the server knows a command (`COMMAND INFO name` replies nil for an unknown one).
pub fn has_command(c: &mut redis::Connection, name: &str) -> bool {
    match redis::cmd("COMMAND").arg("INFO").arg(name).query::<Value>(c) {
        Ok(Value::Array(v)) => v.first().is_some_and(|x| !matches!(x, Value::Nil)),
        _ => false,
    }
}

/// Requests per second that `redis-benchmark` (50 clients, pipelines of 16) reports for one
/// command line whose `__rand_int__` ranges over `keys` values.
pub fn redis_benchmark(s: &Server, n: usize, keys: usize, args: &[&str]) -> Res<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &s.port.to_string(), "-c", "50", "-P", "16", "-r", &keys.to_string()])
        .args(["-n", &n.to_string(), "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark (scripts/install-deps.sh installs redis-tools): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // --csv: a header line, then `"<command>","<rps>",...`.
    let rps = text
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .filter_map(|l| l.split("\",\"").nth(1))
        .filter_map(|v| v.trim_matches('"').parse::<f64>().ok())
        .next_back();
    rps.filter(|r| *r > 0.0).ok_or_else(|| format!("redis-benchmark {}: no rate in {text:?}", args.join(" ")))
}
