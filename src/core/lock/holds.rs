//! Ownership queries: how many holds an owner has (Redisson's `getHoldCount` and
//! `isHeldByThread`). Clients ask this to settle a lost reply: did my acquire (or unlock) take
//! effect? So it reads exactly the fields the acquire and unlock of each kind write, and
//! nothing else: O(1), no writes.

use super::rwlock;
use crate::core::names;
use crate::core::names::{MODE, WRITE};
use crate::core::{Result, Store};

/// `LOCK.HOLDS key owner` and `FAIRLOCK.HOLDS key owner`: `owner`'s hold count on the lock
/// hash (0 if none). The fair lock's holders are the same hash as the reentrant lock's; a
/// read-write lock's fields are not reentrant holds (one name, one kind): 0.
pub fn holds<S: Store>(s: &mut S, key: &[u8], owner: &[u8]) -> Result<i64> {
    Ok(super::reentrant::holds(s, key, owner)?.unwrap_or(0))
}

/// `RWLOCK.HOLDS key owner`: `(read holds, write holds)` of `owner`. Without a `mode` field
/// the read-write lock is free whatever else the hash holds (its acquires and unlocks treat
/// it so), and the write field counts only in write mode, as the write unlock reads it.
pub fn rw_holds<S: Store>(s: &mut S, key: &[u8], owner: &[u8]) -> Result<(i64, i64)> {
    rwlock::check_owner(owner)?;
    let Some(mode) = s.hash_get(key, MODE)? else { return Ok((0, 0)) };
    let reads = s.hash_get_int(key, owner)?.unwrap_or(0);
    let writes = if mode == WRITE { s.hash_get_int(key, &names::write_field(owner))?.unwrap_or(0) } else { 0 };
    Ok((reads, writes))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lock::fair;
    use crate::core::lock::reentrant::{self, Acquired};
    use crate::core::lock::rwlock::Side;
    use crate::core::memory::MemoryStore;
    use crate::core::LockError;

    const K: &[u8] = b"l";

    fn store() -> MemoryStore {
        MemoryStore::at(1_000_000)
    }

    #[test]
    fn holds_count_each_reentry_and_each_unlock_and_forget_an_expired_lock() {
        let mut s = store();
        assert_eq!(holds(&mut s, K, b"a"), Ok(0));
        reentrant::acquire(&mut s, K, b"a", 1_000).unwrap();
        reentrant::acquire(&mut s, K, b"a", 1_000).unwrap();
        assert_eq!(holds(&mut s, K, b"a"), Ok(2));
        assert_eq!(holds(&mut s, K, b"b"), Ok(0), "another owner holds nothing");
        reentrant::unlock(&mut s, K, b"a", 1_000, None).unwrap();
        assert_eq!(holds(&mut s, K, b"a"), Ok(1));
        s.advance(1_000);
        assert_eq!(holds(&mut s, K, b"a"), Ok(0), "the lease ran out");
    }

    #[test]
    fn fair_holds_are_the_holders_not_the_queued_waiters() {
        let mut s = store();
        fair::acquire(&mut s, K, b"a", 1_000, 5_000, fair::IfRefused::Queue).unwrap();
        let queued = fair::acquire(&mut s, K, b"b", 1_000, 5_000, fair::IfRefused::Queue).unwrap();
        assert!(matches!(queued, Acquired::Refused(_)));
        assert_eq!(holds(&mut s, K, b"a"), Ok(1));
        assert_eq!(holds(&mut s, K, b"b"), Ok(0));
    }

    #[test]
    fn rw_holds_count_read_and_write_holds_apart_through_a_downgrade() {
        let mut s = store();
        assert_eq!(rw_holds(&mut s, K, b"a"), Ok((0, 0)));
        rwlock::write_lock(&mut s, K, b"a", 1_000).unwrap();
        rwlock::write_lock(&mut s, K, b"a", 1_000).unwrap();
        rwlock::read_lock(&mut s, K, b"a", 1_000, rwlock::Writers::None).unwrap();
        assert_eq!(rw_holds(&mut s, K, b"a"), Ok((1, 2)));
        rwlock::unlock(&mut s, K, b"a", Side::Write, 1_000, None).unwrap();
        rwlock::unlock(&mut s, K, b"a", Side::Write, 1_000, None).unwrap();
        assert_eq!(rw_holds(&mut s, K, b"a"), Ok((1, 0)), "downgraded to its read hold");
        rwlock::read_lock(&mut s, K, b"b", 1_000, rwlock::Writers::None).unwrap();
        assert_eq!(rw_holds(&mut s, K, b"b"), Ok((1, 0)));
    }

    #[test]
    fn a_write_field_outside_write_mode_and_fields_without_a_mode_hold_nothing() {
        let mut s = store();
        s.hash_set(K, b"a", b"3");
        assert_eq!(rw_holds(&mut s, K, b"a"), Ok((0, 0)), "no mode: not a read-write lock hold");
        s.hash_set(K, b"mode", b"read");
        s.hash_set(K, b"a:write", b"2");
        assert_eq!(rw_holds(&mut s, K, b"a"), Ok((3, 0)));
    }

    #[test]
    fn wrong_types_corrupt_counts_and_the_reserved_owner_are_errors() {
        let mut s = store();
        s.set_px_at(K, b"x", 2_000_000);
        assert_eq!(holds(&mut s, K, b"a"), Err(LockError::WrongType));
        assert_eq!(rw_holds(&mut s, K, b"a"), Err(LockError::WrongType));

        let mut s = store();
        s.hash_set(K, b"a", b"many");
        assert_eq!(holds(&mut s, K, b"a"), Err(LockError::CorruptHoldCount));
        s.hash_set(K, b"mode", b"write");
        s.hash_set(K, b"b:write", b"x");
        assert_eq!(rw_holds(&mut s, K, b"a"), Err(LockError::CorruptHoldCount));
        assert_eq!(rw_holds(&mut s, K, b"b"), Err(LockError::CorruptHoldCount));
        assert_eq!(rw_holds(&mut s, K, b"mode"), Err(LockError::ReservedOwner));
    }
}
