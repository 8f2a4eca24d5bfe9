//! The expirable semaphore on the in-memory store with a fake clock and numbered ids: leases,
//! reclaiming expired permits (by a call and by the timer), each release form, and bad input
//! that changes nothing.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::store::Store;
use crate::core::sync::semaphore::servable;

const NOW: i64 = 1_700_000_000_000;
const K: &[u8] = b"ps";
const Z: &str = "{ps}:timeout";
const CH: &str = "redisson_sc:{ps}";

/// Ids 1, 2, 3, ... (the number in the last byte): deterministic, distinct.
fn numbered() -> impl FnMut() -> PermitId {
    let mut n = 0u8;
    move || {
        n += 1;
        let mut id = [0u8; ID_LEN];
        id[ID_LEN - 1] = n;
        id
    }
}

fn id(n: u8) -> Vec<u8> {
    let mut id = vec![0u8; ID_LEN];
    id[ID_LEN - 1] = n;
    id
}

/// `ps` with `available` permits and the given (id number, expiry) leases held.
fn with(available: i64, held: &[(u8, i64)]) -> MemoryStore {
    let mut s = MemoryStore::at(NOW);
    s.set(K, available.to_string().as_bytes());
    for (n, at) in held {
        s.zset_add(Z.as_bytes(), &id(*n), *at as f64);
    }
    s
}

fn held(s: &mut MemoryStore) -> Vec<(u8, i64)> {
    s.zset_entries(Z).into_iter().map(|(m, t)| (*m.as_bytes().last().unwrap(), t as i64)).collect()
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

fn snapshot(s: &MemoryStore) -> Vec<(Vec<u8>, String, Option<i64>)> {
    let mut v: Vec<_> = s.data.iter().map(|(k, (val, at))| (k.clone(), format!("{val:?}"), *at)).collect();
    v.sort();
    v
}

#[test]
fn ids_are_16_bytes_shown_as_lowercase_hex_and_read_in_either_case() {
    let id: PermitId = [0xab; ID_LEN];
    assert_eq!(id_hex(&id), "ab".repeat(16));
    let every: Vec<u8> = (0..=255).collect();
    assert_eq!(id_hex(&every), every.iter().map(|b| format!("{b:02x}")).collect::<String>());
    assert_eq!(parse_id("AB".repeat(16).as_bytes()), Ok(id.to_vec()));
    for bad in ["", "abc", "zz", "0x12"] {
        assert_eq!(parse_id(bad.as_bytes()), Err(LockError::BadPermitId), "{bad:?}");
    }
}

#[test]
fn acquire_takes_permits_with_one_leased_id_each() {
    let mut s = with(3, &[]);
    let until = NOW + 10_000;
    let got = acquire(&mut s, K, 2, until, false, numbered()).unwrap();
    assert_eq!(got, Acquire::Granted(vec![id(1).try_into().unwrap(), id(2).try_into().unwrap()]));
    assert_eq!(s.string("ps").as_deref(), Some("1"));
    assert_eq!(held(&mut s), [(1, until), (2, until)]);
    assert!(s.published.is_empty());
    assert_eq!(next_expiry(&mut s, K), Ok(Some(until)));
}

#[test]
fn the_lease_zset_takes_the_ttl_of_the_permits() {
    let mut s = MemoryStore::at(NOW);
    s.set_px_at(K, b"2", NOW + 60_000);
    acquire(&mut s, K, 1, NOW + 1_000, false, numbered()).unwrap();
    assert_eq!(s.pttl(Z.as_bytes()), 60_000);
}

/// (case, available, held, permits, parked ahead, reply's next expiry or granted)
type RefuseCase = (&'static str, i64, &'static [(u8, i64)], i64, bool, Option<Option<i64>>);

#[rustfmt::skip]
const REFUSED: &[RefuseCase] = &[
    // case,                        avail, held,                                   permits, ahead, refused with
    ("too few, none held",          1,     &[],                                    2,       false, Some(None)),
    ("too few: earliest lease",     0,     &[(2, NOW + 200), (1, NOW + 500)],      1,       false, Some(Some(NOW + 200))),
    ("earliest has no lease",       0,     &[(1, NO_LEASE)],                       1,       false, Some(None)),
    ("a waiter is parked ahead",    5,     &[(1, NOW + 900)],                      1,       true,  Some(Some(NOW + 900))),
    ("enough",                      2,     &[],                                    2,       false, None),
];

#[test]
fn a_refused_acquire_reports_when_a_held_permit_may_come_back() {
    for (case, avail, held_before, permits, ahead, want) in REFUSED {
        let mut s = with(*avail, held_before);
        let got = acquire(&mut s, K, *permits, NOW + 1_000, *ahead, numbered()).unwrap();
        match want {
            Some(t) => {
                assert_eq!(got, Acquire::Refused { next_expiry: t.map(|t| t as f64) }, "{case}");
                assert_eq!(held(&mut s), *held_before, "{case}: nothing taken");
            }
            None => assert!(matches!(got, Acquire::Granted(_)), "{case}"),
        }
    }
}

#[test]
fn acquire_reclaims_at_most_as_many_expired_permits_as_it_wants() {
    let mut s = with(0, &[(1, NOW - 30), (2, NOW - 20), (3, NOW - 10), (4, NOW + 5_000)]);
    let got = acquire(&mut s, K, 2, NOW + 1_000, false, numbered()).unwrap();
    assert!(matches!(got, Acquire::Granted(_)));
    // The two earliest came back (published), were taken; the third waits for the next call.
    assert_eq!(published(&mut s), ["2"]);
    assert_eq!(s.string("ps").as_deref(), Some("0"));
    assert_eq!(held(&mut s), [(3, NOW - 10), (1, NOW + 1_000), (2, NOW + 1_000), (4, NOW + 5_000)]);
}

#[test]
fn the_timer_returns_an_expired_permit_at_its_deadline_to_the_first_waiter() {
    let mut s = with(1, &[]);
    acquire(&mut s, K, 1, NOW + 1_000, false, numbered()).unwrap();
    let deadline = next_expiry(&mut s, K).unwrap().unwrap();
    assert_eq!(deadline, NOW + 1_000);
    // One ms early nothing has expired.
    s.now = deadline - 1;
    assert_eq!(reclaim(&mut s, K, deadline - 1, None), Ok(None));
    s.now = deadline;
    assert_eq!(reclaim(&mut s, K, deadline, None), Ok(Some(1)));
    assert_eq!(published(&mut s), ["1"]);
    assert_eq!((held(&mut s), next_expiry(&mut s, K)), (vec![], Ok(None)));
    // Parked: a waiter for 1 (served), then one for 1 (not: strict order, nothing left).
    assert_eq!(servable(available(&mut s, K).unwrap(), [1, 1]), 1);
}

/// (case, available, held, reclaim returns, published)
type ReclaimCase = (&'static str, i64, &'static [(u8, i64)], Option<i64>, &'static [&'static str]);

