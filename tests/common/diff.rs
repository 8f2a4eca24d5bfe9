//! The differential test: the module and this project's Lua reference (`bench/lua/`) run the
//! same operations on two servers; replies, keyspace and published messages must match.
//!
//! Leases expire for real during a run. To keep both sides on the same side of every expiry,
//! each step first waits out any key about to expire (within [`GUARD_MS`]), then runs the
//! operation on both servers back to back; TTLs are compared within [`TOL_MS`].

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{error_line, Server, Subscriber, Value};

/// Keys closer than this to expiring are waited out before an operation.
pub const GUARD_MS: i64 = 12;
/// TTL replies and PTTLs may differ by this much between the two servers.
pub const TOL_MS: i64 = 25;

/// One operation, as a module command and as the equivalent Lua reference call.
#[derive(Clone, Debug)]
pub struct Op {
    pub module: Vec<String>,
    pub script: &'static str,
    pub keys: Vec<String>,
    pub args: Vec<String>,
    /// Integer replies are TTLs: compare them within the tolerance.
    pub ttl_reply: bool,
}

impl Op {
    pub fn new(module: &[&str], script: &'static str, keys: &[&str], args: &[&str]) -> Op {
        Op {
            module: module.iter().map(|s| s.to_string()).collect(),
            script,
            keys: keys.iter().map(|s| s.to_string()).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
            ttl_reply: false,
        }
    }

    /// A plain Redis command run as it is on both servers (another client touching the keys).
    pub fn raw(cmd: &[&str]) -> Op {
        Op::new(cmd, "", &[], &[])
    }

    pub fn ttl(mut self) -> Op {
        self.ttl_reply = true;
        self
    }
}

/// Milliseconds since the epoch on this machine's clock (the servers' clock too).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// A module server and a Lua-reference server, with a subscriber on each.
pub struct Pair {
    pub module: Server,
    pub lua: Server,
    pub mc: redis::Connection,
    pub lc: redis::Connection,
    msub: Subscriber,
    lsub: Subscriber,
    shas: HashMap<String, String>,
    pub steps: usize,
    published_m: Vec<(String, String)>,
    published_l: Vec<(String, String)>,
}

impl Pair {
    pub fn new() -> Pair {
        let module = Server::start();
        let lua = Server::start_plain();
        let (mc, mut lc) = (module.conn(), lua.conn());
        let mut shas = HashMap::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/lua");
        for entry in std::fs::read_dir(&dir).expect("bench/lua") {
            let path = entry.expect("dir entry").path();
            if path.extension().and_then(|e| e.to_str()) != Some("lua") {
                continue;
            }
            let src = std::fs::read_to_string(&path).expect("read script");
            let sha: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(&src)
                .query(&mut lc)
                .unwrap_or_else(|e| panic!("{} does not load: {e}", path.display()));
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
            shas.insert(stem, sha);
        }
        let (msub, lsub) = (module.subscriber(), lua.subscriber());
        Pair { module, lua, mc, lc, msub, lsub, shas, steps: 0, published_m: vec![], published_l: vec![] }
    }

    /// Runs the Lua reference alone (for setup or for tests of the scripts themselves).
    pub fn lua_call(&mut self, op: &Op) -> Result<Value, String> {
        if op.script.is_empty() {
            let mut cmd = redis::cmd(&op.module[0]);
            for a in &op.module[1..] {
                cmd.arg(a);
            }
            return cmd.query::<Value>(&mut self.lc).map_err(error_line);
        }
        let sha = self.shas.get(op.script).unwrap_or_else(|| panic!("no bench/lua/{}.lua", op.script));
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(sha).arg(op.keys.len());
        for k in &op.keys {
            cmd.arg(k);
        }
        for a in &op.args {
            cmd.arg(a);
        }
        cmd.query::<Value>(&mut self.lc).map_err(error_line)
    }

    pub fn module_call(&mut self, op: &Op) -> Result<Value, String> {
        let mut cmd = redis::cmd(&op.module[0]);
        for a in &op.module[1..] {
            cmd.arg(a);
        }
        cmd.query::<Value>(&mut self.mc).map_err(error_line)
    }

    /// Waits until no key on either server is within GUARD_MS of expiring.
    pub fn wait_out_expiries(&mut self) {
        loop {
            let soonest = [soonest_expiry(&mut self.mc), soonest_expiry(&mut self.lc)].into_iter().flatten().min();
            match soonest {
                Some(ms) if ms <= GUARD_MS => std::thread::sleep(Duration::from_millis(ms as u64 + 3)),
                _ => return,
            }
        }
    }

    /// Runs `op` on both sides and asserts the replies match.
    pub fn step(&mut self, op: &Op) -> Value {
        self.wait_out_expiries();
        let m = self.module_call(op);
        let l = self.lua_call(op);
        self.steps += 1;
        let same = match (&m, &l) {
            (Ok(a), Ok(b)) => values_match(a, b, op.ttl_reply),
            _ => false,
        };
        assert!(same, "step {}: {:?}\n  module: {m:?}\n  lua:    {l:?}", self.steps, op);
        m.unwrap_or(Value::Nil)
    }

    /// Asserts both keyspaces and the published messages so far match.
    pub fn check(&mut self) {
        self.wait_out_expiries();
        assert_same_keyspace([("module", &mut self.mc), ("lua", &mut self.lc)], TOL_MS, self.steps);
        self.published_m.extend(self.msub.take());
        self.published_l.extend(self.lsub.take());
        let n = self.published_m.len().min(self.published_l.len());
        assert_eq!(self.published_m, self.published_l, "step {}: different messages", self.steps);
        self.published_m.drain(..n);
        self.published_l.drain(..n);
    }

