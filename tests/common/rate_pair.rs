//! The differential pair for Redisson's rate-limiter bodies: two servers with the module
//! loaded, one with `lockmod.redisson-scripts off` (every body runs as Lua; the module is
//! there so that `RGcra`'s Lua finds a `GCRA`, and so that native `RATELIMITER.*` calls can
//! be mixed in on both sides) and one with `native`. Each is sent the same `EVALSHA` by raw
//! connections (RESP2 and RESP3) and the replies are compared byte for byte; the keyspaces
//! byte-safely (values, hash fields, zset members and scores exactly; expiries within the
//! tolerance, each server setting them on its own clock); and the keyspace events each call
//! fires (`notify-keyspace-events`, every class the bodies touch), in order.
//!
//! Members: a grant a Redisson body makes holds the random bytes of its ARGV, the same on both
//! sides, so it is compared byte for byte. A grant made by a native `RATELIMITER.ACQUIRE`
//! holds random bytes the module drew on its own server: such members (random bytes the test
//! never sent) are compared by their permits and score alone.

use std::collections::BTreeSet;

use super::diff::{keyspace_difference, Entry};
use super::redisson::{Raw, RawConn, Scripts, TOL_MS};
use super::sync_pair::hex;
use super::{Server, Subscriber};

/// The events compared: keyspace channel (`K`), generic, string, hash and zset commands.
/// Expiry and eviction events are left out: each server expires keys on its own schedule.
pub const EVENTS: &str = "Kg$hz";

pub struct RatePair {
    pub lua: Server,
    pub native: Server,
    pub lc: redis::Connection,
    pub nc: redis::Connection,
    raw: [RawConn; 4],
    lsub: Subscriber,
    nsub: Subscriber,
    /// Random bytes sent in ARGV: members holding them are compared byte for byte.
    pub sent: BTreeSet<Vec<u8>>,
}

impl RatePair {
    /// The pair, every body of `scripts` loaded on both sides (`EVALSHA` finds them).
    pub fn new(scripts: &Scripts) -> RatePair {
        let lua = Server::start_with(true, &["--notify-keyspace-events", EVENTS]);
        let native =
            Server::start_with(true, &["--notify-keyspace-events", EVENTS, "--lockmod.redisson-scripts", "native"]);
        let (mut lc, mut nc) = (lua.conn(), native.conn());
        for c in [&mut lc, &mut nc] {
            super::ratelimiter::load_on(c, scripts);
        }
        let raw = [
            RawConn::open(&lua, false),
            RawConn::open(&native, false),
            RawConn::open(&lua, true),
            RawConn::open(&native, true),
        ];
        let (mut lsub, mut nsub) = (lua.subscriber(), native.subscriber());
        lsub.poll = std::time::Duration::from_micros(300);
        nsub.poll = std::time::Duration::from_micros(300);
        RatePair { lua, native, lc, nc, raw, lsub, nsub, sent: BTreeSet::new() }
    }

    /// Runs each command on both sides, as another client would (both must succeed), and
    /// drops the events they fired.
    pub fn setup(&mut self, cmds: &[Vec<Vec<u8>>]) {
        for c in cmds {
            for con in [&mut self.lc, &mut self.nc] {
                let _: redis::Value =
                    super::ratelimiter::run(con, c).unwrap_or_else(|e| panic!("setup {:?}: {e}", shown(c)));
            }
        }
        self.lsub.take();
        self.nsub.take();
    }

    /// Sends `args` to both sides (RESP3 if `resp3`): both raw replies.
    pub fn call(&mut self, args: &[Vec<u8>], resp3: bool) -> (Raw, Raw) {
        let i = if resp3 { 2 } else { 0 };
        (self.raw[i].call(args), self.raw[i + 1].call(args))
    }

