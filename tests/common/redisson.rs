//! Redisson's own lock scripts as test data, and a differential pair that sends them by
//! `EVALSHA` to a plain server (no module: Lua) and to one with `lockmod.redisson-scripts
//! native`, comparing the replies byte for byte (their RESP2 or RESP3 encoding, TTLs within
//! the tolerance), the keyspaces and the published messages.
//!
//! The bodies come from `../shared/redisson-scripts/` beside the repository (or
//! `$LOCKMOD_REDISSON_SCRIPTS`): missing, the tests fail; they never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use super::diff::{dump, keyspace_difference, stable_dumps, wait_out_expiries, GUARD_MS};
use super::{Server, Subscriber};

/// Times (TTL replies, expiries, deadlines) may differ by this much: each side computes them
/// from its own clock when its call arrives, and on a loaded machine the Lua side's call and
/// the native side's can be tens of ms apart. The tests keep every time they add (a fair
/// lock's `wait`) well above it, so a missing term still shows.
pub const TOL_MS: i64 = 60;

/// One body of `index.tsv`.
pub struct Body {
    pub sha: String,
    pub class: String,
    pub text: String,
    pub releases: Vec<String>,
}

/// The bodies and the release groups: releases that send exactly the same set of bodies.
pub struct Scripts {
    pub bodies: Vec<Body>,
    pub groups: Vec<(Vec<String>, BTreeSet<String>)>,
}

pub fn dir() -> PathBuf {
    match std::env::var_os("LOCKMOD_REDISSON_SCRIPTS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/redisson-scripts"),
    }
}

impl Scripts {
    pub fn load() -> Scripts {
        Scripts::load_from(&dir(), 43)
    }

    /// The bodies of `dir/index.tsv` (`count` of them, or the test fails).
    pub fn load_from(dir: &std::path::Path, count: usize) -> Scripts {
        let index = std::fs::read_to_string(dir.join("index.tsv")).unwrap_or_else(|e| {
            panic!(
                "Redisson's scripts are missing at {} ({e}): the repository expects shared/ beside it \
                 (or set LOCKMOD_REDISSON_SCRIPTS)",
                dir.display()
            )
        });
        let mut bodies = Vec::new();
        for line in index.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 5, "index.tsv line: {line}");
            let text = std::fs::read_to_string(dir.join("scripts").join(format!("{}.lua", f[0])))
                .unwrap_or_else(|e| panic!("body {} missing: {e}", f[0]));
            assert_eq!(sha1_smol::Sha1::from(&text).digest().to_string(), f[0], "the body's SHA1 is its name");
            let releases = f[4].split(',').map(String::from).collect();
            bodies.push(Body { sha: f[0].into(), class: f[1].into(), text, releases });
        }
        assert_eq!(bodies.len(), count, "{count} distinct bodies from 3.17.0 to HEAD in {}", dir.display());
        let mut by_release: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for b in &bodies {
            for r in &b.releases {
                by_release.entry(r.clone()).or_default().insert(b.sha.clone());
            }
        }
        let mut groups: Vec<(Vec<String>, BTreeSet<String>)> = Vec::new();
        for (release, set) in by_release {
            match groups.iter_mut().find(|g| g.1 == set) {
                Some(g) => g.0.push(release),
                None => groups.push((vec![release], set)),
            }
        }
        Scripts { bodies, groups }
    }

    pub fn body(&self, sha: &str) -> &Body {
        self.bodies.iter().find(|b| b.sha == sha).unwrap_or_else(|| panic!("no body {sha}"))
    }

    /// The body whose SHA1 starts with `prefix` (the role tables name bodies by 5 digits).
    pub fn by_prefix(&self, prefix: &str) -> &Body {
        self.bodies.iter().find(|b| b.sha.starts_with(prefix)).unwrap_or_else(|| panic!("no body {prefix}"))
    }
}

/// A reply as RESP encodes it: the type byte and its content, so RESP2/RESP3 encodings are
/// compared exactly.
#[derive(Clone, Debug, PartialEq)]
pub enum Raw {
    Line(u8, String),
    Bulk(u8, Option<Vec<u8>>),
    Agg(u8, Option<Vec<Raw>>),
}

/// A plain RESP connection that returns replies undecoded.
pub struct RawConn {
    out: TcpStream,
    inp: BufReader<TcpStream>,
}

impl RawConn {
    pub fn open(server: &Server, resp3: bool) -> RawConn {
        let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut c = RawConn { out: s.try_clone().expect("clone"), inp: BufReader::new(s) };
        if resp3 {
            c.call(&["HELLO", "3"]);
        }
        c
    }

