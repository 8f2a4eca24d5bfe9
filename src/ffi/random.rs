//! Random bytes for the expirable semaphore's permit ids. No crate is added for it.
//!
//! `RedisModule_GetRandomBytes` (the server's SHA-256 generator, seeded from `/dev/urandom`)
//! costs some 19,000 instructions for 16 bytes: a third of a whole `PSEMAPHORE.ACQUIRE`.
//! Redisson itself takes ids from a plain Java random. Here ids come from a keyed hash in
//! counter mode: 32 bytes of `RedisModule_GetRandomBytes`, read once, and a per-process random
//! hasher key (std's `RandomState`, keyed from the OS), hash a counter. Without both secrets an
//! id says nothing of another (no clock, no visible counter), at ~1% of the cost.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use redis_module::raw;

/// `N` bytes from the server's own generator.
pub fn server_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    // SAFETY: `out` is a live buffer of exactly `N` writable bytes for the call; Redis only
    // writes `len` bytes into it.
    unsafe { api!(RedisModule_GetRandomBytes)(out.as_mut_ptr(), out.len()) };
    out
}

/// The secrets, made on first use.
static KEY: OnceLock<(RandomState, [u8; 32])> = OnceLock::new();
/// Blocks drawn so far (every draw is a fresh counter value).
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `N` unpredictable bytes (see the module's description).
pub fn bytes<const N: usize>() -> [u8; N] {
    let (state, seed) = KEY.get_or_init(|| (RandomState::new(), server_bytes::<32>()));
    let mut out = [0u8; N];
    for chunk in out.chunks_mut(8) {
        let mut h = state.build_hasher();
        h.write(seed);
        h.write_u64(COUNTER.fetch_add(1, Relaxed));
        chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
    }
    out
}

/// `N` bytes unique in this process and unlikely to repeat across processes, for what needs
/// only to differ (a rate limiter grant's member, where Redisson itself draws a plain Java
/// random): a counter hashed with a per-process random key (`foldhash`), about a tenth of
/// [`bytes`]'s cost.
pub fn unique<const N: usize>() -> [u8; N] {
    static STATE: OnceLock<foldhash::fast::FixedState> = OnceLock::new();
    let state = STATE.get_or_init(|| {
        let [a, b, c, d, e, f, g, h] = server_bytes::<8>();
        foldhash::fast::FixedState::with_seed(u64::from_le_bytes([a, b, c, d, e, f, g, h]))
    });
    let mut out = [0u8; N];
    for chunk in out.chunks_mut(8) {
        let n = COUNTER.fetch_add(1, Relaxed);
        let word = state.hash_one(n) ^ n.rotate_left(32);
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_differ() {
        // Not the server's generator (no server here): only the hashing is exercised, with a
        // seed of zeros.
        let _ = super::KEY.set((std::collections::hash_map::RandomState::new(), [0; 32]));
        let ids: std::collections::HashSet<[u8; 16]> = (0..1000).map(|_| super::bytes::<16>()).collect();
        assert_eq!(ids.len(), 1000);
        let odd: [u8; 5] = super::bytes();
        assert_ne!(odd, [0; 5]);
    }
}
