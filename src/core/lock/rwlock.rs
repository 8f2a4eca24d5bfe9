//! The read-write lock (Redisson's `RReadWriteLock`).
//!
//! | key `name` (hash)                              | meaning                                  |
//! |------------------------------------------------|------------------------------------------|
//! | absent                                         | free                                     |
//! | `mode=read`, `{owner: n}`...                   | read by each owner, `n` holds each       |
//! | `mode=write`, `{owner:write: n}`               | written by `owner`, entered `n` times    |
//! | `mode=write`, `{owner:write: n, owner: m}`     | the writer also holds `m` read holds     |
//!
//! Each read hold `i` of `owner` has its own string key `T(owner):i` (`names::read_timeout`)
//! carrying that hold's lease, so holds taken at different times expire independently; the
//! lock's own TTL follows the longest of them. A read unlock publishes `0` on
//! `redisson_rwlock:{name}` (every waiting reader may retry), a write unlock `1`.

use super::latch::{latch_check, latch_record, latch_record_unreleased, Latch};
use crate::core::access::{self, KeyUse};
use crate::core::names;
use crate::core::reply::Acquired;
use crate::core::{deadline, permit, LockError, Reply, Result, Store};

pub use crate::core::names::{MODE, READ, WRITE};
pub use crate::core::store::{for_each_read_hold, scan_read_holds, MAX_HOLDS_PER_FIELD};

/// Which side of the lock a command works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Read,
    Write,
}

impl Side {
    fn mode(self) -> &'static [u8] {
        match self {
            Side::Read => READ,
            Side::Write => WRITE,
        }
    }

    /// The unlock message: `0` lets waiters of either kind retry after a read release, `1`
    /// is Redisson's READ_UNLOCK_MESSAGE after a write release.
    fn message(self) -> &'static [u8] {
        match self {
            Side::Read => b"0",
            Side::Write => b"1",
        }
    }
}

/// Rejects an owner named `mode`, which would collide with the mode field.
pub fn check_owner(owner: &[u8]) -> Result<()> {
    if owner == MODE {
        return Err(LockError::ReservedOwner);
    }
    Ok(())
}

/// Whether a writer waits for the lock in the server (parked with `BLOCK`): then readers that
/// arrive after it wait too, so a stream of readers cannot starve it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// No writer waits (or the reader arrived before it): Redisson's rule alone.
    None,
    /// A writer waits: only a re-entry (an owner that already holds a read hold, or the write
    /// holder) is granted, or it would deadlock with the writer; a new reader is refused.
    Waiting,
}

/// `RWLOCK.RLOCK key owner lease`: a read hold, shared with other readers and open to the
/// writer itself; refused (the PTTL) while another owner writes, while the name is held as
/// another kind of lock or queued for as a fair lock, and, for a new reader, while a writer
/// waits ([`Writers::Waiting`]).
pub fn read_lock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64, writers: Writers) -> Result<Acquired> {
    check_owner(owner)?;
    let mode = s.hash_get(key, MODE)?;
    let now = s.now();
    let at = deadline(now, lease)?;
    let Some(mode) = mode else {
        permit(s, || vec![access::read_hold(key, owner, 1, KeyUse::Write)])?;
        if let Some(ttl) = other_kind(s, key)? {
            return Ok(Acquired::Refused(ttl));
        }
        s.hash_set(key, MODE, READ);
        s.hash_set(key, owner, b"1");
        s.read_hold_set(key, owner, 1, at);
        s.pexpire_at(key, at);
        return Ok(Acquired::New);
    };
    let writer = mode == WRITE && s.hash_get(key, &names::write_field(owner))?.is_some();
    if mode != READ && !writer {
        return Ok(Acquired::Refused(s.pttl(key)));
    }
    let held = s.hash_get_int(key, owner)?;
    if writers == Writers::Waiting && held.is_none() && !writer {
        return Ok(Acquired::Refused(s.pttl(key)));
    }
    // The lock keeps the longer of its remaining time and this lease (no write changes it).
    let keep = deadline(now, s.pttl(key).max(lease))?;
    // The new hold's timeout key is named by the count: read it, check the key, then write.
    let next = held.unwrap_or(0).saturating_add(1);
    permit(s, || vec![access::read_hold(key, owner, next, KeyUse::Write)])?;
    let n = s.hash_incr(key, owner, 1)?;
    s.read_hold_set(key, owner, n, at);
    s.pexpire_at(key, keep);
    Ok(if held.is_some() { Acquired::Reentered } else { Acquired::New })
}

