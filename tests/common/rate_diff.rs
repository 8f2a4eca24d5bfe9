//! What `tests/redisson/diff_ratelimiter.rs` needs beside its runs: Redisson's release groups of
//! `RRateLimiter` bodies, the test's own Lua for the corrections it applies to the Lua side,
//! and the ledger that checks the native side's grants against the rate (issue 36).

use std::collections::{BTreeMap, BTreeSet};

use super::ratelimiter as rl;

/// The bodies one release group sends.
pub struct Group {
    pub releases: Vec<String>,
    pub acquire: String,
    pub try_set: String,
    pub set_rate: String,
    pub release: Option<String>,
    pub set_or_update: Option<String>,
}

/// The release groups: releases that send exactly the same `RRateLimiter` bodies.
pub fn groups(scripts: &super::redisson::Scripts) -> Vec<Group> {
    let mine = |shas: &BTreeSet<String>| -> Vec<String> {
        let limiter = |s: &&String| scripts.body(s).class != "RedissonGcra.java";
        shas.iter().filter(limiter).cloned().collect()
    };
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for (releases, shas) in &scripts.groups {
        let set = mine(shas);
        match out.iter_mut().find(|g| g.1 == set) {
            Some(g) => g.0.extend(releases.iter().cloned()),
            None => out.push((releases.clone(), set)),
        }
    }
    let one = |set: &[String], of: &[&str]| set.iter().find(|s| of.contains(&s.as_str())).cloned();
    out.into_iter()
        .map(|(releases, set)| Group {
            acquire: one(&set, &rl::ACQUIRE).expect("an acquire body"),
            try_set: one(&set, &rl::TRY_SET_RATE).expect("a trySetRate body"),
            set_rate: one(&set, &rl::SET_RATE).expect("a setRate body"),
            release: one(&set, &[rl::RELEASE]),
            set_or_update: one(&set, &[rl::SET_OR_UPDATE]),
            releases,
        })
        .collect()
}

/// The test's own Lua (not Redisson's): the TTLs Redisson 3.38+'s acquire leaves, which the
/// module leaves after every call. KEYS name, value, permits.
pub const TTL_BLOCK: &str = "local k = redis.call('hget', KEYS[1], 'keepAliveTime'); \
    if k ~= false and tonumber(k) > 0 then redis.call('pexpire', KEYS[1], k); \
    redis.call('pexpire', KEYS[2], k); redis.call('pexpire', KEYS[3], k); else \
    local t = redis.call('pttl', KEYS[1]); if t > 0 then redis.call('pexpire', KEYS[2], t); \
    redis.call('pexpire', KEYS[3], t); end; end; return 0";

/// The test's own Lua: the value the module holds, which its window explains (the rate less
/// the live permits, floored at 0, less the expired permits still in the zset, which the bodies
/// add back), written where the value key holds another. Applied to the Lua
/// side before each body that reads the value: the module never reads a value the window does
/// not explain (issue 36), where Redisson's bodies trust it (a rate lowered below the window's
/// grants, or by a setRate for another client). KEYS name, value, permits; ARGV now. Returns 1
/// if it wrote.
pub const EXPLAINED: &str = "local v = redis.call('get', KEYS[2]); if v == false then return 0 end; \
    local rate = tonumber(redis.call('hget', KEYS[1], 'rate')); \
    local thr = tonumber(ARGV[1]) - tonumber(redis.call('hget', KEYS[1], 'interval')); \
    local live, old = 0, 0; \
    local z = redis.call('zrange', KEYS[3], 0, -1, 'withscores'); \
    for i = 1, #z, 2 do local r, p = struct.unpack('Bc0I', z[i]); \
      if tonumber(z[i + 1]) > thr then live = live + p else old = old + p end end; \
    local want = string.format('%d', math.max(rate - live, 0) - old); \
    if v == want then return 0 end; \
    if ARGV[2] == 'keepttl' then redis.call('set', KEYS[2], want, 'KEEPTTL') \
    else redis.call('set', KEYS[2], want) end; return 1";

/// The native side's grants per window (its value key), the test's own model of the module's
/// rule: a grant is `(ms, permits)`; every call on a window drops the grants that left it at
/// that call's interval (never to come back: the module removes them), a release takes permits
/// off the newest live grants, a reset forgets a window. After every grant the live permits
/// must not pass the rate in force.
#[derive(Default)]
pub struct Ledger {
    windows: BTreeMap<String, Vec<(i64, i64)>>,
    pub grants: usize,
}

