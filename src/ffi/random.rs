//! Random bytes from the server's own generator (`RedisModule_GetRandomBytes`: SHA1 in counter
//! mode, seeded from `/dev/urandom` at startup), for the expirable semaphore's permit ids. No
//! crate is added for it, and no clock or counter makes an id guessable from another.

use redis_module::raw;

/// `N` random bytes.
pub fn bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    // SAFETY: `out` is a live buffer of exactly `N` writable bytes for the call; Redis only
    // writes `len` bytes into it.
    unsafe { api!(RedisModule_GetRandomBytes)(out.as_mut_ptr(), out.len()) };
    out
}
