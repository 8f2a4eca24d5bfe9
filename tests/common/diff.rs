//! The differential test: the module and this project's Lua reference (`bench/lua/`) run the
//! same operations on two servers; replies, keyspace and published messages must match.
//!
//! Leases expire for real during a run. To keep both sides on the same side of every expiry,
//! each step first waits out any key about to expire (within [`GUARD_MS`]), then runs the
//! operation on both servers back to back; TTLs are compared within [`TOL_MS`]. A step that a
//! loaded machine stalls past what the guard and the tolerances cover is not exact: see
//! [`Pair::step`]. Keyspaces are dumped only while nothing expires, and messages are taken
//! up to a marker, never after a guessed delay.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{error_line, Server, Subscriber, Value};

/// Keys closer than this to expiring are waited out before an operation.
pub const GUARD_MS: i64 = 12;
/// TTL replies and PTTLs may differ by this much between the two servers.
pub const TOL_MS: i64 = 25;
/// A step is exact when both calls ran within this many ms (and nothing expired meanwhile):
/// every expiry it sets then differs by at most this between the servers.
pub const EXACT_MS: i64 = 10;
/// Expiries may differ by this much after a step that was not exact, or both servers are
/// flushed. With exact steps' own, it bounds every expiry's difference, so that a TTL reply,
/// an expiry less the time of the call, differs by at most `SKEW_MS + EXACT_MS` (and a ms of
/// rounding on each side): within [`TOL_MS`].
pub const SKEW_MS: i64 = 13;

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
    /// Steps that were not exact (see [`Pair::step`]), and how many of them left the servers
    /// apart, so both were flushed.
    pub unclear: usize,
    pub realigned: usize,
    pub resyncs: usize,
    /// The last steps, shown when one fails.
    recent: VecDeque<String>,
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
        Pair {
            module,
            lua,
            mc,
            lc,
            msub,
            lsub,
            shas,
            steps: 0,
            unclear: 0,
            realigned: 0,
            resyncs: 0,
            recent: VecDeque::new(),
        }
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

    /// Waits until no key on either server is within GUARD_MS of expiring. Returns a time (ms
    /// since the epoch) before which nothing on either server expires, if anything will.
    pub fn wait_out_expiries(&mut self) -> Option<i64> {
        wait_out_expiries([&mut self.mc, &mut self.lc], GUARD_MS)
    }

    /// Runs `op` on both sides and asserts the replies match.
    ///
    /// The step is exact when both calls ran within [`EXACT_MS`] and nothing could expire
    /// between the wait and the end of the second call: then any difference fails the test.
    /// Otherwise (a loaded machine stalled the test or a server) the two servers may
    /// legitimately disagree: one call saw a lease end that the other did not, or their
    /// expiries are further apart than the tolerances allow for. Such a step is compared all
    /// the same, keyspaces and messages too: if only times differ, the reference's are set to
    /// the module's ([`Pair::realign`]); if anything else does, both servers are flushed and
    /// the run goes on from there. Either way the ambiguity cannot leak into later, exact
    /// steps. (On two cores loaded four times over, about one step in 300 was not exact, and
    /// none of those needed either.)
    pub fn step(&mut self, op: &Op) -> Value {
        let soonest = self.wait_out_expiries();
        let t0 = now_ms();
        let m = self.module_call(op);
        let l = self.lua_call(op);
        let t1 = now_ms();
        self.steps += 1;
        let same = match (&m, &l) {
            (Ok(a), Ok(b)) => values_match(a, b, op.ttl_reply),
            _ => false,
        };
        let unclear = unclear(t0, t1, soonest);
        let shown = format!("step {}: {:?}\n  module: {m:?}\n  lua:    {l:?}", self.steps, op.module);
        if self.recent.len() == 8 {
            self.recent.pop_front();
        }
        self.recent
            .push_back(format!("{shown}{}", unclear.as_deref().map(|u| format!("\n  ({u})")).unwrap_or_default()));
        match unclear {
            None => assert!(same, "{shown}\nthe steps before it:\n{}", self.history()),
            Some(why) => {
                self.unclear += 1;
                // The second call ran up to `t1 - t0` ms after the first: its TTLs may be that
                // much further apart.
                let near = match (&m, &l) {
                    (Ok(a), Ok(b)) => values_match_within(a, b, op.ttl_reply, TOL_MS + (t1 - t0)),
                    _ => false,
                };
                if let Some(d) = if near { self.realign() } else { Some("different replies".into()) } {
                    eprintln!("step {} was not exact ({why}) and the servers differ ({d}): both flushed", self.steps);
                    self.resync();
                }
            }
        }
        m.unwrap_or(Value::Nil)
    }

    fn history(&self) -> String {
        self.recent.iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }

    /// Asserts both keyspaces and the published messages so far match.
    pub fn check(&mut self) {
        if let Some(d) = self.differences(TOL_MS) {
            panic!("step {}: {d}\nthe last steps:\n{}", self.steps, self.history());
        }
    }

    /// The first difference between the keyspaces (expiries and deadlines within `tol` ms) or
    /// in the messages published since the last look, if any.
    fn differences(&mut self, tol: i64) -> Option<String> {
        let (m, l) = self.dumps();
        let messages = (self.msub.take_through(&mut self.mc), self.lsub.take_through(&mut self.lc));
        keyspace_difference(("module", &m), ("lua", &l), tol).or_else(|| {
            (messages.0 != messages.1)
                .then(|| format!("different messages: module {:?} lua {:?}", messages.0, messages.1))
        })
    }

    /// Both keyspaces, dumped while nothing expires (see [`stable_dumps`]).
    pub fn dumps(&mut self) -> (Vec<Entry>, Vec<Entry>) {
        stable_dumps([&mut self.mc, &mut self.lc], GUARD_MS)
    }

    /// After a step that was not exact: if the keyspaces and messages match but for times (the
    /// reference's expiries and zset scores set later than the module's, by a stall between
    /// the calls), sets the reference's times to the module's, which no later step can tell
    /// from both calls having run at once (the Lua side keeps no state of its own). Else the
    /// difference.
    fn realign(&mut self) -> Option<String> {
        let (m, l) = self.dumps();
        let messages = (self.msub.take_through(&mut self.mc), self.lsub.take_through(&mut self.lc));
        if messages.0 != messages.1 {
            return Some(format!("different messages: module {:?} lua {:?}", messages.0, messages.1));
        }
        // Only times may differ: compared with any tolerance, the keyspaces must match.
        if let Some(d) = keyspace_difference(("module", &m), ("lua", &l), i64::MAX / 4) {
            return Some(d);
        }
        let mut moved = false;
        for (x, y) in m.iter().zip(&l) {
            if x.2 >= 0 && (x.2 - y.2).abs() > SKEW_MS {
                let _: i64 = redis::cmd("PEXPIREAT").arg(&y.0).arg(x.2).query(&mut self.lc).expect("PEXPIREAT");
                moved = true;
            }
            if x.3.iter().zip(&y.3).any(|(p, q)| (p - q).abs() > SKEW_MS) {
                let z: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(&x.0)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(&mut self.mc)
                    .expect("ZRANGE");
                let mut add = redis::cmd("ZADD");
                add.arg(&y.0).arg("XX");
                for (member, score) in z {
                    add.arg(score).arg(member);
                }
                let _: i64 = add.query(&mut self.lc).expect("ZADD");
                moved = true;
            }
        }
        self.realigned += usize::from(moved);
        None
    }

    /// Flushes both servers and drops the messages so far: the same state on both sides again.
    pub fn resync(&mut self) {
        self.resyncs += 1;
        self.flush();
        self.msub.take_through(&mut self.mc);
        self.lsub.take_through(&mut self.lc);
    }

    /// Deletes everything on both servers.
    pub fn flush(&mut self) {
        let _: () = redis::cmd("FLUSHALL").query(&mut self.mc).expect("FLUSHALL");
        let _: () = redis::cmd("FLUSHALL").query(&mut self.lc).expect("FLUSHALL");
    }
}

