//! The module's allocator: Redis' own (so the module's memory shows in `used_memory` and
//! `maxmemory` applies), counting the bytes the module holds for `INFO lockmod`.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

/// Bytes the module has allocated and not freed.
static MEMORY: AtomicI64 = AtomicI64::new(0);

/// Bytes the module has allocated and not freed (`lockmod_memory_bytes`).
pub fn held_bytes() -> i64 {
    MEMORY.load(Relaxed)
}

/// Redis' allocator, counting.
pub struct CountingAlloc;

// SAFETY: delegates every call to `RedisAlloc` unchanged; the counter has no effect on memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // A load and a store, not a locked add: allocation happens on Redis' main thread.
        MEMORY.store(MEMORY.load(Relaxed).wrapping_add(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { redis_module::alloc::RedisAlloc.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        MEMORY.store(MEMORY.load(Relaxed).wrapping_sub(layout.size() as i64), Relaxed);
        // SAFETY: same contract as ours.
        unsafe { redis_module::alloc::RedisAlloc.dealloc(ptr, layout) }
    }
}
