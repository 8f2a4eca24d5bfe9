//! [`Store`] on [`RedisStore`]: each operation of the lock algorithms as the key API calls,
//! keyspace events and replicated commands of the Redis command it stands for. Lists, sorted
//! sets and read holds are in `collections.rs` and `read_holds.rs`.

use super::keys::Name;
use super::{pxat, RedisStore, GENERIC, HASH, STRING};
use crate::core::access::Need;
use crate::core::store::{Store, TTL_MISSING, TTL_PERSISTENT};
use crate::core::{parse_i64, LockError, Result};
use crate::ffi::{Arg, KeyKind};
use crate::watch::hold_index;

impl Store for RedisStore<'_> {
    fn now(&self) -> i64 {
        self.now
    }

    fn wall_ns(&self) -> i64 {
        crate::ffi::Ctx::wall_ns()
    }

    fn restricted(&mut self) -> bool {
        self.access.restricted(&self.ctx)
    }

    fn permit(&mut self, needs: &[Need]) -> Result<()> {
        self.access.permit(&self.ctx, needs)
    }

    fn cluster_slot(&mut self) -> Option<u16> {
        // Every command of the module declares its key first (key spec first=1).
        if !self.access.own_command() || self.args.len() < 2 || !self.ctx.in_cluster() {
            return None;
        }
        Some(crate::core::slots::key_slot(self.args.bytes(1)))
    }

    fn exists(&mut self, key: &[u8]) -> bool {
        self.open(key).key.kind() != KeyKind::Empty
    }

    fn peek_exists(&mut self, key: &[u8]) -> bool {
        if let Some(k) = self.is_open(key) {
            return k.key.kind() != KeyKind::Empty;
        }
        let name = self.name(key);
        self.ctx.key_exists(name.raw())
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        match self.expiry_state(key) {
            at if at == TTL_MISSING || at == TTL_PERSISTENT => at,
            at => (at - self.now).max(0),
        }
    }

    fn del(&mut self, key: &[u8]) -> bool {
        self.remove(key, false)
    }

    fn pexpire_at(&mut self, key: &[u8], at: i64) {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty || !k.key.set_expire_at(at) {
            return;
        }
        // A new lock is remembered with its lease when granted; an existing one moves it.
        if k.existed {
            crate::effects::stats::lease_moved(self.db, key, at);
        }
        // The lock's own TTL is not part of its read-hold index entry: the entry stands.
        let indexed = hold_index::is_indexed(self.db(), key);
        let name = k.name.raw();
        self.effect_on(indexed, key, name, GENERIC, c"expire", c"PEXPIREAT", &[Arg::S(name), Arg::I(at)]);
    }

    fn hash_get(&mut self, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>> {
        let f = self.name(field);
        Ok(self.typed(key, KeyKind::Hash)?.and_then(|k| k.key.hash_get(f.raw())).map(|v| v.bytes().to_vec()))
    }

    fn hash_get_int(&mut self, key: &[u8], field: &[u8]) -> Result<Option<i64>> {
        // Parsed in place: the hot path of every acquire and unlock.
        let f = self.name(field);
        let i = self.slot(key);
        let value = match self.typed(key, KeyKind::Hash)? {
            None => None,
            Some(k) => k.key.hash_get_int(f.raw()).map_err(|_| LockError::CorruptHoldCount)?,
        };
        // An acquire or unlock reads the count, then increments it: remembered, not read twice.
        self.last_int = f.arg_index().map(|a| (i, a, value));
        Ok(value)
    }

    fn hash_len(&mut self, key: &[u8]) -> Result<usize> {
        Ok(self.typed(key, KeyKind::Hash)?.map_or(0, |k| k.key.len()))
    }

    fn hash_entries(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if let Some(k) = self.typed(key, KeyKind::Hash)? {
            k.key.scan(|f, v| out.push((f.to_vec(), v.to_vec())));
        }
        Ok(out)
    }

    fn hash_entries_first(&mut self, key: &[u8], n: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if let Some(k) = self.typed(key, KeyKind::Hash)? {
            k.key.scan_while(|f, v| {
                if out.len() < n {
                    out.push((f.to_vec(), v.to_vec()));
                }
                out.len() < n
            });
        }
        Ok(out)
    }

    fn hash_incr(&mut self, key: &[u8], field: &[u8], by: i64) -> Result<i64> {
        let f = self.name(field);
        let i = self.slot(key);
        let k = &self.keys[i];
        let current = self.current_int(i, &f);
        // Checked before the write: a count at the edge of the range is HINCRBY's error.
        let next = crate::core::incremented(current.unwrap_or(0), by)?;
        let v = self.int_name(next);
        k.key.hash_set(f.raw(), v.raw());
        self.last_int = f.arg_index().map(|a| (i, a, Some(next)));
        let indexed = self.index_field(key, field, Some(next));
        let step = self.int_name(by);
        let args = [Arg::S(k.name.raw()), Arg::S(f.raw()), Arg::S(step.raw())];
        self.effect_on(indexed, key, k.name.raw(), HASH, c"hincrby", c"HINCRBY", &args);
        Ok(next)
    }

    fn hash_incr_then_del(&mut self, key: &[u8], field: &[u8], by: i64) -> Result<()> {
        // The key goes at once, so the field is not written; the effects are still those of
        // `HINCRBY` then `DEL`, as Redisson's script makes them.
        let f = self.name(field);
        let i = self.slot(key);
        let k = &self.keys[i];
        let current = self.current_int(i, &f);
        // HINCRBY's error, as `hash_incr`, before anything is written.
        crate::core::incremented(current.unwrap_or(0), by)?;
        self.last_int = None;
        hold_index::forget(self.db, key);
        let step = self.int_name(by);
        self.effect(
            HASH,
            c"hincrby",
            k.name.raw(),
            c"HINCRBY",
            &[Arg::S(k.name.raw()), Arg::S(f.raw()), Arg::S(step.raw())],
        );
        k.key.delete();
        crate::effects::stats::on_key_event(b"del", self.db, key);
        self.effect(GENERIC, c"del", k.name.raw(), c"DEL", &[Arg::S(k.name.raw())]);
        Ok(())
    }

    fn hash_set(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        let f = self.name(field);
        let v = self.name(value);
        let i = self.slot(key);
        let k = &self.keys[i];
        k.key.hash_set(f.raw(), v.raw());
        self.last_int = None;
        let indexed = self.index_field(key, field, parse_i64(value));
        let args = [Arg::S(k.name.raw()), Arg::S(f.raw()), Arg::S(v.raw())];
        self.effect_on(indexed, key, k.name.raw(), HASH, c"hset", c"HSET", &args);
    }

    fn hash_set_many(&mut self, key: &[u8], pairs: &[(&[u8], &[u8])]) {
        let names: Vec<(Name, Name)> = pairs.iter().map(|(f, v)| (self.name(f), self.name(v))).collect();
        let i = self.slot(key);
        let k = &self.keys[i];
        let mut args = Vec::with_capacity(1 + 2 * pairs.len());
        args.push(Arg::S(k.name.raw()));
        let mut indexed = false;
        for ((f, v), (field, value)) in names.iter().zip(pairs) {
            k.key.hash_set(f.raw(), v.raw());
            indexed |= self.index_field(key, field, parse_i64(value));
            args.extend([Arg::S(f.raw()), Arg::S(v.raw())]);
        }
        self.last_int = None;
        self.effect_on(indexed, key, k.name.raw(), HASH, c"hset", c"HSET", &args);
    }

    fn hash_del(&mut self, key: &[u8], field: &[u8]) {
        let f = self.name(field);
        let i = self.slot(key);
        let k = &self.keys[i];
        k.key.hash_del(f.raw());
        self.last_int = None;
        let emptied = k.key.kind() == KeyKind::Empty;
        let indexed = if emptied {
            hold_index::forget(self.db(), key);
            false
        } else {
            self.index_field(key, field, None)
        };
        let args = [Arg::S(k.name.raw()), Arg::S(f.raw())];
        self.effect_on(indexed, key, k.name.raw(), HASH, c"hdel", c"HDEL", &args);
        if emptied {
            self.notify_del(k.name.raw());
        }
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.typed(key, KeyKind::String)?.map(|k| k.key.string_get()))
    }

    fn set_px_at(&mut self, key: &[u8], value: &[u8], at: i64) {
        // The key keeps the value's object itself: never a shared one (see `ffi::shared`).
        let v = match self.name(value) {
            Name::Shared(_) => Name::Own(self.ctx.string(value)),
            v => v,
        };
        let i = self.slot(key);
        let k = &self.keys[i];
        k.key.string_set(v.raw());
        k.key.set_expire_at(at);
        self.notify(STRING, c"set", k.name.raw());
        self.effect(
            GENERIC,
            c"expire",
            k.name.raw(),
            c"SET",
            &[Arg::S(k.name.raw()), Arg::S(v.raw()), pxat(), Arg::I(at)],
        );
    }

    fn incr(&mut self, key: &[u8]) -> Result<i64> {
        let i = self.slot(key);
        let k = &self.keys[i];
        let current = if k.key.kind() == KeyKind::String { crate::core::parse_i64(&k.key.string_get()) } else { None };
        // A token at i64::MAX must not be handed out twice: INCR's error, nothing written.
        let next = crate::core::incremented(current.unwrap_or(0), 1)?;
        let mut buf = crate::ffi::IntBuf::default();
        let v = self.ctx.string(buf.format(next));
        // SET drops an expiry, INCR keeps it: the counter never has one, so they agree.
        k.key.string_set(v.as_ref());
        self.effect(STRING, c"incrby", k.name.raw(), c"INCR", &[Arg::S(k.name.raw())]);
        Ok(next)
    }

    fn token_floor(&mut self, v: Option<i64>) -> i64 {
        // Every fenced grant asks for the floor first: the era goes to the node's file before
        // its first grant (one load once it is there).
        let floor = crate::core::lock::era::floor_for(v);
        super::era::file::open(&self.ctx);
        floor
    }

    fn raise_token(&mut self, key: &[u8], floor: i64) {
        self.raise_token_(key, floor)
    }

    fn list_len(&mut self, key: &[u8]) -> Result<usize> {
        self.list_len_(key)
    }

    fn list_index(&mut self, key: &[u8], i: i64) -> Result<Option<Vec<u8>>> {
        self.list_index_(key, i)
    }

    fn list_all(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.list_all_(key)
    }

    fn list_first(&mut self, key: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
        self.list_first_(key, n)
    }

    fn list_pop_head(&mut self, key: &[u8]) {
        self.list_pop_head_(key)
    }

    fn list_push_tail(&mut self, key: &[u8], value: &[u8]) {
        self.list_push_tail_(key, value)
    }

    fn list_remove(&mut self, key: &[u8], value: &[u8]) -> usize {
        self.list_remove_(key, value)
    }

    fn list_remove_many(&mut self, key: &[u8], values: &[&[u8]]) -> usize {
        self.list_remove_many_(key, values)
    }

    fn zset_len(&mut self, key: &[u8]) -> Result<usize> {
        self.zset_len_(key)
    }

    fn zset_score(&mut self, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
        self.zset_score_(key, member)
    }

    fn zset_add(&mut self, key: &[u8], member: &[u8], score: f64) -> bool {
        self.zset_add_(key, member, score)
    }

    fn zset_rem(&mut self, key: &[u8], member: &[u8]) -> bool {
        self.zset_rem_(key, member)
    }

    fn zset_rem_many(&mut self, key: &[u8], members: &[&[u8]]) -> usize {
        self.zset_rem_many_(key, members)
    }

    fn zset_incr(&mut self, key: &[u8], member: &[u8], by: f64) -> f64 {
        self.zset_incr_(key, member, by)
    }

    fn zset_shift_all(&mut self, key: &[u8], by: f64) {
        self.zset_shift_all_(key, by)
    }

    fn zset_incr_many(&mut self, key: &[u8], by: &[(Vec<u8>, f64)]) {
        self.zset_incr_many_(key, by)
    }

    fn zset_all(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, f64)>> {
        Ok(self.typed(key, KeyKind::Zset)?.map_or_else(Vec::new, |k| k.key.zset_all()))
    }

    fn publish(&mut self, channel: &[u8], message: &[u8]) {
        let cluster = self.ctx.in_cluster();
        // Made once, for the message and for its replication.
        let (c, m) = (self.ctx.string(channel), self.name(message));
        let (c, m) = (c.as_ref(), m.raw());
        let args = [Arg::S(c), Arg::S(m)];
        // `lockmod.pubsub sharded`: as SPUBLISH, which Redis itself propagates to replicas only
        // outside a cluster (in one, the cluster bus carries it to the shard's replicas).
        if crate::core::config::sharded() && self.ctx.publish_shard(c, m) {
            if !cluster {
                self.ctx.replicate_reusing(self.args, c"SPUBLISH", &args);
            }
            return;
        }
        self.ctx.publish(c, m);
        // A replica's subscribers hear it as they would Redisson's PUBLISH. In a cluster the
        // message already travels over the cluster bus, so propagating it would repeat it.
        if !cluster {
            self.ctx.replicate_reusing(self.args, c"PUBLISH", &args);
        }
    }

    fn over_maxmemory(&mut self) -> bool {
        self.ctx.over_maxmemory()
    }

    // Read holds: the trait's writes, mirrored in the lock's read-hold index entry.

    fn read_hold_set(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        self.read_hold_set_(key, owner, i, at)
    }

    fn read_hold_del(&mut self, key: &[u8], owner: &[u8], i: i64) {
        self.read_hold_del_(key, owner, i)
    }

    fn read_hold_expire(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        self.read_hold_expire_(key, owner, i, at)
    }

    fn read_holds_max_pttl(&mut self, key: &[u8]) -> Result<i64> {
        self.read_holds_max_pttl_(key)
    }
}
