//! The chokepoint for writes: the [`Store`] the commands run the lock algorithms on.
//!
//! Every write goes through here and does three things, in Redis' own order: change the
//! keyspace with the low-level key API, fire the keyspace event the equivalent Redis command
//! fires (so notification users see what Redisson's Lua would produce), and append a
//! deterministic command to the replication stream and the AOF. Expiries are always
//! propagated as absolute times (`PEXPIREAT`, `SET ... PXAT`), computed from one clock reading
//! per command, so a replica or an AOF replay never recomputes time.

use std::ffi::CStr;

use redis_module::raw;

use crate::access::Need;
use crate::blocking::ServedBy;
use crate::caller::{Access, Who};
use crate::core::store::{Store, TTL_MISSING, TTL_PERSISTENT};
use crate::core::{parse_i64, LockError, Result};
use crate::ffi::shared::{shared, shared_int};
use crate::ffi::{Arg, Args, Ctx, KeyKind, StrRef};
use crate::hold_index;

mod collections;
mod keys;
mod read_holds;

use keys::{Name, OpenKey, OpenKeys};

const GENERIC: u32 = raw::REDISMODULE_NOTIFY_GENERIC as u32;
const STRING: u32 = raw::REDISMODULE_NOTIFY_STRING as u32;
const HASH: u32 = raw::REDISMODULE_NOTIFY_HASH as u32;
const CLUSTER_FLAG: u64 = raw::REDISMODULE_CTX_FLAGS_CLUSTER as u64;

/// `PXAT`, a replicated argument of every read hold's `SET`.
fn pxat() -> Arg<'static> {
    shared(b"PXAT").map_or(Arg::B(b"PXAT"), Arg::S)
}

/// The keyspace seen by one command: keys opened once and kept open until the command ends.
pub struct RedisStore<'a> {
    ctx: Ctx,
    args: &'a Args<'a>,
    now: i64,
    db: i32,
    keys: OpenKeys<'a>,
    /// The last hash count read (`hash_get_int`) or written (`hash_incr`) of a field that is
    /// one of the command's arguments: (key slot, argument index, value), until another write.
    /// (An argument is identified safely by its index; a temporary's address could be reused.)
    last_int: Option<(usize, usize, Option<i64>)>,
    /// Whose ACL the derived keys and channels are checked against.
    access: Access,
    /// Keys are opened for writing; false for a read-only command (`LOCK.INFO`).
    write: bool,
    /// Who serves the parked clients of a lock this store writes: the module's commands (and a
    /// grant in `serve`) serve right after their writes, its upkeep leaves it to a timer.
    served_by: ServedBy,
}

impl<'a> RedisStore<'a> {
    /// A store for a command, checked against its caller's ACL, on the clock Redis uses for
    /// expiry during this command.
    #[inline]
    pub fn new(ctx: &Ctx, args: &'a Args<'a>) -> Self {
        RedisStore { access: Access::caller(), served_by: ServedBy::Writer, ..Self::at(ctx, args, Ctx::cached_ms()) }
    }

    /// A store for the module's own upkeep (timers, callbacks): it checks nothing, unless
    /// [`RedisStore::for_waiter`] makes it act for a parked client.
    #[inline]
    pub fn at(ctx: &Ctx, args: &'a Args<'a>, now: i64) -> Self {
        RedisStore {
            ctx: *ctx,
            args,
            now,
            db: ctx.selected_db(),
            keys: OpenKeys::default(),
            last_int: None,
            access: Access::module(),
            write: true,
            served_by: ServedBy::Timer,
        }
    }

    /// For a writer that serves the locks it changes right after its writes (`serve`'s
    /// grants): a change queues the lock without arming the pending timer.
    pub fn served_by_writer(mut self) -> Self {
        self.served_by = ServedBy::Writer;
        self
    }

    /// Checks this store's writes against the ACL of the user a parked client ran as.
    pub fn for_waiter(mut self, who: &Who) -> Self {
        self.access = Access::waiter(who);
        self
    }

    /// Who the store runs for: what a client parked now keeps for its grant.
    pub fn who(&mut self) -> Who {
        self.access.who(&self.ctx)
    }

    /// A store that opens keys for reading only, for a read-only command: Redis looks keys up
    /// as reads (keyspace hits and misses; on a replica an expired key is not deleted, which a
    /// write lookup would do), and every write through it fails.
    pub fn reader(ctx: &Ctx, args: &'a Args<'a>) -> Self {
        RedisStore { write: false, ..Self::new(ctx, args) }
    }

    /// The database the store works in.
    pub fn db(&self) -> i32 {
        self.db
    }

