//! Read holds of the read-write lock on [`RedisStore`]: their timeout keys' writes, mirrored in
//! the lock's entry of the read-hold index (`crate::watch::hold_index`), and the largest remaining
//! lease read from that entry (built by one scan the first time it is needed).

use std::ffi::CStr;

use super::RedisStore;
use crate::core::lock::hold_expiries::{HoldExpiries, HoldState};
use crate::core::names;
use crate::core::store::{Store, TTL_MISSING, TTL_PERSISTENT};
use crate::core::{parse_i64, Result};
use crate::ffi::{Arg, KeyKind, StrRef};
use crate::watch::hold_index;

impl RedisStore<'_> {
    /// [`Self::effect`] for a write to `key` (named `name`), whose read-hold index entry (if
    /// `reflected`) already shows the write: its report must not drop the entry.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn effect_on(
        &self,
        reflected: bool,
        key: &[u8],
        name: StrRef,
        class: u32,
        event: &CStr,
        cmd: &CStr,
        args: &[Arg],
    ) {
        if reflected {
            hold_index::accounted(self.db(), key, || self.effect(class, event, name, cmd, args));
        } else {
            self.effect(class, event, name, cmd, args);
        }
    }

    /// A key's expiry as `PTTL` sees it: an absolute time, or [`TTL_MISSING`] /
    /// [`TTL_PERSISTENT`]. Keys already open are read through their handle; others (the
    /// timeout keys of read holds, scanned by the thousand) are opened and closed at once.
    pub(super) fn expiry_state(&self, key: &[u8]) -> HoldState {
        let at = match self.is_open(key) {
            Some(k) => (k.key.kind() != KeyKind::Empty).then(|| k.key.expire_at()),
            None => {
                let name = self.name(key);
                let k = self.ctx.open_key(name.raw(), false);
                (k.kind() != KeyKind::Empty).then(|| k.expire_at())
            }
        };
        match at {
            None => TTL_MISSING,
            Some(None) => TTL_PERSISTENT,
            Some(Some(at)) => at,
        }
    }

    /// Reflects `field`'s new value (None: gone) in `key`'s read-hold index entry, if it has
    /// one; true if it does.
    pub(super) fn index_field(&self, key: &[u8], field: &[u8], value: Option<i64>) -> bool {
        let db = self.db();
        let Some(old) = hold_index::count(db, key, field) else { return false };
        let new = value.unwrap_or(0);
        let fresh: Vec<HoldState> = (old + 1..=new.min(crate::core::lock::rwlock::MAX_HOLDS_PER_FIELD))
            .map(|i| self.hold_key_state(key, field, i))
            .collect();
        hold_index::update(db, key, |h| {
            h.set_count(field, new, |i| fresh.get((i - old - 1) as usize).copied().unwrap_or(TTL_MISSING))
        })
    }

    fn hold_key_state(&self, key: &[u8], owner: &[u8], i: i64) -> HoldState {
        self.expiry_state(&names::read_timeout(key, owner, i))
    }

    pub(super) fn read_hold_set_(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        let t = names::read_timeout(key, owner, i);
        let db = self.db();
        if hold_index::update(db, key, |h| h.set_hold(owner, i, at)) {
            hold_index::accounted(db, key, || self.set_px_at(&t, b"1", at));
        } else {
            self.set_px_at(&t, b"1", at);
        }
    }

    pub(super) fn read_hold_del_(&mut self, key: &[u8], owner: &[u8], i: i64) {
        let t = names::read_timeout(key, owner, i);
        let db = self.db();
        if hold_index::update(db, key, |h| h.set_hold(owner, i, TTL_MISSING)) {
            hold_index::accounted(db, key, || self.del(&t));
        } else {
            self.del(&t);
        }
    }

    pub(super) fn read_hold_expire_(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        let t = names::read_timeout(key, owner, i);
        let db = self.db();
        if !hold_index::is_indexed(db, key) {
            return self.pexpire_at(&t, at);
        }
        hold_index::accounted(db, key, || self.pexpire_at(&t, at));
        // Whether the key took the expiry (it may have just expired) is the keyspace's to say.
        let state = self.expiry_state(&t);
        hold_index::update(db, key, |h| h.set_hold(owner, i, state));
    }

    /// From the lock's index entry, built by one scan the first time it is needed.
    pub(super) fn read_holds_max_pttl_(&mut self, key: &[u8]) -> Result<i64> {
        let db = self.db();
        if let Some(ttl) = hold_index::max_pttl(db, key, self.now) {
            return Ok(ttl);
        }
        let mut holds = HoldExpiries::default();
        for (field, value) in self.hash_entries(key)? {
            if let Some(count) = parse_i64(&value) {
                holds.set_count(&field, count, |i| self.hold_key_state(key, &field, i));
            }
        }
        let ttl = holds.max_pttl(self.now);
        // An evicted or expired hash makes the entry stale: without those events, no entry.
        if crate::ffi::events::watch_keyspace(&self.ctx) {
            hold_index::insert(db, key, holds, self.now);
        }
        Ok(ttl)
    }
}