/// A name free as a read-write lock (no `mode`) that is not free: a reentrant or fair lock's
/// hash, or a fair lock's queue with a live waiter. The refusal's TTL, if so.
fn other_kind<S: Store>(s: &mut S, key: &[u8]) -> Result<Option<i64>> {
    if s.exists(key) {
        return Ok(Some(s.pttl(key)));
    }
    super::kinds::fair_queue_ahead(s, key)
}

/// `RWLOCK.WLOCK key owner lease`: exclusive; reentry adds the lease to the remaining TTL
/// (an error, writing nothing, if that sum passes the largest expiry time).
pub fn write_lock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Acquired> {
    check_owner(owner)?;
    let field = names::write_field(owner);
    let mode = s.hash_get(key, MODE)?;
    let now = s.now();
    let at = deadline(now, lease)?;
    match mode.as_deref() {
        None => {
            if let Some(ttl) = other_kind(s, key)? {
                return Ok(Acquired::Refused(ttl));
            }
            s.hash_set(key, MODE, WRITE);
            s.hash_set(key, &field, b"1");
            s.pexpire_at(key, at);
            Ok(Acquired::New)
        }
        Some(WRITE) if s.hash_get_int(key, &field)?.is_some() => {
            let ttl = s.pttl(key);
            let at = deadline(now, ttl).and_then(|t| deadline(t, lease))?;
            s.hash_incr(key, &field, 1)?;
            s.pexpire_at(key, at);
            Ok(Acquired::Reentered)
        }
        Some(_) => Ok(Acquired::Refused(s.pttl(key))),
    }
}

/// `RWLOCK.UNLOCK key owner READ|WRITE lease [LATCH ...]`: nil if `owner` holds nothing of
/// that side, 0 if the lock stays held, 1 if this release freed it (or downgraded it).
pub fn unlock<S: Store>(
    s: &mut S,
    key: &[u8],
    owner: &[u8],
    side: Side,
    lease: i64,
    latch: Option<Latch>,
) -> Result<Reply> {
    check_owner(owner)?;
    let at = deadline(s.now(), lease)?;
    permit(s, || access::rwlock_unlock(key, latch.map(|l| l.request_id)))?;
    if let Some(earlier) = latch_check(s, key, latch)? {
        return Ok(earlier);
    }
    let Some(mode) = s.hash_get(key, MODE)? else {
        // Nothing to release: tell waiters anyway, as Redisson does.
        s.publish(&names::rwlock_channel(key), side.message());
        latch_record_unreleased(s, key, latch, 1);
        return Ok(Reply::Nil);
    };
    let outcome = match side {
        Side::Read => read_unlock(s, key, owner, &mode)?,
        Side::Write => write_unlock(s, key, owner, &mode, at)?,
    };
    if let Some(o) = outcome {
        latch_record(s, key, latch, o);
    }
    Ok(outcome.map_or(Reply::Nil, Reply::Int))
}

