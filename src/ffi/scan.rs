//! A walk of a database's key names in steps (`RM_Scan`), for work that must look at the whole
//! keyspace without stalling the server: each step visits a bounded number of keys, and the
//! cursor carries on from there in the next step (with `SCAN`'s guarantee: a key present for the
//! whole walk is visited at least once).

use std::os::raw::c_void;

use redis_module::raw;

use super::args::str_bytes;
use super::{Ctx, RawStr};

/// A walk in progress of one database (the one selected when each step runs).
pub struct KeyScan {
    cursor: *mut raw::RedisModuleScanCursor,
}

impl KeyScan {
    /// A walk from the start.
    pub fn new() -> KeyScan {
        // SAFETY: no arguments; the cursor is destroyed in `Drop`.
        KeyScan { cursor: unsafe { api!(RedisModule_ScanCursorCreate)() } }
    }

    /// Visits at least `budget` key names of the selected database (a step visits whole hash
    /// buckets, so a few more), calling `f` with each; false once the walk is done.
    pub fn step(&mut self, ctx: &Ctx, budget: usize, mut f: impl FnMut(&[u8])) -> bool {
        type Visit<'f> = (&'f mut dyn FnMut(&[u8]), usize);
        extern "C" fn on_key(
            _ctx: *mut raw::RedisModuleCtx,
            name: RawStr,
            _key: *mut raw::RedisModuleKey,
            data: *mut c_void,
        ) {
            // SAFETY: `data` is the `Visit` passed below, alive during RM_Scan.
            let (f, seen) = unsafe { &mut *(data as *mut Visit) };
            *seen += 1;
            if !name.is_null() {
                f(str_bytes(name));
            }
        }
        if self.cursor.is_null() {
            return false;
        }
        let mut visit: Visit = (&mut f, 0);
        loop {
            // SAFETY: a live context and cursor; the callback runs only inside RM_Scan, while
            // `visit` is alive, and changes no key.
            let more = unsafe {
                api!(RedisModule_Scan)(ctx.0, self.cursor, Some(on_key), &mut visit as *mut Visit as *mut c_void)
            } != 0;
            if !more {
                return false;
            }
            if visit.1 >= budget {
                return true;
            }
        }
    }
}

/// A walk of every database's key names in steps, one database after another (empty ones
/// skipped), for the walks that must see the whole keyspace (the expirable permits' leases, the
/// fencing counters).
pub struct KeysWalk {
    db: i32,
    scan: KeyScan,
}

impl KeysWalk {
    /// A walk from database 0.
    pub fn new() -> KeysWalk {
        KeysWalk { db: 0, scan: KeyScan::new() }
    }

    /// One step: selects the next database that holds keys and visits at least `budget` of its
    /// key names with `f`. The database visited (it stays selected), or `None` once the walk
    /// is past the last database.
    pub fn step(&mut self, ctx: &Ctx, budget: usize, f: impl FnMut(&[u8])) -> Option<i32> {
        loop {
            if !ctx.select_db(self.db) {
                return None;
            }
            if ctx.db_size() > 0 {
                break;
            }
            self.next_db();
        }
        let db = self.db;
        if !self.scan.step(ctx, budget, f) {
            self.next_db();
        }
        Some(db)
    }

    fn next_db(&mut self) {
        (self.db, self.scan) = (self.db + 1, KeyScan::new());
    }
}

impl Default for KeysWalk {
    fn default() -> Self {
        KeysWalk::new()
    }
}

impl Default for KeyScan {
    fn default() -> Self {
        KeyScan::new()
    }
}

impl Drop for KeyScan {
    fn drop(&mut self) {
        if !self.cursor.is_null() {
            // SAFETY: created in `new`, destroyed once.
            unsafe { api!(RedisModule_ScanCursorDestroy)(self.cursor) };
        }
    }
}
