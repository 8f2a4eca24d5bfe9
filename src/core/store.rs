//! The store: the keyspace operations the lock algorithms need, and nothing more.
//!
//! Methods mirror the Redis commands Redisson's scripts call, with the same results, so the
//! algorithms read like the scripts. Writes are infallible here: the algorithms type-check
//! every key before writing (a read method returns [`LockError::WrongType`] for a key of the
//! wrong type), and the store behind them applies, notifies and propagates each write.

use super::access::Need;
use super::error::LockError;
use super::names;
use super::numbers::parse_i64;
use super::reply::Result;

/// `PTTL` of a missing key.
pub const TTL_MISSING: i64 = -2;
/// `PTTL` of a key without an expiry.
pub const TTL_PERSISTENT: i64 = -1;

pub trait Store {
    /// The server's clock in ms, read once per command.
    fn now(&self) -> i64;
    /// The real-time clock in ns, read at this call: redis-cell's clock (its `time::now_utc()`),
    /// which `CL.THROTTLE` follows to reply what redis-cell replies in the same instant.
    /// Defaults to `now()` (a store with a fake clock).
    fn wall_ns(&self) -> i64 {
        self.now().saturating_mul(1_000_000)
    }

    // -- access --------------------------------------------------------------------------------
    /// True when the caller's ACL may deny a derived key or channel: only then are the names
    /// listed and checked (see [`super::permit`]).
    fn restricted(&mut self) -> bool {
        false
    }
    /// Checks each need against the caller's ACL: `NOPERM` naming the first one denied.
    fn permit(&mut self, _needs: &[Need]) -> Result<()> {
        Ok(())
    }
    /// In Redis Cluster, for a command: the hash slot of its key, where every derived key and
    /// channel must lie too (see [`permit`]). None outside a cluster, and for the module's own
    /// upkeep (a parked client's grant was checked when it parked).
    fn cluster_slot(&mut self) -> Option<u16> {
        None
    }

    // -- any type ------------------------------------------------------------------------------
    fn exists(&mut self, key: &[u8]) -> bool;
    /// `EXISTS`, for a key the command only glances at and will not write: a store may look
    /// it up without opening it (cheaper, and no write-side effects).
    fn peek_exists(&mut self, key: &[u8]) -> bool {
        self.exists(key)
    }
    /// Remaining time to live in ms, or [`TTL_MISSING`] / [`TTL_PERSISTENT`], as `PTTL`.
    fn pttl(&mut self, key: &[u8]) -> i64;
    /// `DEL`: true if the key existed.
    fn del(&mut self, key: &[u8]) -> bool;
    /// `PEXPIREAT key at`, on an existing key.
    fn pexpire_at(&mut self, key: &[u8], at: i64);

