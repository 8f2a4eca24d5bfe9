//! Hash, list and zset access through an open [`Key`].

use std::os::raw::{c_int, c_long, c_void};

use redis_module::raw;

use super::args::str_bytes;
use super::args::str_to_i64;
use super::{Key, KeyKind, NotAnInteger, RStr, RawStr, StrRef, OK};

impl Key {
    // -- hash ---------------------------------------------------------------------------------

    /// The value of `field`, if the key is a hash holding it.
    pub fn hash_get(&self, field: StrRef) -> Option<RStr> {
        let mut out: RawStr = std::ptr::null_mut();
        // SAFETY: variadic (field, out-pointer) pairs ended by NULL; the value string is created
        // with our context and freed by the returned `RStr`.
        unsafe {
            api!(RedisModule_HashGet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                &mut out as *mut RawStr,
                std::ptr::null_mut::<c_void>(),
            );
        }
        (!out.is_null()).then_some(RStr { ctx: self.ctx, ptr: out })
    }

    /// The values of four fields in one call (one lookup of the key's value): each `None` where
    /// the hash lacks it.
    pub fn hash_get4(&self, fields: [StrRef; 4]) -> [Option<RStr>; 4] {
        let mut out: [RawStr; 4] = [std::ptr::null_mut(); 4];
        let [a, b, c, d] = &mut out;
        // SAFETY: variadic (field, out-pointer) pairs ended by NULL, four of them; each value
        // string is created with our context and freed by the returned `RStr`.
        unsafe {
            api!(RedisModule_HashGet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                fields[0].ptr,
                a as *mut RawStr,
                fields[1].ptr,
                b as *mut RawStr,
                fields[2].ptr,
                c as *mut RawStr,
                fields[3].ptr,
                d as *mut RawStr,
                std::ptr::null_mut::<c_void>(),
            );
        }
        out.map(|p| (!p.is_null()).then_some(RStr { ctx: self.ctx, ptr: p }))
    }

    /// The integer value of `field`: `Ok(None)` if absent, `Err(NotAnInteger)` otherwise.
    pub fn hash_get_int(&self, field: StrRef) -> Result<Option<i64>, NotAnInteger> {
        match self.hash_get(field) {
            None => Ok(None),
            Some(v) => str_to_i64(v.as_ref()).map(Some).ok_or(NotAnInteger),
        }
    }

