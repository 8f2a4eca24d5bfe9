//! Whether the server lets the module write on its own, outside a client's command: from a
//! timer or a BLOCK timeout. Not while writes are paused, nor on a replica, nor while loading;
//! and from a callback made while a script runs, not before the script is done.

use redis_module::raw;

use super::Ctx;

const REPLICA: u64 = raw::REDISMODULE_CTX_FLAGS_SLAVE as u64;
const LOADING: u64 = raw::REDISMODULE_CTX_FLAGS_LOADING as u64;
const SCRIPT: u64 = raw::REDISMODULE_CTX_FLAGS_LUA as u64;

/// True while writes are paused: `CLIENT PAUSE ... WRITE|ALL`, `FAILOVER`, a cluster manual
/// failover. Redis asserts that nothing is propagated then (and 7.0 corrupts its keyspace on a
/// write to a key whose expiry the pause holds back), so module writes must wait.
///
/// `RM_AvoidReplicaTraffic` is the module API's test for exactly this: on 7.0 it is true during
/// any client pause, on 7.2+ and Valkey while the pause holds replica traffic, which every
/// write pause does. It also ends a pause whose time is up, as Redis' own checks do, so a
/// pause that timed out by itself is seen as over at once. Redis has no event for a pause's
/// end (7.0 to 8.x, Valkey 9): callers poll this while paused.
pub fn writes_paused() -> bool {
    // SAFETY: takes no arguments and only reads (or, for a pause whose time is up, ends) the
    // server's pause state; callable from any callback on the main thread.
    unsafe { api!(RedisModule_AvoidReplicaTraffic)() != 0 }
}

impl Ctx {
    /// True on a replica: its keyspace is the primary's to change.
    pub fn is_replica(&self) -> bool {
        self.flags() & REPLICA != 0
    }

    /// True while the server loads its data (a restart, `DEBUG RELOAD`, a full sync).
    pub fn is_loading(&self) -> bool {
        self.flags() & LOADING != 0
    }

    /// True while a script or function runs, whoever's context this is (Redis sets the flag
    /// from its global "a script is running"): a callback Redis makes then, such as a
    /// disconnect it handles while the script is busy, must not change what the script reads.
    pub fn in_script(&self) -> bool {
        self.flags() & SCRIPT != 0
    }
}
