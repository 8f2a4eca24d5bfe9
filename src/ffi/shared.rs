//! Module strings that live as long as the module: the few constant hash fields, values,
//! messages and replicated arguments the O(1) paths hand Redis on every call (`1`, `-1`,
//! `mode`, `read`, `PXAT`, a rate limiter's fields, ...). Handing Redis one of these costs a reference count where a
//! fresh string costs an allocation and a free (about 300 instructions a string, next to some
//! 12,000 for a whole `LOCK.ACQUIRE`).
//!
//! Only for what Redis copies or lets go by the end of the call: hash fields and values (the
//! hash stores copies), published messages, replicated arguments (serialised into the
//! replication buffer and the AOF, then released), key names looked up or opened. Never as a
//! string key's value: `RM_StringSet` keeps the object itself, which keys would then share
//! along with its LRU/LFU clock.

use std::os::raw::c_char;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

use super::StrRef;

/// The shared words, in the order of [`SHARED`].
const WORDS: [&[u8]; 12] =
    [b"1", b"-1", b"0", b"mode", b"read", b"write", b"PXAT", b"2", b"rate", b"interval", b"type", b"keepAliveTime"];

#[allow(clippy::declare_interior_mutable_const)]
const NONE: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());
/// Created on first use, then never freed. Only Redis' main thread runs module commands, so
/// the atomics are only there to make the statics safe to declare.
static SHARED: [AtomicPtr<raw::RedisModuleString>; 12] = [NONE; 12];

fn index(b: &[u8]) -> Option<usize> {
    // A match compiles to a length switch and one comparison: cheaper than the string it saves.
    Some(match b {
        b"1" => 0,
        b"-1" => 1,
        b"0" => 2,
        b"mode" => 3,
        b"read" => 4,
        b"write" => 5,
        b"PXAT" => 6,
        b"2" => 7,
        // The rate limiter's hash fields, read by every call of a limiter.
        b"rate" => 8,
        b"interval" => 9,
        b"type" => 10,
        b"keepAliveTime" => 11,
        _ => return None,
    })
}

/// The shared module string with the bytes `b`, if `b` is one of the shared words.
#[inline]
pub fn shared(b: &[u8]) -> Option<StrRef<'static>> {
    let i = index(b)?;
    let mut p = SHARED[i].load(Relaxed);
    if p.is_null() {
        let w = WORDS[i];
        // SAFETY: a NULL context makes a string no context owns (no auto-memory); Redis copies
        // `w`. It is kept for the module's lifetime, so every `StrRef<'static>` to it is valid.
        p = unsafe { api!(RedisModule_CreateString)(std::ptr::null_mut(), w.as_ptr() as *const c_char, w.len()) };
        if p.is_null() {
            return None;
        }
        SHARED[i].store(p, Relaxed);
    }
    Some(StrRef::from_raw(p))
}

/// The shared string of a small integer (a count's step, a first count), if it is one.
#[inline]
pub fn shared_int(n: i64) -> Option<StrRef<'static>> {
    match n {
        -1 => shared(b"-1"),
        0 => shared(b"0"),
        1 => shared(b"1"),
        2 => shared(b"2"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shared_word_has_its_own_slot_in_order() {
        for (i, w) in WORDS.iter().enumerate() {
            assert_eq!(index(w), Some(i), "{}", String::from_utf8_lossy(w));
        }
        assert_eq!(index(b"10"), None);
        assert_eq!(index(b"MODE"), None);
    }
}
