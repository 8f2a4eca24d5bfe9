//! Redisson's rate-limiter bodies as part 10 sends them (its current release's, read at run
//! time from `../shared/redisson-ratelimiter-scripts/`, never copied into the repository): their
//! SHA1s, their KEYS, a grant's random bytes, and the tryAcquire call. Shared by part 10's files.

use crate::names::suffix;
use crate::redisson_sync::evalsha;
use crate::server::{Res, Server};
use crate::stats::now_ms;

// Redisson's current bodies (`index.tsv`: 3.38.0 / 3.52.0 to HEAD).
pub const TRY_ACQUIRE: &str = "861d9229367b5aa9889ee26c5c31be7baeba2153";
pub const AVAILABLE: &str = "1378f96e73a4251ef63dadab589a062f8276a044";
pub const RELEASE: &str = "fbec405e63ce6ca39accbc290ded190da3cad1cf";
/// `trySetRate(type, rate, interval, keepAliveTime)`, 3.38.0 to HEAD: only to set a limiter up.
pub const TRY_SET: &str = "38980404d0f647f699e5bd8082405d06ec0fef92";

/// Redisson's rate-limiter bodies: `$LOCKMOD_REDISSON_RATELIMITER_SCRIPTS`, or `shared/` beside
/// the repository (as the tests find them).
pub fn body(sha: &str) -> Res<String> {
    let dir =
        std::env::var("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS").map(std::path::PathBuf::from).unwrap_or_else(|_| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/redisson-ratelimiter-scripts")
        });
    let path = dir.join("scripts").join(format!("{sha}.lua"));
    std::fs::read_to_string(&path).map_err(|e| format!("Redisson's rate-limiter scripts: {}: {e}", path.display()))
}

/// Loads Redisson's bodies on `s` and checks each SHA1 is Redisson's.
pub fn load(s: &Server) -> Res<()> {
    let mut c = s.conn()?;
    for sha in [TRY_ACQUIRE, AVAILABLE, RELEASE, TRY_SET] {
        let got: String = redis::cmd("SCRIPT").arg("LOAD").arg(body(sha)?).query(&mut c).map_err(|e| e.to_string())?;
        if got != sha {
            return Err(format!("Redisson body {sha} loaded as {got}"));
        }
    }
    Ok(())
}

/// The five KEYS of every `RRateLimiter` body; the per-client ones name a Java client id.
pub fn keys(k: &str) -> Vec<String> {
    vec![
        k.to_string(),
        suffix(k, "value"),
        suffix(k, "value:java-client"),
        suffix(k, "permits"),
        suffix(k, "permits:java-client"),
    ]
}

/// 16 fresh bytes for a grant's member, as Redisson's `generateIdArray` (ASCII here, so they
/// travel as a string: the member has the same size).
pub fn random() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    let mut x = STATE.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) ^ (now_ms() as u64);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    format!("{x:016x}")
}

/// Redisson's tryAcquire body: `permits` at `now` (ms).
pub fn lua_acquire(k: &str, permits: &str, now: i64) -> Vec<String> {
    evalsha(TRY_ACQUIRE, &keys(k), &[permits, &now.to_string(), &random()])
}
