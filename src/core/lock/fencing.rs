//! Fencing tokens (Redisson's `RFencedLock`), for every kind of lock: `TOKEN` on
//! `LOCK.ACQUIRE`, `RWLOCK.WLOCK` and `FAIRLOCK.ACQUIRE`.
//!
//! Every grant, first, reentrant or after `BLOCK`, increments the counter
//! `redisson_lock_token:{name}` and replies `[-1, token]`; a refusal replies
//! `[<the plain acquire's integer reply>, -1]` and leaves the counter alone. The counter is
//! one per lock name whatever the kind, and never expires, so tokens only grow across holders,
//! unlocks and restarts: a resource that remembers the largest token it has seen can refuse a
//! writer whose lease ran out while it was paused.
//!
//! After a failover or a restart, where grants may have been lost, a counter below the floor
//! of the fencing era in force (`super::era`), or absent, moves up to it before the grant
//! counts: the token is then above anything the lost history handed out.

use crate::core::names;
use crate::core::reply::Acquired;
use crate::core::{parse_i64, LockError, Reply, Result, Store};

/// Runs `acquire` (any kind's acquire on `key`) fenced: checks the counter, then counts the
/// grant. The counter is checked before `acquire` writes anything, so a counter that is not an
/// integer is an error that changes nothing, never a reset.
pub fn fenced<S: Store>(
    s: &mut S,
    key: &[u8],
    acquire: impl FnOnce(&mut S) -> Result<Acquired>,
) -> Result<(Acquired, Reply)> {
    crate::core::permit(s, || crate::core::access::fenced(key))?;
    let counter = names::token(key);
    let held = match s.get(&counter)? {
        Some(v) => Some(parse_i64(&v).ok_or(LockError::NotInteger)?),
        None => None,
    };
    let floor = s.token_floor(held);
    let raise = floor > 0 && held.is_none_or(|v| v < floor);
    // At `i64::MAX` a grant is `INCR`'s overflow error, never a token handed out twice.
    crate::core::incremented(if raise { floor } else { held.unwrap_or(0) }, 1)?;
    let outcome = acquire(s)?;
    let reply = match outcome {
        Acquired::Refused(n) => Reply::Array(vec![Reply::Int(n), Reply::Int(-1)]),
        Acquired::New | Acquired::Reentered => {
            if raise {
                s.raise_token(&counter, floor);
            }
            Reply::Array(vec![Reply::Int(-1), Reply::Int(s.incr(&counter)?)])
        }
    };
    Ok((outcome, reply))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lock::rwlock::{self, Side};
    use crate::core::lock::{fair, reentrant};
    use crate::core::memory::{MemoryStore, Value};

    const K: &[u8] = b"lock";
    const COUNTER: &[u8] = b"redisson_lock_token:{lock}";

    fn grant(t: i64) -> Reply {
        Reply::Array(vec![Reply::Int(-1), Reply::Int(t)])
    }

    fn refused(n: i64) -> Reply {
        Reply::Array(vec![Reply::Int(n), Reply::Int(-1)])
    }

    fn lock(s: &mut MemoryStore, owner: &[u8]) -> Result<Reply> {
        fenced(s, K, |s| reentrant::acquire(s, K, owner, 1_000)).map(|(_, r)| r)
    }

    fn write(s: &mut MemoryStore, owner: &[u8]) -> Result<Reply> {
        fenced(s, K, |s| rwlock::write_lock(s, K, owner, 1_000)).map(|(_, r)| r)
    }

    fn fair(s: &mut MemoryStore, owner: &[u8], if_refused: fair::IfRefused) -> Result<Reply> {
        fenced(s, K, |s| fair::acquire(s, K, owner, 1_000, 5_000, if_refused)).map(|(_, r)| r)
    }

    #[test]
    fn reentrant_grants_count_up_across_owners_and_reentry() {
        let mut s = MemoryStore::at(1_000_000);
        assert_eq!(lock(&mut s, b"a"), Ok(grant(1)));
        assert_eq!(lock(&mut s, b"a"), Ok(grant(2)));
        assert_eq!(lock(&mut s, b"b"), Ok(refused(1_000)));
        reentrant::unlock(&mut s, K, b"a", 1_000, None).unwrap();
        reentrant::unlock(&mut s, K, b"a", 1_000, None).unwrap();
        assert_eq!(lock(&mut s, b"b"), Ok(grant(3)));
        // The counter outlives the lock and has no expiry.
        s.advance(5_000);
        assert_eq!(s.pttl(COUNTER), crate::core::store::TTL_PERSISTENT);
        assert_eq!(lock(&mut s, b"c"), Ok(grant(4)));
    }

    #[test]
    fn write_lock_grants_count_and_readers_refuse_with_the_pttl() {
        let mut s = MemoryStore::at(1_000_000);
        assert_eq!(write(&mut s, b"w"), Ok(grant(1)));
        assert_eq!(write(&mut s, b"w"), Ok(grant(2)), "reentry is a grant");
        assert_eq!(write(&mut s, b"x"), Ok(refused(2_000)), "reentry added its lease");
        rwlock::unlock(&mut s, K, b"w", Side::Write, 1_000, None).unwrap();
        rwlock::unlock(&mut s, K, b"w", Side::Write, 1_000, None).unwrap();
        rwlock::read_lock(&mut s, K, b"r", 3_000, rwlock::Writers::None).unwrap();
        assert_eq!(write(&mut s, b"x"), Ok(refused(3_000)));
        assert_eq!(s.get(COUNTER), Ok(Some(b"2".to_vec())), "refusals count nothing");
    }

    #[test]
    fn fair_grants_count_and_refusals_reply_the_plain_integer() {
        let mut s = MemoryStore::at(1_000_000);
        assert_eq!(fair(&mut s, b"a", fair::IfRefused::Queue), Ok(grant(1)));
        assert_eq!(fair(&mut s, b"b", fair::IfRefused::NoQueue), Ok(refused(1)));
        assert_eq!(fair(&mut s, b"b", fair::IfRefused::Queue), Ok(refused(1_000)), "queued: the base");
        fair::unlock(&mut s, K, b"a", 1_000, None).unwrap();
        assert_eq!(fair(&mut s, b"b", fair::IfRefused::Queue), Ok(grant(2)), "the head takes it");
    }

    #[test]
    fn kinds_share_one_counter_per_name() {
        let mut s = MemoryStore::at(1_000_000);
        assert_eq!(lock(&mut s, b"a"), Ok(grant(1)));
        reentrant::force_unlock(&mut s, K).unwrap();
        assert_eq!(write(&mut s, b"w"), Ok(grant(2)));
    }

    #[test]
    fn after_an_event_a_grant_moves_the_counter_to_the_eras_floor_first() {
        const E2: i64 = 2 << 32;
        let mut s = MemoryStore::at(1_000_000);
        assert_eq!(lock(&mut s, b"a"), Ok(grant(1)));
        s.token_floor = E2;
        // Refusals move nothing.
        assert_eq!(write(&mut s, b"w"), Ok(refused(1_000)));
        assert_eq!(s.get(COUNTER), Ok(Some(b"1".to_vec())));
        assert_eq!(lock(&mut s, b"a"), Ok(grant(E2 + 1)), "reentry: the first grant of the era");
        assert_eq!(lock(&mut s, b"a"), Ok(grant(E2 + 2)), "moved once, then counted");
        // A name the lost history created starts at the floor too.
        let other = b"other";
        assert_eq!(
            fenced(&mut s, other, |s| reentrant::acquire(s, other, b"x", 1_000)).map(|(_, r)| r),
            Ok(grant(E2 + 1))
        );
        // At the last token, an overflow error that changes nothing, moved or not.
        s.data.insert(COUNTER.to_vec(), (Value::Str(i64::MAX.to_string().into_bytes()), None));
        reentrant::force_unlock(&mut s, K).unwrap();
        assert_eq!(lock(&mut s, b"b"), Err(LockError::Overflow));
        assert!(!s.exists(K));
    }

    #[test]
    fn a_non_integer_or_mistyped_counter_is_an_error_that_changes_nothing() {
        let mut s = MemoryStore::at(1_000_000);
        s.data.insert(COUNTER.to_vec(), (Value::Str(b"x".to_vec()), None));
        assert_eq!(lock(&mut s, b"a"), Err(LockError::NotInteger));
        assert_eq!(write(&mut s, b"a"), Err(LockError::NotInteger));
        assert_eq!(fair(&mut s, b"a", fair::IfRefused::Queue), Err(LockError::NotInteger));
        assert!(!s.exists(K));
        assert!(!s.exists(&names::fair_queue(K)));
        s.hash_set(COUNTER, b"f", b"v");
        assert_eq!(write(&mut s, b"a"), Err(LockError::WrongType));
        assert!(!s.exists(K));
    }
}