/// Why a step that ran its calls from `t0` to `t1` is not exact, if it is not: the calls took
/// too long for the tolerances, or a key or deadline could pass (`soonest`) before they ended.
fn unclear(t0: i64, t1: i64, soonest: Option<i64>) -> Option<String> {
    if t1 - t0 > EXACT_MS {
        return Some(format!("the calls took {} ms", t1 - t0));
    }
    match soonest {
        Some(e) if t1 >= e => Some(format!("something could expire {} ms after the calls began", e - t0)),
        _ => None,
    }
}

impl Default for Pair {
    fn default() -> Self {
        Pair::new()
    }
}

/// Waits until no key (or fair deadline) on either server expires within `guard` ms. Returns a
/// time (ms since the epoch) before which nothing on either server expires, if anything will.
pub fn wait_out_expiries(conns: [&mut redis::Connection; 2], guard: i64) -> Option<i64> {
    let [a, b] = conns;
    loop {
        // Read before the queries: `t + ms` is then never later than the real expiry.
        let t = now_ms();
        match [soonest_expiry(a), soonest_expiry(b)].into_iter().flatten().min() {
            Some(ms) if ms <= guard => std::thread::sleep(Duration::from_millis(ms.max(0) as u64 + 3)),
            other => return other.map(|ms| t + ms),
        }
    }
}