#[rustfmt::skip]
const RECLAIM: &[ReclaimCase] = &[
    // case,                          available, held,                               returns,  published
    ("nothing expired",               2,         &[(1, NOW + 1)],                    None,     &[]),
    ("expired at exactly now",        2,         &[(1, NOW)],                        Some(3),  &["3"]),
    ("a negative score is never due", 2,         &[(1, -5)],                         None,     &[]),
    ("still at or below 0: silent",   -2,        &[(1, NOW - 1), (2, NOW - 2)],      Some(0),  &[]),
];

#[test]
fn reclaiming_returns_expired_permits_and_publishes_a_positive_count() {
    for (case, avail, held_before, returns, msgs) in RECLAIM {
        let mut s = with(*avail, held_before);
        assert_eq!(reclaim(&mut s, K, NOW, None), Ok(*returns), "{case}");
        assert_eq!(published(&mut s), *msgs, "{case}");
    }
}

#[test]
fn the_timer_ignores_permits_without_a_lease_and_negative_scores() {
    let mut s = with(0, &[(1, NO_LEASE), (2, -7)]);
    assert_eq!(next_expiry(&mut s, K), Ok(None));
    s.zset_add(Z.as_bytes(), &id(3), (NOW + 10) as f64 + 0.5);
    assert_eq!(next_expiry(&mut s, K), Ok(Some(NOW + 11)));
}

#[rustfmt::skip]
const RELEASE_ONE: &[(&str, u8, ReleaseOne, &str, &[&str])] = &[
    // case,                       id, outcome,               available after, published
    ("held",                       1,  ReleaseOne::Released,  "3",             &["3"]),
    ("expired, not reclaimed",     2,  ReleaseOne::Late,      "3",             &["3"]),
    ("unknown",                    9,  ReleaseOne::Unknown,   "2",             &[]),
];

#[test]
fn releasing_one_id_returns_its_permit_and_publishes_the_count() {
    for (case, n, outcome, after, msgs) in RELEASE_ONE {
        let mut s = with(2, &[(1, NOW + 100), (2, NOW - 100)]);
        assert_eq!(release_one(&mut s, K, &id(*n)), Ok(*outcome), "{case}");
        assert_eq!(release(&mut with(2, &[(1, NOW + 100), (2, NOW - 100)]), K, &[&id(*n)]), Ok(outcome.reply()));
        assert_eq!(s.string("ps").as_deref(), Some(*after), "{case}");
        assert_eq!(published(&mut s), *msgs, "{case}");
    }
}

