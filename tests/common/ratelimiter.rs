//! Redisson's rate-limiter bodies (`RRateLimiter` and its expiry helpers) as test data, read
//! at run time from `../shared/redisson-ratelimiter-scripts/` beside the repository (or
//! `$LOCKMOD_REDISSON_RATELIMITER_SCRIPTS`): missing, the tests fail; they never skip. Only
//! their SHA1s and what each method sends (from Redisson's sources) are written here.

use std::path::PathBuf;

use super::redisson::Scripts;

/// Bodies in the shared directory: 17 of `RRateLimiter` and its helpers, 3 of `RGcra`.
pub const BODIES: usize = 20;

pub fn dir() -> PathBuf {
    match std::env::var_os("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/redisson-ratelimiter-scripts"),
    }
}

pub fn load() -> Scripts {
    Scripts::load_from(&dir(), BODIES)
}

/// `tryAcquireAsync(cmd, permits)`: KEYS the five, ARGV permits, nowMs, random.
pub const ACQUIRE: [&str; 4] = [
    "885213617b048a7030de9bae0c125407047d6c55", // 3.17.0-3.17.2: no TTLs
    "f65fa99baa7d5568e00f123d0e62332001e4e223", // 3.17.3-3.34.1: recompute rate - ZCARD
    "71bab5abd65f60b576de6705d631e9c801e0039a", // 3.35.0-3.37.0: recompute rate - sum
    "861d9229367b5aa9889ee26c5c31be7baeba2153", // 3.38.0-HEAD: keepAliveTime
];
/// `availablePermitsAsync`: ARGV nowMs.
pub const AVAILABLE: &str = "1378f96e73a4251ef63dadab589a062f8276a044";
/// `trySetRateAsync`: KEYS name; ARGV rate, interval, type [, ttl | keepAlive].
pub const TRY_SET_RATE: [&str; 3] = [
    "48387f4f898d4f1f8e94c9b80e7595bf60377aa8", // 3.17.0-3.36.0
    "1cfc7f9107dceaffbd9f59faf1d3c1fdd9bb6a50", // 3.37.0: + ttl
    "38980404d0f647f699e5bd8082405d06ec0fef92", // 3.38.0-HEAD: + keepAliveTime
];
/// `setRateAsync`: ARGV rate, interval, type [, ttl | keepAlive].
pub const SET_RATE: [&str; 4] = [
    "1db1ef670b93b8aba37c488f766d7d98237be338", // 3.17.0-3.22.0: KEYS name, value, permits
    "3b36b933c336c9878af42ecd69842a6894620765", // 3.22.1-3.36.0
    "8cd39500fc82d5e2690ac00bc3fea8d78aaf4a01", // 3.37.0: + ttl
    "b9a51abe1d8fd1227eae314fe8c68c8134e64e8f", // 3.38.0-HEAD: + keepAliveTime
];
/// `releaseAsync(permits)` (3.52.0+): ARGV permits.
pub const RELEASE: &str = "fbec405e63ce6ca39accbc290ded190da3cad1cf";
/// `setOrUpdateAsync` (4.4.0+): ARGV rate, interval, type, keepAlive, nowMs, keepState, requireExist.
pub const SET_OR_UPDATE: &str = "0844c63db47ac57bbfaab27f78cc104218d081cf";
/// `RedissonExpirable.expireAsync`, `expireAtAsync`, `clearExpireAsync` on the five keys.
pub const EXPIRE: &str = "3fd750e0b43af99dbd223e5523718f18cded3664";
pub const EXPIRE_AT: &str = "71dee1cdc1c23a6aa34dd4a3bbfb2b6dfb3f72cb";
pub const CLEAR_EXPIRE: &str = "3e87b23af056c9bbfa98cb959044b3cb917003b9";

/// Redisson's `suffixName(name, s)`.
pub fn suffix(name: &str, s: &str) -> String {
    if name.contains('{') {
        format!("{name}:{s}")
    } else {
        format!("{{{name}}}:{s}")
    }
}

/// KEYS of every `RRateLimiter` body: name, `{name}:value`, `{name}:value:<id>`,
/// `{name}:permits`, `{name}:permits:<id>`.
pub fn keys(name: &str, client: &str) -> Vec<String> {
    let (v, p) = (suffix(name, "value"), suffix(name, "permits"));
    vec![name.to_string(), v.clone(), format!("{v}:{client}"), p.clone(), format!("{p}:{client}")]
}

/// `EVALSHA sha 5 keys... argv...` as arguments.
pub fn evalsha(sha: &str, keys: &[String], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut a: Vec<Vec<u8>> = vec![b"EVALSHA".to_vec(), sha.as_bytes().to_vec(), keys.len().to_string().into_bytes()];
    a.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    a.extend(argv.iter().cloned());
    a
}

/// Loads every body on the server behind `c`.
pub fn load_on(c: &mut redis::Connection, scripts: &Scripts) {
    for b in &scripts.bodies {
        let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(&b.text).query(c).expect("SCRIPT LOAD");
        assert_eq!(sha, b.sha);
    }
}

/// Runs `args` (bytes), a server error as its line.
pub fn run(c: &mut redis::Connection, args: &[Vec<u8>]) -> Result<redis::Value, String> {
    let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).expect("command name"));
    for a in &args[1..] {
        cmd.arg(a.as_slice());
    }
    cmd.query(c).map_err(super::error_line)
}

/// A grant zset member: `struct.pack('Bc0I', #random, random, permits)`.
pub fn member(random: &[u8], permits: u32) -> Vec<u8> {
    let mut m = vec![random.len() as u8];
    m.extend_from_slice(random);
    m.extend_from_slice(&permits.to_le_bytes());
    m
}

/// (score, permits) of every member, lowest score first.
pub fn grants(c: &mut redis::Connection, key: &str) -> Vec<(i64, u32)> {
    let v: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    v.into_iter()
        .map(|(m, s)| {
            let n = m[0] as usize;
            (s as i64, u32::from_le_bytes([m[1 + n], m[2 + n], m[3 + n], m[4 + n]]))
        })
        .collect()
}

/// (score, permits) per score (the members of one millisecond summed: the module folds them
/// into one member when the next millisecond's call comes), lowest score first.
pub fn grants_per_ms(c: &mut redis::Connection, key: &str) -> Vec<(i64, u32)> {
    let mut out: Vec<(i64, u32)> = Vec::new();
    for (t, p) in grants(c, key) {
        match out.last_mut() {
            Some(last) if last.0 == t => last.1 += p,
            _ => out.push((t, p)),
        }
    }
    out
}

/// `RGcra` (4.7.0+): `trySetRate` (KEYS `{name}:config`), `setRate` and `tryAcquire` (KEYS
/// `{name}:config`, name).
pub const GCRA_TRY_SET: &str = "31e2744ec67810e2a7dd71e4b68f8fd337e35cc0";
pub const GCRA_SET: &str = "704cc2c3dc85448aea11a1e79dedc4148fd79935";
pub const GCRA_ACQUIRE: &str = "6a25e0dd97bfb4d135e9094e13c3a7cb05a4274a";
