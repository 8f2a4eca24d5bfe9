//! The differential pair for Redisson's synchronizer scripts: a plain server (Lua) and one
//! with `lockmod.redisson-scripts native`, each sent the same `EVALSHA` by raw connections
//! (RESP2 and RESP3), with the replies compared byte for byte (their encoding too), the
//! keyspaces compared byte-safely (permit ids are raw bytes; TTLs within the tolerance) and
//! the messages compared channel by channel.
//!
//! Times: Redisson passes its own clock (`now`) and absolute expiries (`until`) in ARGV; the
//! module reads the server's clock. Before each step, any key or permit expiring within the
//! guard is waited out, so both sides judge every expiry alike. A permit whose lease ended is
//! in `{name}:timeout` until a call reclaims it; a native server may reclaim it earlier by
//! itself (issue 26: the lease ends at its deadline). Where the native side did, the pair
//! runs `availablePermits` on both sides first ([`SyncPair::settle`], in `sync_pair/settle.rs`),
//! so both are back in the same state; the message it makes on the Lua side is the one the
//! native side sent.

mod settle;

use std::collections::BTreeMap;

use super::diff::{keyspace_difference, now_ms, Entry};
use super::redisson::{raw_match, Raw, RawConn, Scripts, TOL_MS};
use super::{Server, Subscriber};

/// Keys and permits closer than this to expiring are waited out before a step.
pub const GUARD_MS: i64 = 25;

/// The synchronizer bodies, from `../shared/redisson-sync-scripts/` (or
/// `$LOCKMOD_REDISSON_SYNC_SCRIPTS`): missing, the tests fail; they never skip.
pub fn load() -> Scripts {
    let dir = match std::env::var_os("LOCKMOD_REDISSON_SYNC_SCRIPTS") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/redisson-sync-scripts"),
    };
    assert!(
        dir.join("index.tsv").is_file(),
        "Redisson's synchronizer scripts are missing at {}: the repository expects shared/ beside it \
         (or set LOCKMOD_REDISSON_SYNC_SCRIPTS)",
        dir.display()
    );
    Scripts::load_from(&dir, 38)
}

pub struct SyncPair {
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
    /// Steps a stalled machine made ambiguous, after which both sides were flushed.
    pub resyncs: usize,
    /// The `availablePermits` call that reclaims on both sides (see [`SyncPair::settle`]).
    pub settle_with: Option<(String, bool)>,
    pub settled: usize,
    /// The synchronizer names in play (a `:timeout` zset does not name its semaphore:
    /// `x` and `{x}` share `{x}:timeout`).
    pub names: Vec<String>,
    /// The Lua side's expired permits already given the native timer time to reclaim.
    waited: BTreeMap<String, Vec<(Vec<u8>, f64)>>,
    /// When the next step's arguments were built, if they carry a time read then (Redisson's
    /// `now`, a lease end): the step counts as stalled from that moment, since a lease ending
    /// between it and the call is seen by the native server's timer and not by the Lua.
    pub built_at: Option<i64>,
}

impl SyncPair {
    pub fn new(scripts: &Scripts, native_args: &[&str]) -> SyncPair {
        let lua = Server::start_plain();
        let mut args = vec!["--lockmod.redisson-scripts", "native"];
        args.extend_from_slice(native_args);
        let native = Server::start_with(true, &args);
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
        SyncPair {
            lua,
            native,
            lc,
            nc,
            raw,
            lsub,
            nsub,
            steps: 0,
            scripts_sent: 0,
            resyncs: 0,
            settle_with: None,
            settled: 0,
            names: Vec::new(),
            waited: BTreeMap::new(),
            built_at: None,
        }
    }

    /// Waits until nothing on either side expires within `guard` ms (keys, and permits in a
    /// `:timeout` zset); settles permits a native side reclaimed by itself. Returns the time
    /// before which nothing expires, if anything will.
    pub fn guard(&mut self, guard: i64) -> Option<i64> {
        loop {
            // Each lease end that passed is settled before the next one can. The settle returns
            // every lease ended before `from`; one that ends while it runs (it may wait 80 ms
            // for one name's native timer while another's lease ends) is looked for from `from`
            // on, never from the time after it, or it would pass unsettled.
            let from = now_ms();
            self.settle();
            let t = now_ms();
            let (l, n) = (soonest(&mut self.lc, from), soonest(&mut self.nc, from));
            match [l, n].into_iter().flatten().min() {
                Some(at) if at - t <= guard => {
                    std::thread::sleep(std::time::Duration::from_millis((at - t).max(0) as u64 + 3))
                }
                other => return other,
            }
        }
    }