/// Both servers' keyspaces, dumped while nothing on either expires: a dump takes a while on a
/// loaded machine, and a key that expired between the two dumps would be in one only. They are
/// taken again until nothing could expire from before the first to after the second.
pub fn stable_dumps(conns: [&mut redis::Connection; 2], guard: i64) -> (Vec<Entry>, Vec<Entry>) {
    let [a, b] = conns;
    loop {
        let soonest = wait_out_expiries([&mut *a, &mut *b], guard);
        let dumps = (dump(a), dump(b));
        if soonest.is_none_or(|e| now_ms() < e) {
            return dumps;
        }
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

/// The first difference between two dumps (named for the message): keys, values, expiries
/// and zset scores more than `tol` ms apart.
pub fn keyspace_difference((na, a): (&str, &[Entry]), (nb, b): (&str, &[Entry]), tol: i64) -> Option<String> {
    let names_a: Vec<&String> = a.iter().map(|e| &e.0).collect();
    let names_b: Vec<&String> = b.iter().map(|e| &e.0).collect();
    if names_a != names_b {
        return Some(format!("different keys: {na} {a:?} {nb} {b:?}"));
    }
    for (x, y) in a.iter().zip(b.iter()) {
        if x.1 != y.1 {
            return Some(format!("key {} differs: {na} {} {nb} {}", x.0, x.1, y.1));
        }
        let both_persistent = x.2 == -1 && y.2 == -1;
        if !(both_persistent || (x.2 >= 0 && y.2 >= 0 && (x.2 - y.2).abs() <= tol)) {
            return Some(format!("expiry of {} differs: {na} {} {nb} {}", x.0, x.2, y.2));
        }
        let scores_near = x.3.len() == y.3.len() && x.3.iter().zip(&y.3).all(|(p, q)| (p - q).abs() <= tol);
        if !scores_near {
            return Some(format!("scores of {} differ: {na} {:?} {nb} {:?}", x.0, x.3, y.3));
        }
    }
    None
}

/// A key as (name, printable value, absolute expiry (PEXPIRETIME), zset scores).
pub type Entry = (String, String, i64, Vec<i64>);

/// Every key as (name, printable value, absolute expiry (PEXPIRETIME), zset scores), sorted by name.
pub fn dump(c: &mut redis::Connection) -> Vec<Entry> {
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
    values_match_within(a, b, ttl, TOL_MS)
}

/// Replies match exactly, or, for TTL replies, within `tol` ms.
pub fn values_match_within(a: &Value, b: &Value, ttl: bool, tol: i64) -> bool {
    match (a, b) {
        // Any time read from each side's clock, negative ones too: a fair waiter's base TTL is
        // `tail deadline - now`, below 0 once a CANCEL with a large `wait` pulled the tail's
        // deadline into the past. `PTTL`'s -1 and -2 are no times and must match exactly.
        (Value::Int(x), Value::Int(y)) if ttl && ![-1, -2].contains(x) && ![-1, -2].contains(y) => (x - y).abs() <= tol,
        // `[pttl, token]` replies: only the first element can be a TTL.
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).enumerate().all(|(i, (p, q))| values_match_within(p, q, ttl && i == 0, tol))
        }
        _ => a == b,
    }
}

/// One random run of Redisson's bodies at a time per test binary: `diff_redisson`'s and
/// `diff_sync`'s families (in one binary since `tests/redisson/`, in two before, each family
/// after the other) start four servers each, plenty on a small machine, and the fewer
/// processes compete, the closer each pair of calls runs. nextest runs each test in a process
/// of its own: there the lock waits for nothing.
pub fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed run poisons the lock; the next one can still take it.
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
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
    eprintln!(
        "{} steps, {} not exact: {} realigned, {} resynchronised",
        pair.steps, pair.unclear, pair.realigned, pair.resyncs
    );
    // Each resynchronisation forgets the state built so far: a run that keeps doing so tests
    // little (on a quiet machine there are none).
    assert!(pair.resyncs * 10 <= pair.steps, "the machine is too loaded for this test: {} resyncs", pair.resyncs);
}
