//! What each command needs the caller's ACL to allow beyond the lock key: every derived key
//! (with the access it needs) and every channel it may publish on.
//!
//! Redis checks the lock key itself, from the command's key spec. The names below are not
//! arguments, so Redis cannot see them: the lock algorithms ask the store to check them
//! (`Store::permit`) before their first write. A name known only from the keyspace (the fair
//! queue's head, the `N` of a read hold) is read first, checked, then written.
//!
//! | command                    | keys (access)                                   | publishes on               |
//! |----------------------------|-------------------------------------------------|----------------------------|
//! | an acquire `... TOKEN`     | token counter (rw)                              |                            |
//! | `LOCK.ACQUIRE`, `RWLOCK.RLOCK`/`WLOCK` | queue, deadlines (r), on a free name  |                            |
//! | `LOCK.UNLOCK`              | latch (rw, with LATCH)                          | lock channel               |
//! | `LOCK.FORCEUNLOCK`         |                                                 | lock channel               |
//! | `RWLOCK.RLOCK`             | `T:n`, the new hold's timeout key (w)           |                            |
//! | `RWLOCK.UNLOCK`            | latch (rw); READ: `T:n` (w), other holds' (r)   | rwlock channel             |
//! | `RWLOCK.RENEW`             | the owner's `T:1..n` (w)                        |                            |
//! | `RWLOCK.FORCEUNLOCK`       |                                                 | rwlock channel             |
//! | `FAIRLOCK.ACQUIRE`/`CANCEL`| queue, deadlines (rw)                           |                            |
//! | `FAIRLOCK.UNLOCK`          | queue, deadlines, latch (rw)                    | the queue head's channel   |
//! | `FAIRLOCK.FORCEUNLOCK`     | queue, deadlines (rw)                           | the queue head's channel   |
//! | `LOCK.INFO`                | token, queue, deadlines, read holds' `T` (r)    |                            |
//! | a `BLOCK` grant            | the lock key (rw), then as the acquire          |                            |
//! | `SEMAPHORE.TRYSETPERMITS`/`RELEASE`/`ADDPERMITS` |                         | `redisson_sc:{name}`       |
//! | `PSEMAPHORE.*` but `TRYSETPERMITS` | `{name}:timeout` (rw; `SETPERMITS`: r) | `redisson_sc:{name}`       |
//! | `PSEMAPHORE.TRYSETPERMITS` |                                                 | `redisson_sc:{name}`       |
//! | `COUNTDOWN.TRYSETCOUNT`/`DECR` |                                             | the latch's channel        |
//! | `SYNC.INFO`                | `{name}:timeout` (r)                            |                            |
//!
//! The synchronizers' algorithms (`core::sync::semaphore`, `core::sync::permits`,
//! `core::sync::countdown`, `core::sync::info`) declare these beside their writes, from
//! `core::sync::names`; a parked synchronizer client's grant checks its key again (a latch's
//! only for reading).
//!
//! The `RENEW`s of the reentrant and fair locks and the `HOLDS` commands touch only the lock
//! key.

use crate::core::names;

/// What a command does with a key, in ACL terms: Redis asks read permission to use a value
/// (key-spec flag ACCESS) and write permission to change it (INSERT, UPDATE or DELETE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyUse {
    Read,
    Write,
    ReadWrite,
}

/// One thing the caller's ACL must allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    Key(Vec<u8>, KeyUse),
    /// `PUBLISH` on the channel.
    Publish(Vec<u8>),
}

impl Need {
    /// The key's or the channel's name.
    pub fn name(&self) -> &[u8] {
        match self {
            Need::Key(k, _) => k,
            Need::Publish(c) => c,
        }
    }
}

/// The lock key itself: Redis checked it when the command ran, but a client parked with
/// `BLOCK` is granted later, when its user may have lost it.
pub fn lock(key: &[u8]) -> Need {
    Need::Key(key.to_vec(), KeyUse::ReadWrite)
}

fn latch(key: &[u8], request_id: Option<&[u8]>) -> Option<Need> {
    request_id.map(|r| Need::Key(names::unlock_latch(key, r), KeyUse::ReadWrite))
}

/// An acquire with `TOKEN` (`LOCK.ACQUIRE`, `RWLOCK.WLOCK`, `FAIRLOCK.ACQUIRE`): the counter
/// is read (checked, replied) and incremented.
pub fn fenced(key: &[u8]) -> Vec<Need> {
    vec![Need::Key(names::token(key), KeyUse::ReadWrite)]
}

/// `LOCK.UNLOCK`: a release publishes; the latch is read, then written.
pub fn lock_unlock(key: &[u8], latch_id: Option<&[u8]>) -> Vec<Need> {
    let mut v = vec![Need::Publish(names::lock_channel(key))];
    v.extend(latch(key, latch_id));
    v
}