    /// The context of the command (or callback) the store works for.
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    fn name(&self, b: &[u8]) -> Name<'a> {
        match self.args.index_of(b).and_then(|i| self.args.raw(i).map(|r| (i, r))) {
            Some((i, r)) => Name::Arg(i, r),
            None => match shared(b) {
                Some(s) => Name::Shared(s),
                None => Name::Own(self.ctx.string(b)),
            },
        }
    }

    /// The module string of an integer a write stores or replicates: shared for the usual
    /// small ones (a first count, a step of one), else made.
    fn int_name(&self, n: i64) -> Name<'a> {
        match shared_int(n) {
            Some(s) => Name::Shared(s),
            None => Name::Own(self.ctx.string(crate::ffi::IntBuf::default().format(n))),
        }
    }

    fn name_is(&self, n: &Name, b: &[u8]) -> bool {
        match n {
            Name::Arg(i, _) => {
                // The algorithms pass the argument itself: its address says it (an argument
                // outlives the command, so no other buffer can have that address).
                let own = self.args.bytes(*i);
                (own.as_ptr() == b.as_ptr() && own.len() == b.len()) || own == b
            }
            Name::Shared(s) => s.bytes() == b,
            Name::Own(s) => s.bytes() == b,
        }
    }

    /// The index in `keys` of the handle of `key`, opened on first use (for writing, unless the
    /// store is a reader). A handle is signalled as modified only if a write changed its key
    /// (`ffi::Key`), so opening for writing costs a command that changes nothing nothing.
    fn slot(&mut self, key: &[u8]) -> usize {
        if let Some(i) = self.keys.find(|k| self.name_is(&k.name, key)) {
            return i;
        }
        let name = self.name(key);
        let handle = self.ctx.open_key(name.raw(), self.write);
        let existed = handle.kind() != KeyKind::Empty;
        self.keys.push(OpenKey { name, key: handle, existed });
        self.keys.len() - 1
    }

    fn open(&mut self, key: &[u8]) -> &OpenKey<'a> {
        let i = self.slot(key);
        &self.keys[i]
    }

    fn is_open(&self, key: &[u8]) -> Option<&OpenKey<'a>> {
        self.keys.find(|k| self.name_is(&k.name, key)).map(|i| &self.keys[i])
    }

    fn typed(&mut self, key: &[u8], want: KeyKind) -> Result<Option<&OpenKey<'a>>> {
        let k = self.open(key);
        match k.key.kind() {
            KeyKind::Empty => Ok(None),
            kind if kind == want => Ok(Some(k)),
            _ => Err(LockError::WrongType),
        }
    }

    fn effect(&self, class: u32, event: &CStr, name: StrRef, cmd: &CStr, args: &[Arg]) {
        self.notify(class, event, name);
        self.ctx.replicate_reusing(self.args, cmd, args);
    }

    /// Fires a write's keyspace event, after telling what in the module depends on the key:
    /// its read-hold index entry, the clients parked on it, the set of granted locks. Redis
    /// does not call the module back for its own writes (it subscribes to no class of event
    /// they fire), so the store does it, without the context Redis would build per call.
    fn notify(&self, class: u32, event: &CStr, name: StrRef) {
        // Nothing indexed, nobody parked (the usual case): two flag reads.
        if crate::watch::active() {
            hold_index::on_write(self.db, name.bytes());
        }
        if crate::blocking::any_parked() {
            crate::blocking::changed(&self.ctx, Some(self.db), name.bytes(), self.served_by);
        }
        self.ctx.notify(class, event, name);
    }

    /// `notify` of a `del`: the key is also no longer a granted lock.
    fn notify_del(&self, name: StrRef) {
        crate::stats::on_key_event(b"del", self.db, name.bytes());
        self.notify(GENERIC, c"del", name);
    }
}

impl Store for RedisStore<'_> {
    fn now(&self) -> i64 {
        self.now
    }

    fn restricted(&mut self) -> bool {
        self.access.restricted(&self.ctx)
    }

    fn permit(&mut self, needs: &[Need]) -> Result<()> {
        self.access.permit(&self.ctx, needs)
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
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty {
            return false;
        }
        k.key.delete();
        hold_index::forget(self.db(), key);
        self.last_int = None;
        crate::stats::on_key_event(b"del", self.db, key);
        self.effect(GENERIC, c"del", k.name.raw(), c"DEL", &[Arg::S(k.name.raw())]);
        true
    }

    fn pexpire_at(&mut self, key: &[u8], at: i64) {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty || !k.key.set_expire_at(at) {
            return;
        }
        // A new lock is remembered with its lease when granted; an existing one moves it.
        if k.existed {
            crate::stats::lease_moved(self.db, key, at);
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
        let current = match (self.last_int, f.arg_index()) {
            (Some((j, a, v)), Some(b)) if j == i && a == b => v,
            _ => k.key.hash_get_int(f.raw()).ok().flatten(),
        };
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
        let current = match (self.last_int, f.arg_index()) {
            (Some((j, a, v)), Some(b)) if j == i && a == b => v,
            _ => k.key.hash_get_int(f.raw()).ok().flatten(),
        };
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
        crate::stats::on_key_event(b"del", self.db, key);
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
        let cluster = self.ctx.flags() & CLUSTER_FLAG != 0;
        // Made once, for the message and for its replication.
        let (c, m) = (self.ctx.string(channel), self.name(message));
        let (c, m) = (c.as_ref(), m.raw());
        let args = [Arg::S(c), Arg::S(m)];
        // `lockmod.pubsub sharded`: as SPUBLISH, which Redis itself propagates to replicas only
        // outside a cluster (in one, the cluster bus carries it to the shard's replicas).
        if crate::config::sharded() && self.ctx.publish_shard(c, m) {
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
