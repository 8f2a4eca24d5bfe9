//! The chokepoint for writes: the [`Store`](crate::core::store::Store) the commands run the
//! lock algorithms on (its operations in `effects/store.rs`).
//!
//! Every write goes through here and does three things, in Redis' own order: change the
//! keyspace with the low-level key API, fire the keyspace event the equivalent Redis command
//! fires (so notification users see what Redisson's Lua would produce), and append a
//! deterministic command to the replication stream and the AOF. Expiries are always
//! propagated as absolute times (`PEXPIREAT`, `SET ... PXAT`), computed from one clock reading
//! per command, so a replica or an AOF replay never recomputes time.
//!
//! Also here, because every write passes: the counters of `INFO lockmod` and the leases granted
//! and still held (`stats`), and how a write reaches clients parked on its key (`served`: the
//! wake-up path above hands its reaction in at load).
//!
//! May import: watch, acl, ffi, core. Imported by blocking, redisson, commands, server.

use std::ffi::CStr;

use redis_module::raw;

use crate::acl::{Access, Who};
use crate::core::{LockError, Result};
use crate::ffi::shared::{shared, shared_int};
use crate::ffi::{Arg, Args, Ctx, KeyKind, StrRef};
use crate::watch::hold_index;

mod collections;
mod counters;
pub mod era;
mod keys;
pub mod rate_windows;
mod read_holds;
pub mod served;
pub mod stats;
pub mod wait_stats;
// The `Store` operations themselves.
mod store;

use keys::{Name, OpenKey, OpenKeys};
pub use served::ServedBy;

const GENERIC: u32 = raw::REDISMODULE_NOTIFY_GENERIC as u32;
const STRING: u32 = raw::REDISMODULE_NOTIFY_STRING as u32;
const HASH: u32 = raw::REDISMODULE_NOTIFY_HASH as u32;

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
    /// The slot of the last key asked for by the very buffer of one of the command's arguments
    /// (its address and length): an O(1) command asks for its lock key five or six times. Only
    /// an argument's buffer is remembered: it lives as long as the command, so no other buffer
    /// can take its address (a temporary's could be reused by another name).
    arg_slot: Option<(usize, usize, usize)>,
    /// The slot of the last key asked for by any other buffer (its address and length): a hint
    /// only, confirmed by comparing the name, since a freed buffer's address can come back.
    last_slot: Option<(usize, usize, usize)>,
    /// The name of the rate limiter window index last taken from the store's map, reused when
    /// the index goes back (`rate_windows`).
    index_name: Option<Vec<u8>>,
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
        Self::make(ctx, args, Ctx::cached_ms(), Access::caller(), ServedBy::Writer)
    }

    /// A store for the module's own upkeep (timers, callbacks): it checks nothing, unless
    /// [`RedisStore::for_waiter`] makes it act for a parked client.
    #[inline]
    pub fn at(ctx: &Ctx, args: &'a Args<'a>, now: i64) -> Self {
        Self::make(ctx, args, now, Access::module(), ServedBy::Timer)
    }

    /// Built in one go: a store made from another (`..`) would drop the other's `Access`, a
    /// call on the path of every command.
    #[inline]
    fn make(ctx: &Ctx, args: &'a Args<'a>, now: i64, access: Access, served_by: ServedBy) -> Self {
        RedisStore {
            ctx: *ctx,
            args,
            now,
            db: ctx.selected_db(),
            keys: OpenKeys::default(),
            last_int: None,
            arg_slot: None,
            last_slot: None,
            index_name: None,
            access,
            write: true,
            served_by,
        }
    }

    /// For a writer that serves the locks it changes right after its writes (`serve`'s
    /// grants): a change queues the lock without arming the pending timer.
    pub fn served_by_writer(mut self) -> Self {
        self.served_by = ServedBy::Writer;
        self
    }

    /// Opens keys for reading only: for the module's own looks outside a command (a parked
    /// client's timeout, a wake-up time), which must not expire keys or write.
    pub fn read_only(mut self) -> Self {
        self.write = false;
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

    /// The count in field `f` of the key in slot `i`: the one last read or written when `f` is
    /// the same argument of the same key (an unlock reads it, then writes it), else read.
    fn current_int(&self, i: usize, f: &Name) -> Option<i64> {
        match (self.last_int, f.arg_index()) {
            (Some((j, a, v)), Some(b)) if j == i && a == b => v,
            _ => self.keys[i].key.hash_get_int(f.raw()).ok().flatten(),
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
        let at = (key.as_ptr() as usize, key.len());
        if let Some((p, l, i)) = self.arg_slot {
            if (p, l) == at {
                return i;
            }
        }
        if let Some((p, l, i)) = self.last_slot {
            if (p, l) == at && self.name_is(&self.keys[i].name, key) {
                return i;
            }
        }
        let i = match self.keys.find(|k| self.name_is(&k.name, key)) {
            Some(i) => i,
            None => {
                let name = self.name(key);
                let handle = self.ctx.open_key(name.raw(), self.write);
                let existed = handle.kind() != KeyKind::Empty;
                self.keys.push(OpenKey { name, key: handle, existed })
            }
        };
        match self.keys[i].name {
            Name::Arg(a, _) if self.args.bytes(a).as_ptr() as usize == at.0 => self.arg_slot = Some((at.0, at.1, i)),
            _ => self.last_slot = Some((at.0, at.1, i)),
        }
        i
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
        served::changed(&self.ctx, Some(self.db), name.bytes(), self.served_by);
        self.ctx.notify(class, event, name);
    }

    /// `DEL key`, or `UNLINK key` (its memory freed in the background) when `unlink`: false if
    /// there was no key. Either way the key is forgotten as a lock with read holds and as a
    /// granted lock, and its keyspace event is `del`, as Redis fires for both.
    fn remove(&mut self, key: &[u8], unlink: bool) -> bool {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty {
            return false;
        }
        if unlink {
            k.key.unlink();
        } else {
            k.key.delete();
        }
        hold_index::forget(self.db(), key);
        self.last_int = None;
        stats::on_key_event(b"del", self.db, key);
        let cmd = if unlink { c"UNLINK" } else { c"DEL" };
        self.effect(GENERIC, c"del", k.name.raw(), cmd, &[Arg::S(k.name.raw())]);
        true
    }

    /// `notify` of a `del`: the key is also no longer a granted lock.
    fn notify_del(&self, name: StrRef) {
        stats::on_key_event(b"del", self.db, name.bytes());
        self.notify(GENERIC, c"del", name);
    }
}