    // -- hash ----------------------------------------------------------------------------------
    /// `HGET`; `WrongType` if the key is not a hash.
    fn hash_get(&mut self, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>>;
    /// `HGET` of a hold count; `CorruptHoldCount` if the value is not an integer.
    fn hash_get_int(&mut self, key: &[u8], field: &[u8]) -> Result<Option<i64>> {
        match self.hash_get(key, field)? {
            None => Ok(None),
            Some(v) => parse_i64(&v).map(Some).ok_or(LockError::CorruptHoldCount),
        }
    }
    /// `HLEN`.
    fn hash_len(&mut self, key: &[u8]) -> Result<usize>;
    /// `HGETALL`, in no particular order.
    fn hash_entries(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// At most `n` of the hash's fields with their values (which ones is unspecified), with
    /// work proportional to `n`, not to the hash: `HSCAN` stopped early.
    fn hash_entries_first(&mut self, key: &[u8], n: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut all = self.hash_entries(key)?;
        all.truncate(n);
        Ok(all)
    }
    /// `HINCRBY`, on a field known to hold an integer (or absent); returns the new value, or
    /// `Overflow` (writing nothing) if it would leave the 64-bit range, as `HINCRBY` does.
    fn hash_incr(&mut self, key: &[u8], field: &[u8], by: i64) -> Result<i64>;
    /// `HINCRBY` then `DEL` of the key: the effects of both (a release that takes the last
    /// hold), where the incremented value is never read.
    fn hash_incr_then_del(&mut self, key: &[u8], field: &[u8], by: i64) -> Result<()> {
        self.hash_incr(key, field, by)?;
        self.del(key);
        Ok(())
    }
    /// `HSET` of one field.
    fn hash_set(&mut self, key: &[u8], field: &[u8], value: &[u8]);
    /// `HSET key f1 v1 f2 v2 ...`: one command, so a store should fire one `hset` event and
    /// replicate one command, as Redis does (the default writes them one by one).
    fn hash_set_many(&mut self, key: &[u8], pairs: &[(&[u8], &[u8])]) {
        for (f, v) in pairs {
            self.hash_set(key, f, v);
        }
    }
    /// `HDEL` of one field (the key goes with its last field).
    fn hash_del(&mut self, key: &[u8], field: &[u8]);

    // -- string --------------------------------------------------------------------------------
    /// `GET`; `WrongType` if the key is not a string.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// `SET key value PXAT at`, replacing a value of any type.
    fn set_px_at(&mut self, key: &[u8], value: &[u8], at: i64);
    /// `INCR` of a counter known to be a string holding an integer (or absent); `Overflow`
    /// (writing nothing) at `i64::MAX`, as `INCR` does.
    fn incr(&mut self, key: &[u8]) -> Result<i64>;

    // -- fencing (see the lock family's `era.rs`) ---------------------------------------------------------
    /// The least a token counter holding `v` (`None`: absent) must hold before a grant: the
    /// floor of the fencing era in force, 0 before any (tokens are then plain counts).
    fn token_floor(&mut self, _v: Option<i64>) -> i64 {
        0
    }
    /// `SET key floor` of a token counter below `floor` (or absent), recording the era first
    /// where this history has no record of it yet.
    fn raise_token(&mut self, key: &[u8], floor: i64);

    // -- list (the fair lock's queue) ------------------------------------------------------------
    /// `LLEN`; `WrongType` if the key is not a list.
    fn list_len(&mut self, key: &[u8]) -> Result<usize>;
    /// `LINDEX key i` (negative counts from the tail).
    fn list_index(&mut self, key: &[u8], i: i64) -> Result<Option<Vec<u8>>>;
    /// `LRANGE key 0 -1`.
    fn list_all(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// `LRANGE key 0 n-1`, in O(n).
    fn list_first(&mut self, key: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
        let mut all = self.list_all(key)?;
        all.truncate(n);
        Ok(all)
    }
    /// `LPOP` of a list known to be one (or absent).
    fn list_pop_head(&mut self, key: &[u8]);
    /// `RPUSH` of one element.
    fn list_push_tail(&mut self, key: &[u8], value: &[u8]);
    /// `LREM key 0 value`: removes every occurrence; how many there were.
    fn list_remove(&mut self, key: &[u8], value: &[u8]) -> usize;
    /// [`Store::list_remove`] of each of `values`, in one pass over the list.
    fn list_remove_many(&mut self, key: &[u8], values: &[&[u8]]) -> usize {
        values.iter().map(|v| self.list_remove(key, v)).sum()
    }

    // -- zset (the fair lock's deadlines) --------------------------------------------------------
    /// `ZCARD`; `WrongType` if the key is not a zset.
    fn zset_len(&mut self, key: &[u8]) -> Result<usize>;
    /// `ZSCORE`.
    fn zset_score(&mut self, key: &[u8], member: &[u8]) -> Result<Option<f64>>;
    /// `ZADD key score member`: true if the member is new.
    fn zset_add(&mut self, key: &[u8], member: &[u8], score: f64) -> bool;
    /// `ZREM` of one member: true if it was there.
    fn zset_rem(&mut self, key: &[u8], member: &[u8]) -> bool;
    /// `ZREM key member...`: how many were there.
    fn zset_rem_many(&mut self, key: &[u8], members: &[&[u8]]) -> usize {
        members.iter().filter(|m| self.zset_rem(key, m)).count()
    }
    /// `ZINCRBY key by member` (a new member starts from 0); the new score.
    fn zset_incr(&mut self, key: &[u8], member: &[u8], by: f64) -> f64;
    /// Adds `by` to every member's score: Redisson's `ZINCRBY` loop over `ZRANGE key 0 -1`,
    /// done in one pass.
    fn zset_shift_all(&mut self, key: &[u8], by: f64);
    /// `ZINCRBY key by member` for each (member, by), in order: Redisson's loops over part
    /// of a queue. A store should do it in one pass and propagate one command.
    fn zset_incr_many(&mut self, key: &[u8], by: &[(Vec<u8>, f64)]) {
        for (member, d) in by {
            self.zset_incr(key, member, *d);
        }
    }
    /// `ZRANGE key 0 -1 WITHSCORES`, lowest score first.
    fn zset_all(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, f64)>>;

    // -- pub/sub -------------------------------------------------------------------------------
    /// `PUBLISH`.
    fn publish(&mut self, channel: &[u8], message: &[u8]);

    // -- the server ------------------------------------------------------------------------------
    /// True when the server is over its `maxmemory`. Releases must work then (unlocks are not
    /// `deny-oom`), but bookkeeping that only grows the keyspace is skipped.
    fn over_maxmemory(&mut self) -> bool {
        false
    }

    // -- read holds of the read-write lock -----------------------------------------------------
    // One string key per read hold (`names::read_timeout`), value `1`, with the hold's lease.
    // They are methods of their own so a store may keep an index of their expiries: the
    // read unlock needs the largest over thousands of them.

    /// `SET T:i 1 PXAT at` for `owner`'s `i`-th read hold.
    fn read_hold_set(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        self.set_px_at(&names::read_timeout(key, owner, i), b"1", at);
    }
    /// `DEL T:i`.
    fn read_hold_del(&mut self, key: &[u8], owner: &[u8], i: i64) {
        self.del(&names::read_timeout(key, owner, i));
    }
    /// `PEXPIREAT T:i at` (nothing if the hold's key is gone).
    fn read_hold_expire(&mut self, key: &[u8], owner: &[u8], i: i64, at: i64) {
        self.pexpire_at(&names::read_timeout(key, owner, i), at);
    }
    /// The largest `PTTL` over the timeout keys of every hold the lock hash records (every
    /// integer field `f` with count `c`: keys `T(f):1..=c`), as Redisson's read unlock
    /// computes it: at most 0 when no hold has time left.
    fn read_holds_max_pttl(&mut self, key: &[u8]) -> Result<i64>
    where
        Self: Sized,
    {
        scan_read_holds(self, key)
    }
}

/// A corrupt hold count must not make a scan run for ever: no field stands for more holds.
pub const MAX_HOLDS_PER_FIELD: i64 = 1 << 20;

/// Checks that the caller's ACL allows `needs` (see `super::access`), before any write. The
/// list is built only for a caller the ACL may deny something: an unrestricted one pays for
/// no names, even where the list is O(N).
pub fn permit<S: Store>(s: &mut S, needs: impl FnOnce() -> Vec<Need>) -> Result<()> {
    let restricted = s.restricted();
    let slot = s.cluster_slot();
    if !restricted && slot.is_none() {
        return Ok(());
    }
    let needs = needs();
    if restricted {
        s.permit(&needs)?;
    }
    // Redisson's scripts name these keys and channels in KEYS: where one lies in another slot,
    // the cluster refuses the script with CROSSSLOT, and the command is refused the same way.
    match slot {
        Some(slot) if needs.iter().any(|n| super::slots::key_slot(n.name()) != slot) => Err(LockError::CrossSlot),
        _ => Ok(()),
    }
}

/// Visits every read hold the lock hash records: for each field whose value is an integer
/// count `c` (the `mode` field is not; write fields are, and their keys simply do not exist),
/// the holds `1..=c`, as Redisson's read unlock walks them.
pub fn for_each_read_hold<S: Store>(s: &mut S, key: &[u8], mut visit: impl FnMut(&mut S, &[u8], i64)) -> Result<()> {
    for (field, value) in s.hash_entries(key)? {
        let Some(count) = parse_i64(&value) else { continue };
        for i in 1..=count.min(MAX_HOLDS_PER_FIELD) {
            visit(s, &field, i);
        }
    }
    Ok(())
}

/// The largest `PTTL` of the timeout keys of every hold the lock records, by scanning them.
pub fn scan_read_holds<S: Store>(s: &mut S, key: &[u8]) -> Result<i64> {
    let mut max = -3;
    for_each_read_hold(s, key, |s, owner, i| max = max.max(s.pttl(&names::read_timeout(key, owner, i))))?;
    Ok(max)
}
