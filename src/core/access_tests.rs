//! The algorithms check every derived key and channel before their first write: each name a
//! command needs, denied alone, makes it fail with `NOPERM` naming that name and leaves the
//! keyspace and the published messages as they were.

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
use super::lock::fair::{self, IfRefused};
use super::lock::fencing::fenced;
use super::lock::info::ParkedList;
use super::lock::latch::Latch;
use super::lock::rwlock::Writers;
use super::lock::{holds, info, reentrant, rwlock};
use super::memory::MemoryStore;
use super::{Denied, LockError, Store};
use crate::core::access::{KeyUse, Need};

const K: &[u8] = b"l";

type Op = fn(&mut MemoryStore) -> super::Result<()>;

fn latch() -> Option<Latch<'static>> {
    Some(Latch { request_id: b"r", ttl_ms: 500 })
}

fn setup_lock(s: &mut MemoryStore) {
    reentrant::acquire(s, K, b"a", 30_000).unwrap();
}

fn setup_reads(s: &mut MemoryStore) {
    rwlock::read_lock(s, K, b"a", 30_000, Writers::None).unwrap();
    rwlock::read_lock(s, K, b"b", 30_000, Writers::None).unwrap();
}

/// A held fair lock with an expired waiter `x` at the head, then `w`: a release wakes `w`.
fn setup_fair(s: &mut MemoryStore) {
    fair::acquire(s, K, b"a", 30_000, 1_000, IfRefused::Queue).unwrap();
    fair::acquire(s, K, b"x", 30_000, 1_000, IfRefused::Queue).unwrap();
    fair::acquire(s, K, b"w", 30_000, 100_000, IfRefused::Queue).unwrap();
    s.zset_add(b"redisson_lock_timeout:{l}", b"x", 1.0);
}

fn key(name: &str, how: KeyUse) -> Need {
    Need::Key(name.as_bytes().to_vec(), how)
}

fn publish(name: &str) -> Need {
    Need::Publish(name.as_bytes().to_vec())
}

