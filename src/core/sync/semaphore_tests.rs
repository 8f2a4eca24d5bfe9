//! The semaphore on the in-memory store with a fake clock: every command's branches as tables,
//! strict FIFO service, and bad input that changes nothing.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::store::Store;
use crate::core::Denied;

const NOW: i64 = 1_700_000_000_000;
const K: &[u8] = b"sem";
const CH: &str = "redisson_sc:{sem}";

/// A store where `sem` holds `value` (None: absent).
fn with(value: Option<&str>) -> MemoryStore {
    let mut s = MemoryStore::at(NOW);
    if let Some(v) = value {
        s.set(K, v.as_bytes());
    }
    s
}

/// Every key with its value and expiry, sorted: "nothing written" is this staying equal.
fn snapshot(s: &MemoryStore) -> Vec<(Vec<u8>, String, Option<i64>)> {
    let mut v: Vec<_> = s.data.iter().map(|(k, (val, at))| (k.clone(), format!("{val:?}"), *at)).collect();
    v.sort();
    v
}

fn published(s: &mut MemoryStore) -> Vec<String> {
    s.take_published()
        .into_iter()
        .map(|(c, m)| {
            assert_eq!(c, CH);
            m
        })
        .collect()
}

/// (case, value before, permits, lease, reply, value after, PTTL after, published)
type TrySetCase =
    (&'static str, Option<&'static str>, i64, Option<i64>, bool, &'static str, i64, &'static [&'static str]);

#[rustfmt::skip]
const TRY_SET: &[TrySetCase] = &[
    // case,                 before,     permits, lease,        reply, after, pttl,   published
    ("absent: set",          None,       5,       None,         true,  "5",   -1,     &["5"]),
    ("absent: zero is set",  None,       0,       None,         true,  "0",   -1,     &["0"]),
    ("absent, with a lease", None,       3,       Some(10_000), true,  "3",   10_000, &["3"]),
    ("present: untouched",   Some("2"),  5,       None,         false, "2",   -1,     &[]),
    ("present at zero",      Some("0"),  5,       Some(10_000), false, "0",   -1,     &[]),
];

#[test]
fn try_set_permits_sets_only_an_absent_name() {
    for (case, before, permits, lease, reply, after, pttl, msgs) in TRY_SET {
        let mut s = with(*before);
        assert_eq!(try_set_permits(&mut s, K, *permits, *lease), Ok(*reply), "{case}");
        assert_eq!(s.string("sem").as_deref(), Some(*after), "{case}");
        assert_eq!(s.pttl(K), *pttl, "{case}");
        assert_eq!(published(&mut s), *msgs, "{case}");
    }
}

/// (case, value before, permits, someone parked ahead, reply, value after)
type AcquireCase = (&'static str, Option<&'static str>, i64, bool, bool, Option<&'static str>);

#[rustfmt::skip]
const ACQUIRE: &[AcquireCase] = &[
    // case,                    before,     permits, ahead, reply, after
    ("enough: taken",           Some("5"),  3,       false, true,  Some("2")),
    ("exactly enough",          Some("3"),  3,       false, true,  Some("0")),
    ("too few",                 Some("2"),  3,       false, false, Some("2")),
    ("absent",                  None,       1,       false, false, None),
    ("below zero",              Some("-1"), 0,       false, false, Some("-1")),
    ("zero of zero",            Some("0"),  0,       false, true,  Some("0")),
    ("a waiter is parked",      Some("5"),  1,       true,  false, Some("5")),
];

#[test]
fn acquire_takes_permits_only_when_enough_and_nobody_waits_ahead() {
    for (case, before, permits, ahead, reply, after) in ACQUIRE {
        let mut s = with(*before);
        assert_eq!(acquire(&mut s, K, *permits, *ahead), Ok(*reply), "{case}");
        assert_eq!(s.string("sem").as_deref(), *after, "{case}");
        assert!(s.take_published().is_empty(), "{case}: an acquire publishes nothing");
    }
}

#[test]
fn acquire_keeps_the_ttl_of_the_permits() {
    let mut s = with(None);
    try_set_permits(&mut s, K, 4, Some(5_000)).unwrap();
    s.advance(1_000);
    assert_eq!(acquire(&mut s, K, 1, false), Ok(true));
    assert_eq!(s.pttl(K), 4_000);
}

#[rustfmt::skip]
const FIFO: &[(&str, i64, &[i64], usize)] = &[
    // case,                                available, parked wants (arrival order), served
    ("nobody parked",                       5,         &[],            0),
    ("all fit",                             6,         &[1, 2, 3],     3),
    ("a waiter for 3 is not overtaken by 1", 2,        &[3, 1],        0),
    ("served up to the first that fits not", 4,        &[1, 2, 3, 1],  2),
    ("none available",                      0,         &[1],           0),
    ("below zero",                          -2,        &[0, 1],        0),
    ("zero wants nothing",                  0,         &[0, 0, 1],     2),
];

#[test]
fn parked_waiters_are_served_in_strict_arrival_order() {
    for (case, available, wants, served) in FIFO {
        assert_eq!(servable(*available, wants.iter().copied()), *served, "{case}");
    }
}

#[test]
fn release_adds_publishes_and_replies_the_count_now_available() {
    let mut s = with(Some("1"));
    assert_eq!(release(&mut s, K, 2), Ok(3));
    assert_eq!(published(&mut s), ["3"]);
    // An absent name is created by the release, as `INCRBY` creates it.
    let mut s = with(None);
    assert_eq!(release(&mut s, K, 1), Ok(1));
    assert_eq!(s.string("sem").as_deref(), Some("1"));
    assert_eq!(published(&mut s), ["1"]);
}

#[test]
fn release_keeps_the_ttl_and_release_if_exists_skips_an_absent_name() {
    let mut s = with(None);
    try_set_permits(&mut s, K, 0, Some(9_000)).unwrap();
    s.take_published();
    assert_eq!(release_if_exists(&mut s, K, 2), Ok(Some(2)));
    assert_eq!(s.pttl(K), 9_000);
    assert_eq!(published(&mut s), ["2"]);
    let mut s = with(None);
    assert_eq!(release_if_exists(&mut s, K, 2), Ok(None));
    assert!(s.data.is_empty() && s.published.is_empty());
}

/// (case, value before, delta, reply and value after)
#[rustfmt::skip]
const ADD: &[(&str, Option<&str>, i64, i64)] = &[
    ("absent counts as 0",     None,       4,  4),
    ("adds",                   Some("2"),  3,  5),
    ("negative takes away",    Some("2"),  -5, -3),
    ("zero rewrites the same", Some("7"),  0,  7),
];

#[test]
fn add_permits_sets_the_sum_publishes_it_and_drops_the_ttl() {
    for (case, before, delta, after) in ADD {
        let mut s = with(None);
        if let Some(v) = before {
            s.set_px_at(K, v.as_bytes(), NOW + 5_000);
        }
        assert_eq!(add_permits(&mut s, K, *delta), Ok(*after), "{case}");
        assert_eq!(s.string("sem"), Some(after.to_string()), "{case}");
        assert_eq!(s.pttl(K), -1, "{case}: SET drops the TTL, as Redisson's addPermits");
        assert_eq!(published(&mut s), [after.to_string()], "{case}");
    }
}

#[rustfmt::skip]
const DRAIN: &[(&str, Option<&str>, i64, Option<&str>)] = &[
    // case,              before,      reply, after
    ("absent stays so",   None,        0,     None),
    ("takes everything",  Some("6"),   6,     Some("0")),
    ("already empty",     Some("0"),   0,     Some("0")),
    ("below zero",        Some("-2"),  -2,    Some("0")),
];

#[test]
fn drain_takes_every_permit_and_publishes_nothing() {
    for (case, before, reply, after) in DRAIN {
        let mut s = with(*before);
        assert_eq!(drain(&mut s, K), Ok(*reply), "{case}");
        assert_eq!(s.string("sem").as_deref(), *after, "{case}");
        assert!(s.published.is_empty(), "{case}");
    }
}

#[test]
fn available_is_the_count_or_zero_when_absent() {
    assert_eq!(available(&mut with(None), K), Ok(0));
    assert_eq!(available(&mut with(Some("-4")), K), Ok(-4));
    assert_eq!(available(&mut with(Some("12")), K), Ok(12));
}

#[test]
fn bad_input_is_an_error_that_writes_and_publishes_nothing() {
    type Op = fn(&mut MemoryStore) -> std::result::Result<(), LockError>;
    #[rustfmt::skip]
    let cases: &[(&str, Option<&str>, Op, LockError)] = &[
        ("negative tryset",    None,          |s| try_set_permits(s, K, -1, None).map(drop),   LockError::Negative("permits")),
        ("zero lease",         None,          |s| try_set_permits(s, K, 1, Some(0)).map(drop), LockError::NotPositive("lease")),
        ("lease past the end", None,          |s| try_set_permits(s, K, 1, Some(i64::MAX)).map(drop), LockError::InvalidExpire("")),
        ("negative acquire",   Some("5"),     |s| acquire(s, K, -1, false).map(drop),         LockError::Negative("permits")),
        ("negative release",   Some("5"),     |s| release(s, K, -1).map(drop),                LockError::Negative("permits")),
        ("not a count",        Some("five"),  |s| acquire(s, K, 1, false).map(drop),          LockError::NotInteger),
        ("not canonical",      Some("05"),    |s| release(s, K, 1).map(drop),                 LockError::NotInteger),
        ("tryset over junk",   Some("x"),     |s| try_set_permits(s, K, 1, None).map(drop),   LockError::NotInteger),
        ("drain junk",         Some("1.5"),   |s| drain(s, K).map(drop),                      LockError::NotInteger),
        ("release overflows",  Some("9223372036854775807"), |s| release(s, K, 1).map(drop),   LockError::Overflow),
        ("add overflows",      Some("-9223372036854775808"), |s| add_permits(s, K, -1).map(drop), LockError::Overflow),
        ("add over junk",      Some("x"),     |s| add_permits(s, K, 1).map(drop),             LockError::NotInteger),
    ];
    for (case, before, op, err) in cases {
        let mut s = with(*before);
        let was = snapshot(&s);
        assert_eq!(op(&mut s), Err(err.clone()), "{case}");
        assert_eq!(snapshot(&s), was, "{case}");
        assert!(s.published.is_empty(), "{case}");
    }
}

#[test]
fn a_name_of_another_type_is_wrongtype_for_every_command() {
    let mut s = MemoryStore::at(NOW);
    s.hash_set(K, b"f", b"v");
    assert_eq!(try_set_permits(&mut s, K, 1, None), Err(LockError::WrongType));
    assert_eq!(acquire(&mut s, K, 1, false), Err(LockError::WrongType));
    assert_eq!(release(&mut s, K, 1), Err(LockError::WrongType));
    assert_eq!(add_permits(&mut s, K, 1), Err(LockError::WrongType));
    assert_eq!(drain(&mut s, K), Err(LockError::WrongType));
    assert_eq!(available(&mut s, K), Err(LockError::WrongType));
    assert_eq!(s.hash("sem"), vec![("f".into(), "v".into())]);
}

#[test]
fn a_denied_channel_stops_a_publishing_command_before_it_writes() {
    let mut s = with(Some("1"));
    s.acl = Some(vec![CH.as_bytes().to_vec()]);
    let denied = Err(LockError::NoPerm(Denied::Channel, CH.as_bytes().to_vec()));
    assert_eq!(release(&mut s, K, 1), denied);
    assert_eq!(add_permits(&mut s, K, 1), denied);
    assert_eq!(s.string("sem").as_deref(), Some("1"));
    // Acquire and drain publish nothing, so they need nothing beyond the key.
    assert_eq!(acquire(&mut s, K, 1, false), Ok(true));
}