    pub fn call<S: AsRef<[u8]>>(&mut self, args: &[S]) -> Raw {
        let mut buf = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            buf.extend_from_slice(a);
            buf.extend_from_slice(b"\r\n");
        }
        self.out.write_all(&buf).expect("write");
        self.read()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.inp.read_line(&mut l).expect("read");
        l.trim_end_matches("\r\n").to_string()
    }

    fn read(&mut self) -> Raw {
        let l = self.line();
        let (t, rest) = (l.as_bytes()[0], l[1..].to_string());
        match t {
            b'$' | b'=' | b'!' => {
                let n: i64 = rest.parse().expect("length");
                if n < 0 {
                    return Raw::Bulk(t, None);
                }
                let mut data = vec![0; n as usize + 2];
                std::io::Read::read_exact(&mut self.inp, &mut data).expect("bulk");
                data.truncate(n as usize);
                Raw::Bulk(t, Some(data))
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let n: i64 = rest.parse().expect("count");
                if n < 0 {
                    return Raw::Agg(t, None);
                }
                let n = if t == b'%' || t == b'|' { 2 * n } else { n };
                Raw::Agg(t, Some((0..n).map(|_| self.read()).collect()))
            }
            _ => Raw::Line(t, rest),
        }
    }
}

/// Exactly equal, except integers (replies that are TTLs) within the tolerance when `ttl`.
pub fn raw_match(a: &Raw, b: &Raw, ttl: bool) -> bool {
    match (a, b) {
        (Raw::Line(b':', x), Raw::Line(b':', y)) if ttl => match (x.parse::<i64>(), y.parse::<i64>()) {
            (Ok(x), Ok(y)) if ![-1, -2].contains(&x) && ![-1, -2].contains(&y) => (x - y).abs() <= TOL_MS,
            _ => x == y,
        },
        (Raw::Agg(t, Some(x)), Raw::Agg(u, Some(y))) => {
            t == u && x.len() == y.len() && x.iter().zip(y).all(|(p, q)| raw_match(p, q, ttl))
        }
        _ => a == b,
    }
}

/// A Lua server and a native one, each with a RESP2 and a RESP3 raw connection, a client
/// connection and a subscriber.
pub struct ScriptPair {
    pub lua: Server,
    pub native: Server,
    pub lc: redis::Connection,
    pub nc: redis::Connection,
    raw: [RawConn; 4],
    lsub: Subscriber,
    nsub: Subscriber,
    pub steps: usize,
    /// EVALSHA calls sent (to each side).
    pub scripts_sent: u64,
}

impl ScriptPair {
    pub fn new(scripts: &Scripts) -> ScriptPair {
        let lua = Server::start_plain();
        let native = Server::start_with(true, &["--lockmod.redisson-scripts", "native"]);
        let (mut lc, mut nc) = (lua.conn(), native.conn());
        for b in &scripts.bodies {
            for c in [&mut lc, &mut nc] {
                let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(&b.text).query(c).expect("SCRIPT LOAD");
                assert_eq!(sha, b.sha);
            }
        }
        let raw = [
            RawConn::open(&lua, false),
            RawConn::open(&native, false),
            RawConn::open(&lua, true),
            RawConn::open(&native, true),
        ];
        let (lsub, nsub) = (lua.subscriber(), native.subscriber());
        ScriptPair { lua, native, lc, nc, raw, lsub, nsub, steps: 0, scripts_sent: 0 }
    }

    /// Waits until no key (or fair deadline) on either side expires within `guard` ms. The
    /// guards are wider than the module tests' own: two servers, two clients and a loaded
    /// machine between the wait and the calls.
    pub fn wait_out_expiries(&mut self, guard: i64) -> Option<i64> {
        wait_out_expiries([&mut self.lc, &mut self.nc], guard)
    }