    /// Deletes everything on both servers.
    pub fn flush(&mut self) {
        let _: () = redis::cmd("FLUSHALL").query(&mut self.mc).expect("FLUSHALL");
        let _: () = redis::cmd("FLUSHALL").query(&mut self.lc).expect("FLUSHALL");
    }
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

/// Milliseconds until the next expiry on the server: of a key, or of a fair-lock waiter's
/// deadline (a zset score), which decides a purge just as an expiry does.
pub fn soonest_expiry(c: &mut redis::Connection) -> Option<i64> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).ok()?;
    if keys.is_empty() {
        return None;
    }
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("PTTL").arg(k);
    }
    let ttls: Vec<i64> = p.query(c).ok()?;
    let now = now_ms();
    let mut soonest = ttls.into_iter().filter(|t| *t >= 0).min();
    for k in keys.iter().filter(|k| k.starts_with("redisson_lock_timeout:")) {
        let next: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(k)
            .arg(now)
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query(c)
            .ok()?;
        if let Some((_, score)) = next.first() {
            let ms = *score as i64 - now;
            soonest = Some(soonest.map_or(ms, |s| s.min(ms)));
        }
    }
    soonest
}

/// Asserts the two servers (named for the messages) hold the same keys with the same values, their
/// expiries and zset scores within `tol` ms of each other.
pub fn assert_same_keyspace(sides: [(&str, &mut redis::Connection); 2], tol: i64, step: usize) {
    let [(na, ca), (nb, cb)] = sides;
    let (a, b) = (dump(ca), dump(cb));
    let names_a: Vec<&String> = a.iter().map(|e| &e.0).collect();
    let names_b: Vec<&String> = b.iter().map(|e| &e.0).collect();
    assert_eq!(names_a, names_b, "step {step}: different keys");
    for (x, y) in a.iter().zip(b.iter()) {
        assert_eq!(x.1, y.1, "step {step}: key {} differs", x.0);
        let both_persistent = x.2 == -1 && y.2 == -1;
        assert!(
            both_persistent || (x.2 >= 0 && y.2 >= 0 && (x.2 - y.2).abs() <= tol),
            "step {step}: expiry of {} differs: {na} {} {nb} {}",
            x.0,
            x.2,
            y.2
        );
        let scores_near = x.3.len() == y.3.len() && x.3.iter().zip(&y.3).all(|(p, q)| (p - q).abs() <= tol);
        assert!(scores_near, "step {step}: scores of {} differ: {na} {:?} {nb} {:?}", x.0, x.3, y.3);
    }
}

/// Every key as (name, printable value, absolute expiry (PEXPIRETIME), zset scores), sorted by name.
pub fn dump(c: &mut redis::Connection) -> Vec<(String, String, i64, Vec<i64>)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let mut scores = Vec::new();
            let v = match t.as_str() {
                "string" => format!("{:?}", redis::cmd("GET").arg(&k).query::<Option<String>>(c)),
                "hash" => format!(
                    "{:?}",
                    redis::cmd("HGETALL").arg(&k).query::<std::collections::BTreeMap<String, String>>(c)
                ),
                "list" => format!("{:?}", redis::cmd("LRANGE").arg(&k).arg(0).arg(-1).query::<Vec<String>>(c)),
                "zset" => {
                    // Deadlines are computed from each server's clock: compare members and order
                    // exactly, scores within the tolerance (rounded to it).
                    let z: Vec<(String, f64)> =
                        redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
                    scores = z.iter().map(|(_, s)| *s as i64).collect();
                    format!("{:?}", z.into_iter().map(|(m, _)| m).collect::<Vec<_>>())
                }
                other => other.to_string(),
            };
            // Absolute, so the time the dump itself takes does not count as a difference.
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (k, format!("{t}:{v}"), at, scores)
        })
        .collect()
}

/// Replies match exactly, or, for TTL replies, within the tolerance.
pub fn values_match(a: &Value, b: &Value, ttl: bool) -> bool {
    match (a, b) {
        // Any time read from each side's clock, negative ones too: a fair waiter's base TTL is
        // `tail deadline - now`, below 0 once a CANCEL with a large `wait` pulled the tail's
        // deadline into the past. `PTTL`'s -1 and -2 are no times and must match exactly.
        (Value::Int(x), Value::Int(y)) if ttl && ![-1, -2].contains(x) && ![-1, -2].contains(y) => {
            (x - y).abs() <= TOL_MS
        }
        // `[pttl, token]` replies: only the first element can be a TTL.
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).enumerate().all(|(i, (p, q))| values_match(p, q, ttl && i == 0))
        }
        _ => a == b,
    }
}

/// A number from the environment (`DIFF_SEED`, `DIFF_OPS`), or `default`.
pub fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The random differential run: `DIFF_OPS` (default `ops`) operations drawn by `draw` from
/// `DIFF_SEED` (default `seed`, printed so a failure can be replayed), each run on both
/// servers; one step in `pause_one_in` is followed by a 1-50 ms pause so short leases expire
/// mid-run; keyspaces and messages are compared every 100 steps and at the end.
pub fn run_random(seed: u64, ops: u64, pause_one_in: u32, mut draw: impl FnMut(&mut SmallRng) -> Op) {
    let (seed, n) = (env("DIFF_SEED", seed), env("DIFF_OPS", ops));
    eprintln!("DIFF_SEED={seed} DIFF_OPS={n}");
    let mut r = SmallRng::seed_from_u64(seed);
    let mut pair = Pair::new();
    for i in 0..n {
        let op = draw(&mut r);
        pair.step(&op);
        if r.gen_ratio(1, pause_one_in) {
            std::thread::sleep(Duration::from_millis(r.gen_range(1..50)));
        }
        if i % 100 == 99 {
            pair.check();
        }
    }
    pair.check();
}