/// (case, ids released, all-or-nothing reply, each reply, published by each)
type ManyCase = (&'static str, &'static [u8], i64, i64, &'static [&'static str]);

#[rustfmt::skip]
const RELEASE_MANY: &[ManyCase] = &[
    // case,                   ids,        all, each, each published (reclaim of 3, then the count)
    ("both held",              &[1, 2],    2,   2,    &["6", "2"]),
    ("one unknown",            &[1, 9],    0,   1,    &["6", "1"]),
    ("one expired",            &[1, 3],    0,   1,    &["6", "1"]),
    ("the same id twice",      &[1, 1],    1,   1,    &["6", "1"]),
    ("none held",              &[8, 9],    0,   0,    &["6"]),
];

#[test]
fn releasing_several_ids_is_all_or_nothing_since_3_41_and_each_before() {
    let before: &[(u8, i64)] = &[(1, NOW + 100), (2, NOW + 200), (3, NOW - 1)];
    for (case, ids, all, each, each_msgs) in RELEASE_MANY {
        let ids: Vec<Vec<u8>> = ids.iter().map(|n| id(*n)).collect();
        let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
        let mut s = with(5, before);
        let was = snapshot(&s);
        assert_eq!(release_all(&mut s, K, &ids), Ok(*all), "{case}");
        if *all == 0 {
            assert_eq!(snapshot(&s), was, "{case}: all or nothing");
        } else {
            assert_eq!(published(&mut s), ["6".to_string(), all.to_string()], "{case}");
        }
        let mut s = with(5, before);
        assert_eq!(release_each(&mut s, K, &ids), Ok(*each), "{case}");
        assert_eq!(published(&mut s), *each_msgs, "{case}");
        assert_eq!(s.string("ps"), Some((6 + each).to_string()), "{case}");
    }
}

#[test]
fn update_lease_moves_a_held_permits_expiry_and_lease_time_reads_it() {
    let mut s = with(0, &[(1, NOW + 100), (2, NO_LEASE), (3, NOW - 1)]);
    assert_eq!(update_lease(&mut s, K, &id(1), NOW + 9_000), Ok(true));
    // The expired one was reclaimed first, so it cannot be renewed.
    assert_eq!(update_lease(&mut s, K, &id(3), NOW + 9_000), Ok(false));
    assert_eq!(published(&mut s), ["1"]);
    assert_eq!(lease_time(&mut s, K, &id(1)), Ok(9_000));
    assert_eq!(lease_time(&mut s, K, &id(2)), Ok(-1));
    assert_eq!(lease_time(&mut s, K, &id(3)), Ok(0));
}

#[test]
fn counts_reclaim_first_then_report() {
    let mut s = with(2, &[(1, NOW + 100), (2, NOW - 100), (3, NO_LEASE)]);
    assert_eq!(acquired(&mut s, K), Ok(2));
    assert_eq!(published(&mut s), ["3"]);
    assert_eq!((available(&mut s, K), total(&mut s, K)), (Ok(3), Ok(5)));
    let mut s = MemoryStore::at(NOW);
    assert_eq!((available(&mut s, K), acquired(&mut s, K), total(&mut s, K)), (Ok(0), Ok(0), Ok(0)));
}

