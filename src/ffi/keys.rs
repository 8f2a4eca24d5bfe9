//! Open keys: their type, length, expiry, deletion and string values. Hash, list and zset
//! access is in `keys_collections.rs`.

use redis_module::raw;

use super::{modified, RawCtx, StrRef, OK, READ, WRITE};

/// The type of the value at a key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyKind {
    Empty,
    String,
    List,
    Hash,
    Set,
    Zset,
    Other,
}

/// An open key, closed on drop.
///
/// The module opts out of Redis' implicit "modified" signal on closing a key opened for
/// writing (`modified::opt_out`), which would abort `WATCH`es and send client-side caching
/// invalidations for commands that changed nothing. Instead each write below that changes the
/// key marks the handle, and closing a marked handle signals, as Redis would have.
pub struct Key {
    pub(super) ctx: RawCtx,
    pub(super) ptr: *mut raw::RedisModuleKey,
    /// The database the handle was opened in (write handles only).
    pub(super) db: i32,
    /// A write through this handle changed the key.
    pub(super) changed: std::cell::Cell<bool>,
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            if self.changed.get() {
                modified::signal(self.ctx, self.ptr, self.db);
            }
            // SAFETY: we own the handle and close it exactly once.
            unsafe { api!(RedisModule_CloseKey)(self.ptr) };
        }
    }
}

impl Key {
    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: live key handle.
        let t = unsafe { api!(RedisModule_KeyType)(self.ptr) } as isize;
        match t {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_LIST => KeyKind::List,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_SET => KeyKind::Set,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Elements in a hash, list or zset; bytes in a string; 0 if empty.
    pub fn len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: live key handle.
        unsafe { api!(RedisModule_ValueLength)(self.ptr) }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Absolute expiry in ms, or `None` for a key without one (or an empty key).
    pub fn expire_at(&self) -> Option<i64> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: live key handle.
        let at = unsafe { api!(RedisModule_GetAbsExpire)(self.ptr) };
        (at >= 0).then_some(at)
    }

    /// Marks the key changed (to be signalled on close) if `changed`; returns `changed`.
    pub(super) fn mark(&self, changed: bool) -> bool {
        if changed {
            self.changed.set(true);
        }
        changed
    }

    pub fn set_expire_at(&self, at: i64) -> bool {
        // SAFETY: live key handle opened for writing (Redis checks and returns an error if not).
        self.mark(unsafe { api!(RedisModule_SetAbsExpire)(self.ptr, at) == OK })
    }

    pub fn delete(&self) -> bool {
        let existed = self.kind() != KeyKind::Empty;
        // SAFETY: live key handle.
        let ok = unsafe { api!(RedisModule_DeleteKey)(self.ptr) == OK };
        self.mark(ok && existed);
        ok
    }

    /// `UNLINK`: the key goes now, its memory is freed by a background thread when it is large
    /// (as Redis' own `UNLINK` decides).
    pub fn unlink(&self) -> bool {
        let existed = self.kind() != KeyKind::Empty;
        // SAFETY: live key handle opened for writing.
        let ok = unsafe { api!(RedisModule_UnlinkKey)(self.ptr) == OK };
        self.mark(ok && existed);
        ok
    }

    // -- string -------------------------------------------------------------------------------

    /// The bytes of a string key (empty if the key is empty).
    pub fn string_get(&self) -> Vec<u8> {
        if self.ptr.is_null() || self.kind() != KeyKind::String {
            return Vec::new();
        }
        let mut len = 0usize;
        // SAFETY: read-only DMA access to a string key; copied out before the key is touched.
        unsafe {
            let p = api!(RedisModule_StringDMA)(self.ptr, &mut len, READ);
            if p.is_null() {
                return Vec::new();
            }
            std::slice::from_raw_parts(p as *const u8, len).to_vec()
        }
    }

    /// `f` of the bytes of a string key, read in place (no copy); `None` if the key is not a
    /// string.
    pub fn string_with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.ptr.is_null() || self.kind() != KeyKind::String {
            return None;
        }
        let mut len = 0usize;
        // SAFETY: read-only DMA access to a string key; `f` is done with the bytes before the
        // key is touched again.
        unsafe {
            let p = api!(RedisModule_StringDMA)(self.ptr, &mut len, READ);
            if p.is_null() {
                return None;
            }
            Some(f(std::slice::from_raw_parts(p as *const u8, len)))
        }
    }

    /// Overwrites the value of an existing string key with `value` in place: the key, its
    /// expiry and its object stay, only the bytes change (what `INCRBY` does to a counter).
    /// False, writing nothing, if the key is not a string.
    pub fn string_overwrite(&self, value: &[u8]) -> bool {
        if self.ptr.is_null() || self.kind() != KeyKind::String {
            return false;
        }
        let mut len = 0usize;
        // SAFETY: live key handle opened for writing (Redis checks both calls and fails if not):
        // the string is resized to `value.len()` bytes, then written through the DMA pointer,
        // which is valid for `len` bytes until the key is next touched.
        unsafe {
            if api!(RedisModule_StringTruncate)(self.ptr, value.len()) != OK {
                return false;
            }
            let p = api!(RedisModule_StringDMA)(self.ptr, &mut len, WRITE);
            if p.is_null() || len != value.len() {
                return false;
            }
            std::ptr::copy_nonoverlapping(value.as_ptr(), p as *mut u8, len);
        }
        self.mark(true)
    }

    /// Replaces the value (of any type) with the string `value`, dropping any expiry.
    pub fn string_set(&self, value: StrRef) -> bool {
        // SAFETY: live key handle opened for writing; Redis copies the value.
        self.mark(unsafe { api!(RedisModule_StringSet)(self.ptr, value.ptr) == OK })
    }
}