    /// Sends `args` to both sides (RESP3 if `resp3`) and asserts the replies match.
    /// An argument `<now>` becomes the current time in ms, read after the wait, as Redisson
    /// reads `System.currentTimeMillis()` right before it sends a fair-lock script.
    ///
    /// If the machine stalled the step (the calls took over half the tolerance, or something
    /// could expire before they ended), the two sides may legitimately differ: the step is
    /// compared all the same, and only if it differs, or the keyspaces then do, are both
    /// sides flushed so the ambiguity does not reach later steps.
    pub fn step<S: AsRef<[u8]>>(&mut self, args: &[S], resp3: bool, ttl: bool) -> Raw {
        let soonest = self.wait_out_expiries(2 * GUARD_MS);
        let now = super::diff::now_ms();
        let shown_now = now.to_string();
        let args: Vec<&[u8]> =
            args.iter().map(|a| if a.as_ref() == b"<now>" { shown_now.as_bytes() } else { a.as_ref() }).collect();
        let i = if resp3 { 2 } else { 0 };
        let l = self.raw[i].call(&args);
        let n = self.raw[i + 1].call(&args);
        let took = super::diff::now_ms() - now;
        self.steps += 1;
        if args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"EVALSHA")) {
            self.scripts_sent += 1;
        }
        let shown: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let stalled = took > TOL_MS / 2 || soonest.is_some_and(|e| now + took >= e);
        if stalled {
            let (l_keys, n_keys) = stable_dumps([&mut self.lc, &mut self.nc], 5 * GUARD_MS);
            let apart = !raw_match(&l, &n, ttl)
                || keyspace_difference(("lua", &l_keys), ("native", &n_keys), TOL_MS / 2).is_some();
            if apart {
                eprintln!("step {} {shown:?} stalled ({took} ms) and the sides differ: both flushed", self.steps);
                self.resync();
            }
        } else if !raw_match(&l, &n, ttl) {
            let (a, b) = (dump(&mut self.lc), dump(&mut self.nc));
            panic!(
                "step {} {shown:?} (resp3: {resp3})\n  lua:    {l:?}\n  native: {n:?}\n  lua keys:    {a:?}\n  native keys: {b:?}",
                self.steps
            );
        }
        n
    }

    /// `EVALSHA sha keys... args...` on both sides.
    pub fn eval(&mut self, sha: &str, keys: &[String], argv: &[String], resp3: bool, ttl: bool) -> Raw {
        let mut a: Vec<String> = vec!["EVALSHA".into(), sha.into(), keys.len().to_string()];
        a.extend(keys.iter().cloned());
        a.extend(argv.iter().cloned());
        self.step(&a, resp3, ttl)
    }

    /// Asserts both keyspaces and the messages published so far match.
    pub fn check(&mut self) {
        if let Some(d) = self.difference() {
            panic!("step {}: {d}", self.steps);
        }
    }

    /// The first difference between the keyspaces or the messages published so far, if any.
    pub fn difference(&mut self) -> Option<String> {
        let (l, n) = stable_dumps([&mut self.lc, &mut self.nc], 5 * GUARD_MS);
        let (ml, mn) = (self.lsub.take(), self.nsub.take());
        keyspace_difference(("lua", &l), ("native", &n), TOL_MS)
            .or_else(|| (ml != mn).then(|| format!("different messages: lua {ml:?} native {mn:?}")))
    }

    /// `EVALSHA sha keys... args...` on both sides, back to back after the expiry guard (RESP2):
    /// both replies, and whether they match (TTL replies within the tolerance when `ttl`).
    /// Unlike [`ScriptPair::eval`] it asserts nothing, for a caller that gathers differences.
    pub fn eval_both(&mut self, sha: &str, keys: &[String], argv: &[String], ttl: bool) -> (Raw, Raw, bool) {
        self.wait_out_expiries(2 * GUARD_MS);
        let now = super::diff::now_ms().to_string();
        let mut a: Vec<String> = vec!["EVALSHA".into(), sha.into(), keys.len().to_string()];
        a.extend(keys.iter().chain(argv).map(|x| if x == "<now>" { now.clone() } else { x.clone() }));
        let l = self.raw[0].call(&a);
        let n = self.raw[1].call(&a);
        self.steps += 1;
        self.scripts_sent += 1;
        let same = raw_match(&l, &n, ttl);
        (l, n, same)
    }

    /// Flushes both sides and drops the messages so far: the same state on both again.
    fn resync(&mut self) {
        for c in [&mut self.lc, &mut self.nc] {
            let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        }
        self.lsub.take();
        self.nsub.take();
    }

    pub fn flush(&mut self) {
        for c in [&mut self.lc, &mut self.nc] {
            let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        }
        self.check();
    }
}

/// `INFO <section>` as field -> value.
pub fn info(c: &mut redis::Connection, section: &str) -> BTreeMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(c).expect("INFO");
    text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `calls` of `cmdstat_<cmd>` (0 if it never ran).
pub fn calls(stats: &BTreeMap<String, String>, cmd: &str) -> u64 {
    stats
        .get(&format!("cmdstat_{cmd}"))
        .and_then(|v| v.split(',').find_map(|p| p.strip_prefix("calls=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn field(c: &mut redis::Connection, name: &str) -> u64 {
    info(c, "lockmod").get(&format!("lockmod_{name}")).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// `INFO lockmod`'s counts of Redisson calls run as Lua, by cause (without the `lockmod_`).
pub const CAUSES: &[&str] = &[
    "redisson_lua_not_accelerated",
    "redisson_lua_arguments",
    "redisson_lua_server_state",
    "redisson_lua_acl",
    "redisson_lua_script_cache",
    "redisson_lua_module_rule",
    "redisson_lua_script_state",
    "redisson_lua_error",
];

/// Each of [`CAUSES`], in order.
pub fn causes(c: &mut redis::Connection) -> Vec<u64> {
    CAUSES.iter().map(|f| field(c, f)).collect()
}