/// (case, available before (None: absent), held, target, wrote, available after, published)
type SetCase = (&'static str, Option<i64>, &'static [(u8, i64)], i64, bool, &'static str, &'static [&'static str]);

#[rustfmt::skip]
const SET_PERMITS: &[SetCase] = &[
    // case,                        before,  held,                            target, wrote, after, published
    ("absent: set",                 None,    &[],                             4,      true,  "4",   &["4"]),
    ("grow",                        Some(1), &[(1, NOW + 1)],                 5,      true,  "4",   &["5"]),
    ("shrink below what is held",   Some(1), &[(1, NOW + 1), (2, NOW + 1)],   1,      true,  "-1",  &["1"]),
    ("unchanged",                   Some(1), &[(1, NOW + 1)],                 2,      false, "1",   &[]),
    ("expired still count as held", Some(0), &[(1, NOW - 1)],                 1,      false, "0",   &[]),
];

#[test]
fn set_permits_makes_available_plus_held_the_target_and_publishes_it() {
    for (case, before, held_before, target, wrote, after, msgs) in SET_PERMITS {
        let mut s = with(0, held_before);
        match before {
            Some(v) => s.set(K, v.to_string().as_bytes()),
            None => drop(s.del(K)),
        }
        assert_eq!(set_permits(&mut s, K, *target), Ok(*wrote), "{case}");
        assert_eq!(s.string("ps").as_deref(), Some(*after), "{case}");
        assert_eq!(published(&mut s), *msgs, "{case}");
        assert_eq!(held(&mut s), *held_before, "{case}: no reclaim");
    }
}

#[test]
fn add_permits_publishes_only_a_positive_delta_and_try_set_is_the_semaphores() {
    let mut s = MemoryStore::at(NOW);
    assert_eq!(try_set_permits(&mut s, K, 2), Ok(true));
    assert_eq!(try_set_permits(&mut s, K, 9), Ok(false));
    assert_eq!(published(&mut s), ["2"]);
    assert_eq!(add_permits(&mut s, K, 3), Ok(5));
    assert_eq!(published(&mut s), ["3"]);
    assert_eq!(add_permits(&mut s, K, -6), Ok(-1));
    assert!(published(&mut s).is_empty());
}

#[test]
fn bad_input_is_an_error_that_writes_and_publishes_nothing() {
    type Op = fn(&mut MemoryStore) -> Result<()>;
    #[rustfmt::skip]
    let cases: &[(&str, &str, Op, LockError)] = &[
        ("negative acquire",  "5",    |s| acquire(s, K, -1, NOW + 1, false, numbered()).map(drop), LockError::Negative("permits")),
        ("too many at once",  "5",    |s| acquire(s, K, MAX_ACQUIRE + 1, NOW + 1, false, numbered()).map(drop), LockError::NotInteger),
        ("junk count",        "x",    |s| acquire(s, K, 1, NOW + 1, false, numbered()).map(drop), LockError::NotInteger),
        ("junk on release",   "x",    |s| release_one(s, K, &id(1)).map(drop),                    LockError::NotInteger),
        ("junk on available", "1e3",  |s| available(s, K).map(drop),                              LockError::NotInteger),
        ("negative setpermits", "1",  |s| set_permits(s, K, -1).map(drop),                        LockError::Negative("permits")),
        ("reclaim overflows", "9223372036854775807", |s| available(s, K).map(drop),               LockError::Overflow),
        ("release overflows", "9223372036854775807", |s| release_one(s, K, &id(1)).map(drop),     LockError::Overflow),
        ("list release overflows", "9223372036854775806", |s| release_all(s, K, &[&id(1)]).map(drop), LockError::Overflow),
        ("each release overflows", "9223372036854775806", |s| release_each(s, K, &[&id(1)]).map(drop), LockError::Overflow),
    ];
    for (case, value, op, err) in cases {
        let mut s = MemoryStore::at(NOW);
        s.set(K, value.as_bytes());
        s.zset_add(Z.as_bytes(), &id(1), (NOW + 5) as f64);
        s.zset_add(Z.as_bytes(), &id(2), (NOW - 5) as f64);
        let was = snapshot(&s);
        assert_eq!(op(&mut s), Err(err.clone()), "{case}");
        assert_eq!(snapshot(&s), was, "{case}");
        assert!(s.published.is_empty(), "{case}");
    }
}

#[test]
fn a_lease_zset_of_another_type_is_wrongtype_before_anything_is_written() {
    let mut s = with(3, &[]);
    s.hash_set(Z.as_bytes(), b"f", b"v");
    assert_eq!(acquire(&mut s, K, 1, NOW + 1, false, numbered()), Err(LockError::WrongType));
    assert_eq!(release(&mut s, K, &[&id(1)]), Err(LockError::WrongType));
    assert_eq!(set_permits(&mut s, K, 1), Err(LockError::WrongType));
    assert_eq!(s.string("ps").as_deref(), Some("3"));
}

#[test]
fn a_semaphore_found_by_its_lease_zset_is_one_only_with_a_count_and_a_leased_permit_id() {
    let mut s = with(2, &[(1, NOW + 500)]);
    assert!(has_leases(&mut s, K));
    // No lease: nothing to reclaim, nothing to arm for.
    let mut s = with(2, &[(1, NO_LEASE)]);
    assert!(!has_leases(&mut s, K));
    // No count, or not an integer: not a semaphore (the module writes nothing into it).
    let mut s = with(2, &[(1, NOW + 500)]);
    s.set(K, b"x");
    assert!(!has_leases(&mut s, K));
    let mut s = MemoryStore::at(NOW);
    s.zset_add(Z.as_bytes(), &id(1), (NOW + 500) as f64);
    assert!(!has_leases(&mut s, K));
    // Members that are no permit id: someone else's zset with the layout's names.
    let mut s = with(2, &[]);
    s.zset_add(Z.as_bytes(), b"job-42", (NOW + 500) as f64);
    assert!(!has_leases(&mut s, K));
}