    /// Sends `args` to both sides (RESP3 if `resp3`) and asserts the replies match (integers
    /// within the tolerance when `ttl`). A step a stalled machine made ambiguous is compared
    /// all the same; only if the sides then differ are both flushed.
    pub fn step(&mut self, args: &[Vec<u8>], resp3: bool, ttl: bool) -> (Raw, Raw) {
        let soonest = self.guard(2 * GUARD_MS);
        let t0 = self.built_at.take().map_or(now_ms(), |b| b.min(now_ms()));
        let i = if resp3 { 2 } else { 0 };
        let l = self.raw[i].call(args);
        let n = self.raw[i + 1].call(args);
        let took = now_ms() - t0;
        self.steps += 1;
        if std::env::var_os("SYNC_DEBUG").is_some() {
            eprintln!("step {} {} -> {l:?}", self.steps + 1, shown(args));
        }
        if args.first().is_some_and(|a| a.eq_ignore_ascii_case(b"EVALSHA")) {
            self.scripts_sent += 1;
        }
        let expiry_passed = soonest.is_some_and(|e| t0 + took >= e);
        let stalled = took > TOL_MS / 2 || expiry_passed;
        if stalled {
            // A key or a lease that ended during the step may have ended for one side's call
            // only (the Lua reads Redisson's `now`, the module the server's clock); a lease
            // then comes back, and is announced, in a different call on each side.
            if !raw_match(&l, &n, ttl) || self.keyspaces_differ() || (expiry_passed && self.messages_differ()) {
                eprintln!("step {} {} stalled ({took} ms) and the sides differ: both flushed", self.steps, shown(args));
                self.resync();
            }
        } else if !raw_match(&l, &n, ttl) {
            let (a, b) = (dump(&mut self.lc), dump(&mut self.nc));
            panic!(
                "step {} {} (resp3: {resp3})\n  lua:    {l:?}\n  native: {n:?}\n  lua keys:    {a:?}\n  native keys: {b:?}",
                self.steps,
                shown(args)
            );
        }
        (l, n)
    }

    /// Sends each command to both sides, as another client would (no guard, no comparison
    /// but that both succeed).
    pub fn setup(&mut self, cmds: &[Vec<Vec<u8>>]) {
        for c in cmds {
            for con in [&mut self.lc, &mut self.nc] {
                let mut q = redis::cmd(std::str::from_utf8(&c[0]).expect("command name"));
                for a in &c[1..] {
                    q.arg(a.as_slice());
                }
                let _: redis::Value = q.query(con).unwrap_or_else(|e| panic!("{}: {e}", shown(c)));
            }
        }
    }

    /// Sends `args` to both sides (RESP3 if `resp3`) after the guard and asserts nothing: both
    /// replies, for a caller that gathers differences (`tests/redisson/redisson_sync_states.rs`).
    pub fn call_both(&mut self, args: &[Vec<u8>], resp3: bool) -> (Raw, Raw) {
        self.guard(2 * GUARD_MS);
        let i = if resp3 { 2 } else { 0 };
        let l = self.raw[i].call(args);
        let n = self.raw[i + 1].call(args);
        self.steps += 1;
        self.scripts_sent += 1;
        (l, n)
    }

    fn keyspaces_differ(&mut self) -> bool {
        let (l, n) = self.stable_dumps();
        keyspace_difference(("lua", &l), ("native", &n), TOL_MS / 2).is_some()
    }

    /// Takes the messages published so far on both sides: true if they differ.
    fn messages_differ(&mut self) -> bool {
        by_channel(self.lsub.take()) != by_channel(self.nsub.take())
    }

    fn stable_dumps(&mut self) -> (Vec<Entry>, Vec<Entry>) {
        loop {
            let soonest = self.guard(5 * GUARD_MS);
            let dumps = (dump(&mut self.lc), dump(&mut self.nc));
            if soonest.is_none_or(|e| now_ms() < e) {
                return dumps;
            }
        }
    }

    /// Asserts both keyspaces and the messages published so far match.
    pub fn check(&mut self) {
        if let Some(d) = self.difference() {
            panic!("step {}: {d}", self.steps);
        }
    }

    /// The first difference between the keyspaces or the messages so far (compared per
    /// channel: a reclaim the native side made at a deadline may come before another
    /// channel's message that the Lua side's reclaim follows).
    pub fn difference(&mut self) -> Option<String> {
        let (l, n) = self.stable_dumps();
        let (ml, mn) = (by_channel(self.lsub.take()), by_channel(self.nsub.take()));
        // Where the server's Lua writes a number as `1e+14`, the module's own messages (its
        // reclaim timer's) keep the digits, as every other release writes them.
        let (ml, mn) = if super::server_version::lua_numbers_shortest() {
            (integer_messages(ml), integer_messages(mn))
        } else {
            (ml, mn)
        };
        keyspace_difference(("lua", &l), ("native", &n), TOL_MS)
            .or_else(|| (ml != mn).then(|| format!("different messages: lua {ml:?} native {mn:?}")))
    }

