//! What the parts on Redisson's synchronizers (part 9a-9d) share: the SHA1s of Redisson's
//! current bodies, their names for keys and channels, and loading a body from
//! `../shared/redisson-sync-scripts/` (never copied into the repository).

use redis::Value;

use crate::names::{prefix, suffix};
use crate::server::Res;
use crate::Bench;

// Redisson's current bodies (`index.tsv`: sent by 4.7.0 and HEAD; docs/redisson-sync-scripts.md).
pub const TRY_ACQUIRE: &str = "c7dc9d189c1715465a31a06ddbc008585e0c20be";
pub const RELEASE: &str = "ae27582488dd01f4e238cc0733a12146d410eb44";
pub const DRAIN: &str = "c87766d572855e9461c4ecd453db5d1cbab6119e";
pub const TRY_SET: &str = "241ce4e87e652b4f9b39d33cbcd7df9ee8ed906c";
pub const TRY_SET_TTL: &str = "38bf99884eb94708a40a9aabacb15b4c5f16e804";
pub const ADD: &str = "98238d408c6755085344670d3a2ddaa55cf177a9";
pub const LATCH_SET: &str = "2a52d54a6f35bc8af5e84a2930b2ca1aa2a15892";
pub const LATCH_DOWN: &str = "38060fab26b0e7c5982a5cfd7ad542e44d3da19b";
pub const P_ACQUIRE: &str = "992c96b09a3d8ea0b37f5dc12e5347a44d93909d";
pub const P_AVAILABLE: &str = "26b3972b2c9e617556282f404cb79709d746a713";
pub const P_RELEASE: &str = "4ce079451bee2993ce00c8a4e205b536c6ccad67";
pub const P_UPDATE: &str = "2298b02cc67a89f2a638e47503db3675c73d77f5";
pub const P_ACQUIRED: &str = "6f0b0be79a0c146c778cb14f40c10eb5b706e574";
pub const P_SET: &str = "494d8561fee0cdb033f6c28d74c052c52189a578";

/// Redisson's `nonExpirableTimeout`, the score of a permit without a lease.
pub const NL: &str = "922337203685477";
/// A permit id as Redisson stores it: 16 bytes (ASCII here, so it travels as a string); the
/// native commands take the same bytes as hex.
pub const ID: &str = "permit-000000001";

/// The semaphores' channel, `redisson_sc:{name}`.
pub fn sem_channel(name: &str) -> String {
    prefix("redisson_sc", name)
}

/// The expirable semaphore's zset, `{name}:timeout`.
pub fn timeouts(name: &str) -> String {
    suffix(name, "timeout")
}

/// The latch's channel (always braced).
pub fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

pub fn hex(raw: &str) -> String {
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Redisson's synchronizer bodies: `$LOCKMOD_REDISSON_SYNC_SCRIPTS`, or `shared/` beside the repository.
pub fn body(sha: &str) -> Res<String> {
    let dir = std::env::var("LOCKMOD_REDISSON_SYNC_SCRIPTS").map(std::path::PathBuf::from).unwrap_or_else(|_| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/redisson-sync-scripts")
    });
    let path = dir.join("scripts").join(format!("{sha}.lua"));
    std::fs::read_to_string(&path).map_err(|e| format!("Redisson's synchronizer scripts: {}: {e}", path.display()))
}

/// Loads a body on the server without the module and checks its SHA1 is Redisson's.
pub fn load(b: &Bench, sha: &str) -> Res<()> {
    let mut c = b.p.conn()?;
    let got: String = redis::cmd("SCRIPT").arg("LOAD").arg(body(sha)?).query(&mut c).map_err(|e| e.to_string())?;
    if got != sha {
        return Err(format!("Redisson body {sha} loaded as {got}"));
    }
    Ok(())
}

pub fn evalsha(sha: &str, keys: &[String], argv: &[&str]) -> Vec<String> {
    let mut e = vec!["EVALSHA".to_string(), sha.to_string(), keys.len().to_string()];
    e.extend(keys.iter().cloned());
    e.extend(argv.iter().map(|s| s.to_string()));
    e
}

/// What a reply must be.
pub type Check = fn(&Value) -> bool;

pub fn bulk(v: &Value, want: &str) -> bool {
    matches!(v, Value::BulkString(b) if b == want.as_bytes())
}