/// (what, setup, operation, every need it checks, in order)
type Case = (&'static str, fn(&mut MemoryStore), Op, Vec<Need>);

fn cases() -> Vec<Case> {
    use KeyUse::*;
    let latch_key = || key("redisson_unlock_latch:{l}:r", ReadWrite);
    let fair_keys = || vec![key("redisson_lock_queue:{l}", ReadWrite), key("redisson_lock_timeout:{l}", ReadWrite)];
    // An acquire of another kind on a free name reads the fair queue (one name, one kind).
    let peek = || vec![key("redisson_lock_queue:{l}", Read), key("redisson_lock_timeout:{l}", Read)];
    let token = || key("redisson_lock_token:{l}", ReadWrite);
    vec![
        ("acquire", |_| {}, |s| reentrant::acquire(s, K, b"a", 1_000).map(drop), peek()),
        (
            "fenced acquire",
            |_| {},
            |s| fenced(s, K, |s| reentrant::acquire(s, K, b"a", 1_000)).map(drop),
            [vec![token()], peek()].concat(),
        ),
        ("write lock", |_| {}, |s| rwlock::write_lock(s, K, b"a", 1_000).map(drop), peek()),
        (
            "fenced write lock",
            |_| {},
            |s| fenced(s, K, |s| rwlock::write_lock(s, K, b"a", 1_000)).map(drop),
            [vec![token()], peek()].concat(),
        ),
        (
            "fenced fair acquire",
            |_| {},
            |s| fenced(s, K, |s| fair::acquire(s, K, b"a", 1_000, 1_000, IfRefused::Queue)).map(drop),
            [vec![token()], fair_keys()].concat(),
        ),
        (
            "unlock",
            setup_lock,
            |s| reentrant::unlock(s, K, b"a", 1_000, latch()).map(drop),
            vec![publish("redisson_lock__channel:{l}"), latch_key()],
        ),
        (
            "force unlock",
            setup_lock,
            |s| reentrant::force_unlock(s, K).map(drop),
            vec![publish("redisson_lock__channel:{l}")],
        ),
        (
            "first read hold",
            |_| {},
            |s| rwlock::read_lock(s, K, b"a", 1_000, Writers::None).map(drop),
            [vec![key("{l}:a:rwlock_timeout:1", Write)], peek()].concat(),
        ),
        (
            "second read hold",
            setup_reads,
            |s| rwlock::read_lock(s, K, b"a", 1_000, Writers::None).map(drop),
            vec![key("{l}:a:rwlock_timeout:2", Write)],
        ),
        (
            "read unlock",
            setup_reads,
            |s| rwlock::unlock(s, K, b"a", rwlock::Side::Read, 1_000, latch()).map(drop),
            vec![
                publish("redisson_rwlock:{l}"),
                latch_key(),
                key("{l}:a:rwlock_timeout:1", Write),
                key("{l}:b:rwlock_timeout:1", Read),
            ],
        ),
        (
            "read renew",
            setup_reads,
            |s| rwlock::renew(s, K, b"b", 1_000).map(drop),
            vec![key("{l}:b:rwlock_timeout:1", Write)],
        ),
        (
            "rwlock force unlock",
            setup_reads,
            |s| rwlock::force_unlock(s, K, rwlock::Side::Read).map(drop),
            vec![publish("redisson_rwlock:{l}")],
        ),
        ("fair acquire", |_| {}, |s| fair::acquire(s, K, b"a", 1_000, 1_000, IfRefused::Queue).map(drop), fair_keys()),
        ("fair unlock", setup_fair, |s| fair::unlock(s, K, b"a", 1_000, latch()).map(drop), {
            let mut v = fair_keys();
            v.extend([latch_key(), publish("redisson_lock__channel:{l}:w")]);
            v
        }),
        ("fair cancel", setup_fair, |s| fair::cancel(s, K, b"w", 1_000).map(drop), fair_keys()),
        ("fair cancels", setup_fair, |s| fair::cancel_many(s, K, &[(b"w", 1_000), (b"x", 1_000)]), fair_keys()),
        ("fair force unlock", setup_fair, |s| fair::force_unlock(s, K).map(drop), {
            let mut v = fair_keys();
            v.push(publish("redisson_lock__channel:{l}:w"));
            v
        }),
        (
            "info",
            setup_reads,
            |s| info::info(s, K, 100, ParkedList::default()).map(drop),
            vec![
                key("redisson_lock_token:{l}", Read),
                key("redisson_lock_queue:{l}", Read),
                key("redisson_lock_timeout:{l}", Read),
                key("{l}:a:rwlock_timeout:1", Read),
                key("{l}:b:rwlock_timeout:1", Read),
            ],
        ),
    ]
}

fn name(n: &Need) -> (Denied, Vec<u8>) {
    match n {
        Need::Key(k, _) => (Denied::Key, k.clone()),
        Need::Publish(c) => (Denied::Channel, c.clone()),
    }
}

#[test]
fn a_restricted_caller_is_checked_for_every_derived_name_before_any_write() {
    for (what, setup, op, needs) in cases() {
        let mut s = MemoryStore::at(1_000_000);
        setup(&mut s);
        s.take_published();
        s.acl = Some(Vec::new());
        op(&mut s).unwrap_or_else(|e| panic!("{what}: {e}"));
        let mut checked = s.checked.clone();
        // "info" lists its holds in hash order; the rest in the order they are written.
        checked.sort_by_key(|n| what == "info" && matches!(n, Need::Key(k, _) if k.starts_with(b"{")));
        assert_eq!(checked, needs, "{what}");
    }
}

#[test]
fn each_name_denied_alone_fails_naming_it_and_changes_nothing() {
    for (what, setup, op, needs) in cases() {
        for need in &needs {
            let mut s = MemoryStore::at(1_000_000);
            setup(&mut s);
            s.take_published();
            let before = s.data.clone();
            let (kind, denied) = name(need);
            s.acl = Some(vec![denied.clone()]);
            assert_eq!(op(&mut s), Err(LockError::NoPerm(kind, denied.clone())), "{what}");
            assert_eq!(s.data, before, "{what}: written despite {:?}", String::from_utf8_lossy(&denied));
            assert!(s.published.is_empty(), "{what}: published despite {:?}", String::from_utf8_lossy(&denied));
        }
    }
}

#[test]
fn an_unrestricted_caller_is_asked_for_nothing() {
    for (what, setup, op, _) in cases() {
        let mut s = MemoryStore::at(1_000_000);
        setup(&mut s);
        op(&mut s).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(s.checked.is_empty(), "{what}: {:?}", s.checked);
    }
}

#[test]
fn commands_that_touch_only_the_lock_key_check_nothing() {
    let mut s = MemoryStore::at(1_000_000);
    reentrant::acquire(&mut s, K, b"a", 1_000).unwrap();
    rwlock::write_lock(&mut s, b"w", b"a", 1_000).unwrap();
    s.acl = Some(Vec::new());
    // Re-entries and refusals of held locks: the name is not free, no queue is read.
    reentrant::acquire(&mut s, K, b"a", 1_000).unwrap();
    reentrant::acquire(&mut s, K, b"b", 1_000).unwrap();
    reentrant::renew(&mut s, K, b"a", 1_000).unwrap();
    rwlock::write_lock(&mut s, b"w", b"a", 1_000).unwrap();
    rwlock::write_lock(&mut s, b"w", b"b", 1_000).unwrap();
    fair::renew(&mut s, K, b"a", 1_000).unwrap();
    holds::holds(&mut s, K, b"a").unwrap();
    holds::rw_holds(&mut s, b"w", b"a").unwrap();
    assert!(s.checked.is_empty(), "{:?}", s.checked);
}

#[test]
fn a_noperm_error_names_what_was_denied_as_redis_words_it() {
    let e = LockError::NoPerm(Denied::Key, b"redisson_lock_token:{app:x}".to_vec());
    assert_eq!(e.to_string(), "NOPERM No permissions to access the 'redisson_lock_token:{app:x}' key");
    let e = LockError::NoPerm(Denied::Channel, b"a\r\nb".to_vec());
    assert_eq!(e.to_string(), "NOPERM No permissions to access the 'a  b' channel");
    let long = LockError::NoPerm(Denied::Key, vec![b'x'; 1000]).to_string();
    assert!(long.len() < 300 && long.ends_with("...' key"), "{long}");
}

/// Issue 36: in a cluster, a name whose derived keys or channels lie in another slot is refused
/// with CROSSSLOT before anything is written, as Redisson's script is by the cluster; a lock
/// acquire (whose script names the lock alone) works, and does not look at a fair queue that
/// cannot exist in another slot.
#[test]
fn in_a_cluster_a_derived_name_in_another_slot_is_refused_before_any_write() {
    let name = b"a{}b";
    let mut s = MemoryStore::at(1_000);
    s.slot = Some(super::slots::key_slot(name));
    assert!(matches!(reentrant::acquire(&mut s, name, b"o", 30_000), Ok(crate::core::reply::Acquired::New)));
    let before = s.data.clone();
    assert_eq!(reentrant::unlock(&mut s, name, b"o", 30_000, None), Err(LockError::CrossSlot));
    assert_eq!(
        fenced(&mut s, name, |s| reentrant::acquire(s, name, b"o", 30_000)).map(drop),
        Err(LockError::CrossSlot)
    );
    assert_eq!(s.data, before);
    assert!(s.published.is_empty());
    // A name with its own tag keeps every derived name in its slot.
    let name = b"a{t}b";
    s.slot = Some(super::slots::key_slot(name));
    reentrant::acquire(&mut s, name, b"o", 30_000).unwrap();
    assert_eq!(reentrant::unlock(&mut s, name, b"o", 30_000, None), Ok(super::Reply::Int(1)));
}