    fn resync(&mut self) {
        self.resyncs += 1;
        self.waited.clear();
        self.flush_quiet();
    }

    /// Takes messages polling every 300 us instead of 2 ms: for a run of many short cases
    /// that compares after each (the random run keeps the default, whose pace its settling of
    /// the native reclaim timer expects).
    pub fn fast_messages(&mut self) {
        self.lsub.poll = std::time::Duration::from_micros(300);
        self.nsub.poll = std::time::Duration::from_micros(300);
    }

    /// Flushes both sides' keys (messages published so far stay to be taken).
    pub fn flush_keys(&mut self) {
        for c in [&mut self.lc, &mut self.nc] {
            let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        }
    }

    /// Flushes both sides and drops the messages so far, comparing nothing.
    fn flush_quiet(&mut self) {
        for c in [&mut self.lc, &mut self.nc] {
            let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        }
        self.lsub.take();
        self.nsub.take();
    }

    /// Checks, then flushes both sides.
    pub fn flush(&mut self) {
        self.check();
        self.flush_quiet();
    }
}

fn shown(args: &[Vec<u8>]) -> String {
    let v: Vec<String> = args
        .iter()
        .map(|a| match std::str::from_utf8(a) {
            Ok(s) if s.chars().all(|c| !c.is_control()) => s.to_string(),
            _ => format!("0x{}", hex(a)),
        })
        .collect();
    format!("{v:?}")
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn integer_messages(m: BTreeMap<String, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    m.into_iter().map(|(ch, ms)| (ch, ms.iter().map(|m| super::server_version::integer_message(m)).collect())).collect()
}

fn by_channel(m: Vec<(String, String)>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (c, p) in m {
        out.entry(c).or_default().push(p);
    }
    out
}

fn zsets(c: &mut redis::Connection) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*:timeout").query(c).unwrap_or_default();
    keys.into_iter().filter(|k| redis::cmd("TYPE").arg(k).query::<String>(c).is_ok_and(|t| t == "zset")).collect()
}

fn zset(c: &mut redis::Connection, k: &str) -> Vec<(Vec<u8>, f64)> {
    redis::cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES").query(c).unwrap_or_default()
}

/// The soonest expiry (ms since the epoch) at or after `t` of a key or a permit.
fn soonest(c: &mut redis::Connection, t: i64) -> Option<i64> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).ok()?;
    let mut at = None::<i64>;
    let mut min = |v: i64| at = Some(at.map_or(v, |a| a.min(v)));
    for k in &keys {
        let e: i64 = redis::cmd("PEXPIRETIME").arg(k).query(c).unwrap_or(-1);
        if e >= 0 {
            min(e);
        }
    }
    for z in zsets(c) {
        let next: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(&z)
            .arg(t - 2)
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query(c)
            .unwrap_or_default();
        if let Some((_, s)) = next.first() {
            min(s.ceil() as i64);
        }
    }
    at
}

/// The keyspace as (name, type and value, absolute expiry, zset scores), byte-safe: values
/// and zset members that are not printable are shown in hex.
pub fn dump(c: &mut redis::Connection) -> Vec<Entry> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    keys.sort();
    let show = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(s) if s.chars().all(|ch| !ch.is_control()) => format!("{s:?}"),
        _ => format!("0x{}", hex(b)),
    };
    keys.into_iter()
        .map(|k| {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let mut scores = Vec::new();
            let v = match t.as_str() {
                "string" => redis::cmd("GET")
                    .arg(&k)
                    .query::<Option<Vec<u8>>>(c)
                    .ok()
                    .flatten()
                    .map_or("nil".into(), |v| show(&v)),
                "zset" => {
                    let z: Vec<(Vec<u8>, f64)> =
                        redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
                    scores = z.iter().map(|(_, s)| *s as i64).collect();
                    z.iter().map(|(m, _)| show(m)).collect::<Vec<_>>().join(",")
                }
                "hash" => format!(
                    "{:?}",
                    redis::cmd("HGETALL")
                        .arg(&k)
                        .query::<Vec<Vec<u8>>>(c)
                        .map(|v| v.iter().map(|x| show(x)).collect::<Vec<_>>())
                ),
                other => other.to_string(),
            };
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (String::from_utf8_lossy(&k).into_owned(), format!("{t}:{v}"), at, scores)
        })
        .collect()
}