impl Ledger {
    fn live(&mut self, window: &str, now: i64, interval: i64) -> &mut Vec<(i64, i64)> {
        let w = self.windows.entry(window.to_string()).or_default();
        w.retain(|g| g.0 > now - interval);
        w
    }

    /// A call on `window` at `now` (the module removes what left the window).
    pub fn touch(&mut self, window: &str, now: i64, interval: i64) {
        self.live(window, now, interval);
    }

    /// A grant the module replied nil to: Err when the window then holds more than `rate`.
    pub fn grant(&mut self, window: &str, now: i64, permits: i64, rate: i64, interval: i64) -> Result<(), String> {
        self.grants += 1;
        let w = self.live(window, now, interval);
        w.push((now, permits));
        let held: i64 = w.iter().map(|g| g.1).sum();
        if held > rate {
            return Err(format!("{window}: {held} permits granted in one window of rate {rate}: {w:?}"));
        }
        Ok(())
    }

    /// `RATELIMITER.RELEASE`: `permits` off the newest live grants.
    pub fn release(&mut self, window: &str, now: i64, mut permits: i64, interval: i64) {
        let w = self.live(window, now, interval);
        w.sort();
        while permits > 0 {
            let Some(last) = w.last_mut() else { break };
            let k = permits.min(last.1);
            last.1 -= k;
            permits -= k;
            if last.1 == 0 {
                w.pop();
            }
        }
    }

    /// A `SETRATE` that deleted the window (without `KEEPSTATE`).
    pub fn reset(&mut self, window: &str) {
        self.windows.remove(window);
    }

    /// A `SETRATE` that changed the type: every window went.
    pub fn reset_all(&mut self) {
        self.windows.clear();
    }
}

/// Takes `n` permits off the newest grants of zset `key` (the module's release, applied to the
/// Lua side): a member wholly taken goes, the last one touched keeps the rest.
pub fn take_newest(c: &mut redis::Connection, key: &str, mut n: i64) {
    let mut v: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    while n > 0 {
        let Some((m, score)) = v.pop() else { break };
        let k = m[0] as usize;
        let had = i64::from(u32::from_le_bytes([m[1 + k], m[2 + k], m[3 + k], m[4 + k]]));
        // The new member before the old one goes, so the key (and its TTL) stays.
        if had > n {
            let rest = rl::member(&m[1..1 + k], (had - n) as u32);
            let _: i64 = redis::cmd("ZADD").arg(key).arg(score).arg(rest).query(c).expect("ZADD");
        }
        let _: i64 = redis::cmd("ZREM").arg(key).arg(&m).query(c).expect("ZREM");
        n -= had.min(n);
    }
}

/// The two sides' keyspaces compared: every key's type; hashes and strings exactly; zsets as
/// score -> sum of permits (and every member of the native side's in Redisson's layout with 16
/// random bytes); `PEXPIRETIME` within `tol_ms`. The first difference, if any.
pub fn keyspace_difference(lc: &mut redis::Connection, nc: &mut redis::Connection, tol_ms: i64) -> Option<String> {
    let mut all = BTreeSet::new();
    for c in [&mut *lc, &mut *nc] {
        let k: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
        all.extend(k);
    }
    for k in all {
        let side = |c: &mut redis::Connection| -> (String, String, i64) {
            let kind: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let content = match kind.as_str() {
                "hash" => format!("{:?}", super::hgetall(c, &k)),
                "zset" => {
                    let mut sums: BTreeMap<i64, u64> = BTreeMap::new();
                    for (t, n) in rl::grants(c, &k) {
                        *sums.entry(t).or_default() += u64::from(n);
                    }
                    format!("{sums:?}")
                }
                "none" => String::new(),
                _ => format!("{:?}", super::ok(c, &["GET", &k])),
            };
            (kind, content, super::pexpiretime(c, &k))
        };
        let (l, n) = (side(lc), side(nc));
        let ttl_ok = l.2 == n.2 || (l.2 > 0 && n.2 > 0 && (l.2 - n.2).abs() <= tol_ms);
        if l.0 != n.0 || l.1 != n.1 || !ttl_ok {
            return Some(format!("{k}: lua {l:?} native {n:?}"));
        }
        if n.0 == "zset" {
            let members: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg(&k).arg(0).arg(-1).query(nc).expect("ZRANGE");
            if let Some(m) = members.iter().find(|m| m.len() != 21 || m[0] != 16) {
                return Some(format!("{k}: native member {m:?} is not struct.pack('Bc0I', 16, random, n)"));
            }
        }
    }
    None
}