    /// The first difference between the keyspaces, or between the events fired since the
    /// last look. `tat` names a `GCRA` key, whose value (a time in microseconds, read from
    /// each server's clock) is compared within the tolerance.
    pub fn difference(&mut self, tat: Option<&str>) -> Option<String> {
        let (mut l, mut n) = (dump(&mut self.lc, &self.sent), dump(&mut self.nc, &self.sent));
        if let Some(t) = tat {
            if let Some(d) = tat_difference(&mut l, &mut n, t) {
                return Some(d);
            }
        }
        let (el, en) = (self.lsub.take(), self.nsub.take());
        keyspace_difference(("lua", &l), ("native", &n), TOL_MS)
            .or_else(|| (el != en).then(|| format!("different events: lua {el:?} native {en:?}")))
    }

    /// Flushes both sides and drops the events.
    pub fn flush(&mut self) {
        for c in [&mut self.lc, &mut self.nc] {
            let _: () = redis::cmd("FLUSHALL").query(c).expect("FLUSHALL");
        }
        self.lsub.take();
        self.nsub.take();
    }
}

/// Compares the `GCRA` key `t` of both dumps within the tolerance, then makes them equal.
fn tat_difference(l: &mut [Entry], n: &mut [Entry], t: &str) -> Option<String> {
    let find = |d: &mut [Entry]| d.iter().position(|e| e.0 == t);
    let (Some(i), Some(j)) = (find(l), find(n)) else { return None };
    if l[i].1 == n[j].1 {
        return None;
    }
    let num = |e: &Entry| e.1.trim_start_matches("string:").trim_matches('"').parse::<i64>().ok();
    match (num(&l[i]), num(&n[j])) {
        (Some(a), Some(b)) if (a - b).abs() <= TOL_MS * 1000 => {
            n[j].1 = l[i].1.clone();
            None
        }
        _ => Some(format!("TAT {t}: lua {} native {}", l[i].1, n[j].1)),
    }
}

pub fn shown(args: &[Vec<u8>]) -> String {
    let v: Vec<String> = args
        .iter()
        .map(|a| match std::str::from_utf8(a) {
            Ok(s) if s.chars().all(|c| !c.is_control()) && s.len() < 80 => s.to_string(),
            Ok(s) if s.len() >= 80 => format!("<{} bytes>", s.len()),
            _ => format!("0x{}", hex(a)),
        })
        .collect();
    format!("{v:?}")
}

/// A member as compared: byte for byte if it holds random bytes the test sent (or is not a
/// grant at all), else its permits only (a native command's grant).
fn member(m: &[u8], sent: &BTreeSet<Vec<u8>>) -> String {
    let n = m.first().map_or(0, |&l| usize::from(l));
    match (m.get(1..1 + n), m.get(1 + n..5 + n)) {
        (Some(random), Some(p)) if m.len() == 5 + n && !sent.contains(random) => {
            format!("native-grant({})", u32::from_le_bytes([p[0], p[1], p[2], p[3]]))
        }
        _ => format!("0x{}", hex(m)),
    }
}

/// The keyspace as (name, type and value, absolute expiry, zset scores), byte-safe.
pub fn dump(c: &mut redis::Connection, sent: &BTreeSet<Vec<u8>>) -> Vec<Entry> {
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    keys.sort();
    let show = |b: &[u8]| match std::str::from_utf8(b) {
        Ok(s) if s.chars().all(|ch| !ch.is_control()) => format!("{s:?}"),
        _ => format!("0x{}", hex(b)),
    };
    keys.into_iter()
        .map(|k| {
            let t: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
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
                    // Scores are ARGV's times, the same on both sides: compared exactly.
                    let shown: Vec<String> = z.iter().map(|(m, s)| format!("{}@{s}", member(m, sent))).collect();
                    shown.join(",")
                }
                "hash" => {
                    let mut h: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL").arg(&k).query(c).expect("HGETALL");
                    h.sort();
                    h.iter().map(|(f, v)| format!("{}={}", show(f), show(v))).collect::<Vec<_>>().join(",")
                }
                "list" => {
                    let l: Vec<Vec<u8>> = redis::cmd("LRANGE").arg(&k).arg(0).arg(-1).query(c).expect("LRANGE");
                    l.iter().map(|x| show(x)).collect::<Vec<_>>().join(",")
                }
                other => other.to_string(),
            };
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (String::from_utf8_lossy(&k).into_owned(), format!("{t}:{v}"), at, Vec::new())
        })
        .collect()
}
