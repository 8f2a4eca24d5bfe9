//! The count-down latch on the in-memory store: set, count down to the open state, the
//! states a Redisson client can leave behind (0 or below), and bad input that changes nothing.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::store::Store;
use crate::core::Denied;

const K: &[u8] = b"latch";
const CH: &str = "redisson_countdownlatch__channel__{latch}";

fn with(value: Option<&str>) -> MemoryStore {
    let mut s = MemoryStore::at(1_700_000_000_000);
    if let Some(v) = value {
        s.set(K, v.as_bytes());
    }
    s
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

#[test]
fn a_latch_is_set_once_and_opens_when_counted_down_to_zero() {
    let mut s = with(None);
    assert_eq!(try_set_count(&mut s, K, 2), Ok(true));
    assert_eq!(published(&mut s), ["1"]);
    assert_eq!(try_set_count(&mut s, K, 5), Ok(false));
    assert_eq!((count(&mut s, K), is_open(&mut s, K)), (Ok(2), Ok(false)));
    assert_eq!(count_down(&mut s, K), Ok(CountDown::Left(1)));
    assert!(published(&mut s).is_empty());
    assert_eq!(count_down(&mut s, K), Ok(CountDown::Opened));
    assert!(!s.exists(K));
    assert_eq!(published(&mut s), ["0"]);
    assert_eq!((count(&mut s, K), is_open(&mut s, K)), (Ok(0), Ok(true)));
}

/// (case, value before, outcome, reply, value after, published)
type DecrCase = (&'static str, Option<&'static str>, CountDown, i64, Option<&'static str>, &'static [&'static str]);

#[rustfmt::skip]
const DECR: &[DecrCase] = &[
    // case,                  before,      outcome,              reply, after,      published
    ("absent: nothing",       None,        CountDown::Absent,    0,     None,       &[]),
    ("three to go",           Some("4"),   CountDown::Left(3),   3,     Some("3"),  &[]),
    ("the last one",          Some("1"),   CountDown::Opened,    0,     None,       &["0"]),
    ("already 0: deleted",    Some("0"),   CountDown::Deleted,   0,     None,       &[]),
    ("below 0: deleted",      Some("-3"),  CountDown::Deleted,   0,     None,       &[]),
];

#[test]
fn count_down_follows_redissons_branches() {
    for (case, before, outcome, reply, after, msgs) in DECR {
        let mut s = with(*before);
        let got = count_down(&mut s, K);
        assert_eq!(got, Ok(*outcome), "{case}");
        assert_eq!(got.map(CountDown::left), Ok(*reply), "{case}");
        assert_eq!(outcome.opened(), after.is_none() && before.is_some(), "{case}");
        assert_eq!(s.string("latch").as_deref(), *after, "{case}");
        assert_eq!(published(&mut s), *msgs, "{case}");
    }
}

#[rustfmt::skip]
const OPEN: &[(&str, Option<&str>, bool)] = &[
    ("absent",   None,        true),
    ("zero",     Some("0"),   true),
    ("counting", Some("2"),   false),
    // Redisson's await tests `== 0`: a negative count waits for its next count-down.
    ("negative", Some("-1"),  false),
];

#[test]
fn await_is_satisfied_at_zero_or_when_absent() {
    for (case, before, open) in OPEN {
        assert_eq!(is_open(&mut with(*before), K), Ok(*open), "{case}");
    }
}

#[test]
fn a_zero_count_is_set_as_redisson_sets_it() {
    let mut s = with(None);
    assert_eq!(try_set_count(&mut s, K, 0), Ok(true));
    assert_eq!(s.string("latch").as_deref(), Some("0"));
    assert_eq!(published(&mut s), ["1"]);
    assert_eq!(is_open(&mut s, K), Ok(true));
}

#[test]
fn delete_publishes_the_new_count_message_only_if_there_was_a_latch() {
    let mut s = with(Some("3"));
    assert_eq!(delete(&mut s, K), Ok(true));
    assert_eq!(published(&mut s), ["1"]);
    assert_eq!(delete(&mut s, K), Ok(false));
    assert!(published(&mut s).is_empty());
}

#[test]
fn bad_input_is_an_error_that_writes_and_publishes_nothing() {
    let mut s = with(None);
    assert_eq!(try_set_count(&mut s, K, -1), Err(LockError::Negative("count")));
    assert!(s.data.is_empty());
    for junk in ["x", "1.0", " 1"] {
        let mut s = with(Some(junk));
        assert_eq!(count_down(&mut s, K), Err(LockError::NotInteger), "{junk:?}");
        assert_eq!(count(&mut s, K), Err(LockError::NotInteger), "{junk:?}");
        assert_eq!(s.string("latch").as_deref(), Some(junk));
    }
    let mut s = with(Some("-9223372036854775808"));
    assert_eq!(count_down(&mut s, K), Err(LockError::Overflow));
    assert_eq!(s.string("latch").as_deref(), Some("-9223372036854775808"));
    assert!(s.published.is_empty());
}

#[test]
fn a_key_of_another_type_is_present_to_tryset_and_wrongtype_to_the_rest() {
    let mut s = with(None);
    s.hash_set(K, b"f", b"v");
    assert_eq!(try_set_count(&mut s, K, 1), Ok(false));
    assert_eq!(count_down(&mut s, K), Err(LockError::WrongType));
    assert_eq!(count(&mut s, K), Err(LockError::WrongType));
    assert_eq!(s.hash("latch"), vec![("f".into(), "v".into())]);
}

#[test]
fn a_denied_channel_stops_a_latch_write_before_it_writes() {
    let mut s = with(Some("1"));
    s.acl = Some(vec![CH.as_bytes().to_vec()]);
    let denied = Err(LockError::NoPerm(Denied::Channel, CH.as_bytes().to_vec()));
    assert_eq!(count_down(&mut s, K), denied);
    assert_eq!(delete(&mut s, K), denied.map(|_: CountDown| false));
    assert_eq!(s.string("latch").as_deref(), Some("1"));
}