fn read_unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], mode: &[u8]) -> Result<Option<i64>> {
    let Some(held) = s.hash_get_int(key, owner)? else {
        return Ok(None);
    };
    if s.restricted() {
        permit_read_unlock(s, key, owner, held)?;
    }
    let left = s.hash_incr(key, owner, -1)?;
    if left == 0 {
        s.hash_del(key, owner);
    }
    s.read_hold_del(key, owner, left + 1);
    if s.hash_len(key)? > 1 {
        let ttl = s.read_holds_max_pttl(key)?;
        if ttl > 0 {
            // The largest remaining hold: an expiry that exists already, so it fits.
            let at = s.now().saturating_add(ttl);
            s.pexpire_at(key, at);
            return Ok(Some(0));
        }
        if mode == WRITE {
            return Ok(Some(0));
        }
    }
    s.del(key);
    s.publish(&names::rwlock_channel(key), Side::Read.message());
    Ok(Some(1))
}

/// A read unlock deletes the owner's last hold's timeout key and reads the remaining holds'
/// TTLs (as Redisson's script does with `PTTL`): every one of them must be allowed.
fn permit_read_unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], held: i64) -> Result<()> {
    let mut needs = vec![access::read_hold(key, owner, held, KeyUse::Write)];
    for_each_read_hold(s, key, |_, field, i| {
        if !(field == owner && i == held) {
            needs.push(access::read_hold(key, field, i, KeyUse::Read));
        }
    })?;
    s.permit(&needs)
}

/// `at`: the lease's deadline, should holds remain.
fn write_unlock<S: Store>(s: &mut S, key: &[u8], owner: &[u8], mode: &[u8], at: i64) -> Result<Option<i64>> {
    let field = names::write_field(owner);
    if mode != WRITE || s.hash_get_int(key, &field)?.is_none() {
        return Ok(None);
    }
    if s.hash_incr(key, &field, -1)? > 0 {
        s.pexpire_at(key, at);
        return Ok(Some(0));
    }
    s.hash_del(key, &field);
    if s.hash_len(key)? == 1 {
        s.del(key);
        s.publish(&names::rwlock_channel(key), Side::Write.message());
    } else {
        // The writer's own read holds remain: the lock is downgraded, not released.
        s.hash_set(key, MODE, READ);
    }
    Ok(Some(1))
}

/// `RWLOCK.RENEW key owner lease`: resets the lease of each of `owner`'s read holds and of
/// the lock; 1 if `owner` holds a read or write hold, else 0.
pub fn renew<S: Store>(s: &mut S, key: &[u8], owner: &[u8], lease: i64) -> Result<Reply> {
    check_owner(owner)?;
    let at = deadline(s.now(), lease)?;
    // A reentrant or fair lock's hash (no mode) is not this kind's to renew.
    if s.hash_get(key, MODE)?.is_none() {
        return Ok(Reply::Int(0));
    }
    let reads = s.hash_get_int(key, owner)?;
    let writes = s.hash_get(key, &names::write_field(owner))?;
    if reads.is_none() && writes.is_none() {
        return Ok(Reply::Int(0));
    }
    let holds = reads.unwrap_or(0).min(MAX_HOLDS_PER_FIELD);
    permit(s, || (1..=holds).map(|i| access::read_hold(key, owner, i, KeyUse::Write)).collect())?;
    for i in 1..=holds {
        s.read_hold_expire(key, owner, i, at);
    }
    s.pexpire_at(key, at);
    Ok(Reply::Int(1))
}

/// `RWLOCK.FORCEUNLOCK key READ|WRITE`: deletes the lock if it is in that mode; 1 if it was.
/// Read holds' timeout keys are left to expire, as Redisson leaves them.
pub fn force_unlock<S: Store>(s: &mut S, key: &[u8], side: Side) -> Result<Reply> {
    permit(s, || access::rwlock_forceunlock(key))?;
    if s.hash_get(key, MODE)?.as_deref() != Some(side.mode()) {
        return Ok(Reply::Int(0));
    }
    s.del(key);
    s.publish(&names::rwlock_channel(key), side.message());
    Ok(Reply::Int(1))
}

#[cfg(test)]
#[path = "rwlock_tests.rs"]
mod tests;