/// The acquires of the other kinds (`LOCK.ACQUIRE`, `RWLOCK.RLOCK`, `RWLOCK.WLOCK`) on a free
/// name: the fair queue and its deadlines are read, so no acquire jumps a live fair waiter
/// (one name, one kind, `core::lock::kinds`).
pub fn fair_peek(key: &[u8]) -> Vec<Need> {
    vec![Need::Key(names::fair_queue(key), KeyUse::Read), Need::Key(names::fair_timeouts(key), KeyUse::Read)]
}

/// `LOCK.FORCEUNLOCK`.
pub fn lock_forceunlock(key: &[u8]) -> Vec<Need> {
    vec![Need::Publish(names::lock_channel(key))]
}

/// `RWLOCK.UNLOCK`, before the read holds: the channel and the latch.
pub fn rwlock_unlock(key: &[u8], latch_id: Option<&[u8]>) -> Vec<Need> {
    let mut v = vec![Need::Publish(names::rwlock_channel(key))];
    v.extend(latch(key, latch_id));
    v
}

/// `RWLOCK.FORCEUNLOCK`.
pub fn rwlock_forceunlock(key: &[u8]) -> Vec<Need> {
    vec![Need::Publish(names::rwlock_channel(key))]
}

/// The timeout key of `owner`'s `i`-th read hold.
pub fn read_hold(key: &[u8], owner: &[u8], i: i64, how: KeyUse) -> Need {
    Need::Key(names::read_timeout(key, owner, i), how)
}

/// Every fair-lock command but RENEW: the queue and the deadlines are read and written
/// (dropping expired waiters is a write, even for a refused acquire).
pub fn fair(key: &[u8]) -> Vec<Need> {
    vec![Need::Key(names::fair_queue(key), KeyUse::ReadWrite), Need::Key(names::fair_timeouts(key), KeyUse::ReadWrite)]
}

/// `FAIRLOCK.UNLOCK`, before the queue head is known.
pub fn fair_unlock(key: &[u8], latch_id: Option<&[u8]>) -> Vec<Need> {
    let mut v = fair(key);
    v.extend(latch(key, latch_id));
    v
}

/// The channel of the waiter first in line, which a fair release wakes.
pub fn fair_head(key: &[u8], head: &[u8]) -> Vec<Need> {
    vec![Need::Publish(names::fair_waiter_channel(key, head))]
}

/// `LOCK.INFO`, before the read holds: what it reads besides the lock.
pub fn lock_info(key: &[u8]) -> Vec<Need> {
    [names::token(key), names::fair_queue(key), names::fair_timeouts(key)]
        .into_iter()
        .map(|k| Need::Key(k, KeyUse::Read))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, how: KeyUse) -> Need {
        Need::Key(name.as_bytes().to_vec(), how)
    }

    fn publish(name: &str) -> Need {
        Need::Publish(name.as_bytes().to_vec())
    }

    #[test]
    fn each_command_needs_its_derived_names() {
        use KeyUse::*;
        assert_eq!(fenced(b"a"), [key("redisson_lock_token:{a}", ReadWrite)]);
        assert_eq!(fair_peek(b"a"), [key("redisson_lock_queue:{a}", Read), key("redisson_lock_timeout:{a}", Read)]);
        assert_eq!(lock_unlock(b"a", None), [publish("redisson_lock__channel:{a}")]);
        assert_eq!(
            lock_unlock(b"a", Some(b"r1")),
            [publish("redisson_lock__channel:{a}"), key("redisson_unlock_latch:{a}:r1", ReadWrite)]
        );
        assert_eq!(lock_forceunlock(b"{a}"), [publish("redisson_lock__channel:{a}")]);
        assert_eq!(
            rwlock_unlock(b"a", Some(b"r")),
            [publish("redisson_rwlock:{a}"), key("redisson_unlock_latch:{a}:r", ReadWrite)]
        );
        assert_eq!(rwlock_forceunlock(b"a"), [publish("redisson_rwlock:{a}")]);
        assert_eq!(read_hold(b"a", b"o", 3, Write), key("{a}:o:rwlock_timeout:3", Write));
        assert_eq!(
            fair_unlock(b"a", Some(b"r")),
            [
                key("redisson_lock_queue:{a}", ReadWrite),
                key("redisson_lock_timeout:{a}", ReadWrite),
                key("redisson_unlock_latch:{a}:r", ReadWrite)
            ]
        );
        assert_eq!(fair_head(b"a", b"w:1"), [publish("redisson_lock__channel:{a}:w:1")]);
        assert_eq!(
            lock_info(b"a"),
            [
                key("redisson_lock_token:{a}", Read),
                key("redisson_lock_queue:{a}", Read),
                key("redisson_lock_timeout:{a}", Read)
            ]
        );
        assert_eq!(lock(b"a"), key("a", ReadWrite));
    }
}