    /// Sets `field` to `value` (creating the hash if needed).
    pub fn hash_set(&self, field: StrRef, value: StrRef) {
        self.mark(true);
        // SAFETY: variadic (field, value) pair ended by NULL; Redis copies both.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                value.ptr,
                std::ptr::null_mut::<c_void>(),
            );
        }
    }

    /// Deletes `field`; Redis deletes the key when its last field goes.
    pub fn hash_del(&self, field: StrRef) {
        // SAFETY: REDISMODULE_HASH_DELETE is the documented "delete this field" value marker.
        // Redis returns how many fields it deleted.
        let deleted = unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.ptr,
                raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
                std::ptr::null_mut::<c_void>(),
            )
        };
        self.mark(deleted > 0);
    }

    /// Calls `f(field, value)` for every field of a hash (or member, score-string of a zset).
    pub fn scan(&self, mut f: impl FnMut(&[u8], &[u8])) {
        self.scan_while(|field, value| {
            f(field, value);
            true
        });
    }

    /// [`Key::scan`] until `f` returns false: the scan stops after the step in progress (a
    /// step visits one hash bucket, or every field of a small hash), so the work is bounded
    /// by what `f` wants, not by the size of the hash. `f` may still be called a few times
    /// after it returned false.
    pub fn scan_while(&self, mut f: impl FnMut(&[u8], &[u8]) -> bool) {
        type Visit<'f> = (&'f mut dyn FnMut(&[u8], &[u8]) -> bool, bool);
        extern "C" fn on_element(_key: *mut raw::RedisModuleKey, field: RawStr, value: RawStr, privdata: *mut c_void) {
            // SAFETY: `privdata` is the `Visit` passed below, alive during ScanKey.
            let (f, more) = unsafe { &mut *(privdata as *mut Visit) };
            let v = if value.is_null() { &[][..] } else { str_bytes(value) };
            *more &= f(str_bytes(field), v);
        }
        if self.ptr.is_null() {
            return;
        }
        let mut visit: Visit = (&mut f, true);
        // SAFETY: the cursor is created and destroyed here; the callback only runs inside
        // ScanKey, while `visit` is alive. The key is not modified during the scan.
        unsafe {
            let cursor = api!(RedisModule_ScanCursorCreate)();
            while visit.1
                && api!(RedisModule_ScanKey)(
                    self.ptr,
                    cursor,
                    Some(on_element),
                    &mut visit as *mut Visit as *mut c_void,
                ) != 0
            {}
            api!(RedisModule_ScanCursorDestroy)(cursor);
        }
    }

    // -- list ---------------------------------------------------------------------------------

    pub fn list_push_tail(&self, value: StrRef) {
        // SAFETY: live key handle opened for writing; Redis copies the value.
        let ok = unsafe { api!(RedisModule_ListPush)(self.ptr, raw::REDISMODULE_LIST_TAIL as c_int, value.ptr) };
        self.mark(ok == OK);
    }

    /// Pops the head element; Redis deletes the key when it empties.
    pub fn list_pop_head(&self) -> Option<RStr> {
        // SAFETY: live key handle; the popped string is ours to free.
        let p = unsafe { api!(RedisModule_ListPop)(self.ptr, raw::REDISMODULE_LIST_HEAD as c_int) };
        self.mark(!p.is_null()).then_some(RStr { ctx: self.ctx, ptr: p })
    }

    /// The element at `index` (negative counts from the tail).
    pub fn list_get(&self, index: i64) -> Option<RStr> {
        // SAFETY: live key handle; the returned string is ours to free.
        let p = unsafe { api!(RedisModule_ListGet)(self.ptr, index as c_long) };
        (!p.is_null()).then_some(RStr { ctx: self.ctx, ptr: p })
    }

    pub fn list_delete(&self, index: i64) -> bool {
        // SAFETY: live key handle opened for writing.
        self.mark(unsafe { api!(RedisModule_ListDelete)(self.ptr, index as c_long) == OK })
    }

    // -- zset ---------------------------------------------------------------------------------

    /// Adds or updates `member` with `score`: true if the member is new.
    pub fn zset_add(&self, score: f64, member: StrRef) -> bool {
        let mut flags: c_int = 0;
        // SAFETY: live key handle opened for writing; Redis copies the member.
        let ok = unsafe { api!(RedisModule_ZsetAdd)(self.ptr, score, member.ptr, &mut flags) };
        // As ZADD: a member re-added with its own score changed nothing.
        let changed = (raw::REDISMODULE_ZADD_ADDED | raw::REDISMODULE_ZADD_UPDATED) as c_int;
        self.mark(ok == OK && flags & changed != 0);
        ok == OK && flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0
    }

    pub fn zset_rem(&self, member: StrRef) -> bool {
        let mut deleted: c_int = 0;
        // SAFETY: live key handle opened for writing.
        unsafe { api!(RedisModule_ZsetRem)(self.ptr, member.ptr, &mut deleted) };
        self.mark(deleted != 0)
    }

    pub fn zset_score(&self, member: StrRef) -> Option<f64> {
        let mut score = 0f64;
        // SAFETY: live key handle; `score` is a valid out-pointer.
        let ok = unsafe { api!(RedisModule_ZsetScore)(self.ptr, member.ptr, &mut score) } == OK;
        ok.then_some(score)
    }

    /// Visits the members with `min <= score <= max`, lowest score first (ties by member), or
    /// from the highest when `rev`, while `f(member, score)` returns true: O(log N) to the
    /// first, then one step per member. `f` owns each member's module string.
    fn zset_range(&self, min: f64, max: f64, rev: bool, mut f: impl FnMut(RStr, f64) -> bool) {
        if self.ptr.is_null() || self.kind() != KeyKind::Zset || min > max {
            return;
        }
        // SAFETY: an inclusive score-range iterator, stopped before returning; each element is a
        // new string we own, handed to `f` as an `RStr` (freed on drop). The key is not
        // modified while the iterator is open (`f` only reads what it is given).
        unsafe {
            let first = if rev {
                api!(RedisModule_ZsetLastInScoreRange)(self.ptr, min, max, 0, 0)
            } else {
                api!(RedisModule_ZsetFirstInScoreRange)(self.ptr, min, max, 0, 0)
            };
            if first != OK {
                return;
            }
            while api!(RedisModule_ZsetRangeEndReached)(self.ptr) == 0 {
                let mut score = 0f64;
                let m = api!(RedisModule_ZsetRangeCurrentElement)(self.ptr, &mut score);
                if m.is_null() || !f(RStr { ctx: self.ctx, ptr: m }, score) {
                    break;
                }
                let more = if rev {
                    api!(RedisModule_ZsetRangePrev)(self.ptr)
                } else {
                    api!(RedisModule_ZsetRangeNext)(self.ptr)
                };
                if more == 0 {
                    break;
                }
            }
            api!(RedisModule_ZsetRangeStop)(self.ptr);
        }
    }

    /// Visits the members with `min <= score <= max`, lowest score first (ties by member), while
    /// `f(member, score)` returns true.
    pub fn zset_walk(&self, min: f64, max: f64, mut f: impl FnMut(&[u8], f64) -> bool) {
        self.zset_range(min, max, false, |m, score| f(m.bytes(), score));
    }

    /// [`Key::zset_walk`] from the highest score down (ties by member, last first).
    pub fn zset_walk_rev(&self, min: f64, max: f64, mut f: impl FnMut(&[u8], f64) -> bool) {
        self.zset_range(min, max, true, |m, score| f(m.bytes(), score));
    }

    /// The members with `min <= score <= max` as module strings, lowest score first.
    pub fn zset_members_in(&self, min: f64, max: f64) -> Vec<RStr> {
        let mut out = Vec::new();
        self.zset_range(min, max, false, |m, _| {
            out.push(m);
            true
        });
        out
    }

    /// The `n` lowest members of a zset as module strings, lowest first.
    pub fn zset_first_members(&self, n: usize) -> Vec<RStr> {
        let mut out = Vec::with_capacity(n.min(1024));
        if n > 0 {
            self.zset_range(f64::NEG_INFINITY, f64::INFINITY, false, |m, _| {
                out.push(m);
                out.len() < n
            });
        }
        out
    }

    /// Every (member, score) of a zset, lowest score first.
    pub fn zset_all(&self) -> Vec<(Vec<u8>, f64)> {
        self.zset_entries().into_iter().map(|(m, score)| (m.bytes().to_vec(), score)).collect()
    }

    /// Every (member, score) of a zset as module strings, lowest score first.
    pub fn zset_entries(&self) -> Vec<(RStr, f64)> {
        let mut out = Vec::new();
        self.zset_range(f64::NEG_INFINITY, f64::INFINITY, false, |m, score| {
            out.push((m, score));
            true
        });
        out
    }
}
