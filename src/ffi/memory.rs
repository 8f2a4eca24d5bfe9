//! Whether the server is over its `maxmemory`, as Redis itself decides it for `deny-oom`.

use redis_module::raw;

use super::Ctx;

const OOM: u64 = raw::REDISMODULE_CTX_FLAGS_OOM as u64;

impl Ctx {
    /// True when used memory (less replication and AOF buffers) exceeds `maxmemory`: the
    /// state in which Redis refuses `deny-oom` commands. Redis computes it on each call, so
    /// only rare paths ask (Redis 7.0+: `REDISMODULE_CTX_FLAGS_OOM`).
    pub fn over_maxmemory(&self) -> bool {
        self.flags() & OOM != 0
    }
}
