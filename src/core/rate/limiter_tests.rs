// Test code only (never in the module): an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::rate::window::{pack, unpack};
use crate::core::store::Store;
use crate::core::sync::store::SyncStore;

pub(crate) const T0: i64 = 1_700_000_000_000;
const R16: &[u8; 16] = b"0123456789abcdef";

/// Fresh random bytes per grant, as the module draws them: a member re-made by a release
/// (same random, fewer permits) must not collide with another grant's.
pub(crate) fn fresh() -> &'static [u8] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut r = *R16;
    r[..8].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    Box::leak(Box::new(r))
}

pub(crate) fn overall(rate: i64, interval: i64) -> Settings {
    Settings { mode: Mode::Overall, rate, interval, keep_alive: 0 }
}

/// A store at `T0` with limiter `r` set to `rate` per `interval` (overall).
pub(crate) fn limiter(rate: i64, interval: i64) -> MemoryStore {
    let mut s = MemoryStore::at(T0);
    assert_eq!(try_set_rate(&mut s, b"r", &overall(rate, interval)), Ok(true));
    s
}

/// The grant zset as (score, permits) per score (the members of one ms summed), lowest first.
pub(crate) fn grants(s: &mut MemoryStore, key: &str) -> Vec<(i64, u32)> {
    let mut v: Vec<(i64, u32)> = Vec::new();
    let mut all: Vec<(i64, u32)> = s
        .zset_all(key.as_bytes())
        .unwrap()
        .into_iter()
        .map(|(m, t)| (t as i64, unpack(&m).expect("member").1))
        .collect();
    all.sort();
    for (t, p) in all {
        match v.last_mut() {
            Some(last) if last.0 == t => last.1 += p,
            _ => v.push((t, p)),
        }
    }
    v
}

pub(crate) fn value(s: &mut MemoryStore, key: &str) -> Option<i64> {
    s.get_int(key.as_bytes()).unwrap()
}

pub(crate) fn take_as(s: &mut MemoryStore, client: Option<&[u8]>, permits: i64, now: i64) -> Result<Acquire> {
    acquire(s, b"r", client, permits, now, fresh(), false)
}

pub(crate) fn take(s: &mut MemoryStore, permits: i64, now: i64) -> Acquire {
    take_as(s, None, permits, now).unwrap()
}

#[test]
fn the_first_grant_writes_the_value_and_a_member_scored_now() {
    let mut s = limiter(10, 1_000);
    assert_eq!(take(&mut s, 3, T0), Acquire::Granted);
    assert_eq!(value(&mut s, "{r}:value"), Some(7));
    let z = s.zset_all(b"{r}:permits").unwrap();
    assert_eq!(z.len(), 1);
    assert_eq!(z[0].0.len(), 21, "one length byte, 16 random bytes, 4 bytes of permits");
    assert_eq!((z[0].0[0], &z[0].0[17..], z[0].1), (16, &[3, 0, 0, 0][..], T0 as f64));
}

#[rustfmt::skip]
const WINDOW: &[(i64, i64, Option<i64>, i64)] = &[
    // at (ms after T0), permits, wait (None: granted), value after
    (0,     4, None,        6),
    (0,     3, None,        3),  // a member of its own, folded into ms 0's by the next ms
    (10,    3, None,        0),
    (20,    1, Some(983),   0),  // 3 + 1,000 - (20 - 0)
    (999,   1, Some(4),     0),
    (1_000, 5, None,        2),  // the 7 of ms 0 came back
    (1_010, 5, None,        0),  // and the 3 of ms 10
];

#[test]
fn grants_slide_out_of_the_window_and_refused_calls_get_redissons_wait() {
    let mut s = limiter(10, 1_000);
    for &(at, permits, wait, after) in WINDOW {
        assert_eq!(take(&mut s, permits, T0 + at), wait.map_or(Acquire::Granted, Acquire::Wait), "at {at}");
        assert_eq!(value(&mut s, "{r}:value"), Some(after), "value after {at}");
    }
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0 + 1_000, 5), (T0 + 1_010, 5)]);
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(2));
}

#[test]
fn a_release_takes_its_permits_off_the_newest_grants() {
    let mut s = limiter(10, 1_000);
    for (at, p) in [(0, 2), (1, 3), (2, 4)] {
        assert_eq!(take(&mut s, p, T0 + at), Acquire::Granted);
    }
    assert_eq!(release(&mut s, b"r", None, 5, T0 + 3), Ok(6));
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0, 2), (T0 + 1, 2)]);
    assert_eq!(value(&mut s, "{r}:value"), Some(6));
    // Their expiry credits only what is left: never above the rate.
    assert_eq!(available(&mut s, b"r", None, T0 + 2_000), Ok(10));
    assert_eq!(release(&mut s, b"r", None, 7, T0 + 2_000), Ok(10), "nothing live: the rate");
}

/// Redisson 7342: `tryAcquire(1)` and `release(1)` every 100 ms on a rate of 10/s. Redisson's
/// recompute drops the released permits (the count falls from 10 to 2 at 1,001 ms).
#[test]
fn acquire_and_release_in_turns_never_lose_a_credit() {
    let mut s = limiter(10, 1_000);
    for i in 0..30 {
        let at = T0 + 100 * i + 1;
        assert_eq!(take(&mut s, 1, at), Acquire::Granted, "step {i}");
        assert_eq!(release(&mut s, b"r", None, 1, at), Ok(10), "step {i}");
        assert_eq!(available(&mut s, b"r", None, at + 50), Ok(10), "step {i}");
    }
    assert!(grants(&mut s, "{r}:permits").is_empty());
}

/// A Redisson client's release body only writes the value (`min(rate, value + n)`), and
/// leaves the grants in the zset.
fn redisson_release(s: &mut MemoryStore, key: &str, n: i64, rate: i64) {
    let v = value(s, key).unwrap_or(rate);
    s.set(key.as_bytes(), (v + n).min(rate).to_string().as_bytes());
}

/// A grant made by Redisson's acquire body: its own member, the value decremented.
fn redisson_acquire(s: &mut MemoryStore, n: u32, at: i64) {
    s.zset_add(b"{r}:permits", &pack(fresh(), n), at as f64);
    s.decr_by(b"{r}:value", i64::from(n)).unwrap();
}

/// The window decides, not the value: a value raised by Redisson's release body cannot be
/// told from one left by a higher rate, so it is recomputed, and the grants stay (7329: the
/// answer never passes the rate either).
#[test]
fn a_value_the_window_does_not_explain_is_recomputed_and_the_grants_stay() {
    let mut s = limiter(10, 1_000);
    s.set(b"{r}:value", b"10");
    for i in 0..9 {
        redisson_acquire(&mut s, 1, T0 + 100 * i);
        redisson_release(&mut s, "{r}:value", 1, 10);
    }
    assert_eq!(value(&mut s, "{r}:value"), Some(10));
    assert_eq!(available(&mut s, b"r", None, T0 + 1_001), Ok(2), "8 grants live");
    assert_eq!(grants(&mut s, "{r}:permits").len(), 8);
    assert_eq!(value(&mut s, "{r}:value"), Some(2));
    redisson_release(&mut s, "{r}:value", 1, 10);
    assert_eq!(available(&mut s, b"r", None, T0 + 5_000), Ok(10));
}

/// What the inferred credit got wrong (issue 36): a release by Redisson's body at 150 ms, a
/// Redisson grant after it, then a module call. Taking the release off the newest grant (the
/// one made after it) let the window pass its rate once the older grant left.
#[test]
fn a_release_before_a_later_grant_never_lets_the_window_pass_its_rate() {
    let mut s = limiter(4, 1_000);
    s.set(b"{r}:value", b"4");
    redisson_acquire(&mut s, 2, T0);
    redisson_release(&mut s, "{r}:value", 2, 4);
    redisson_acquire(&mut s, 2, T0 + 200);
    assert_eq!(available(&mut s, b"r", None, T0 + 900), Ok(0), "4 live: the release is not the window's");
    // At 1,000 ms the grant of 0 ms leaves; the one of 200 ms is live until 1,200 ms.
    assert_eq!(take(&mut s, 2, T0 + 1_000), Acquire::Granted);
    assert_eq!(take(&mut s, 1, T0 + 1_000), Acquire::Wait(3 + 1_000 - 800));
}

/// Issue 36's repro: a PER_CLIENT limiter whose rate another client's `SETRATE ... KEEPSTATE`
/// lowered: the value of this client's window is above what the window leaves; it is never
/// read as a release.
#[test]
fn a_rate_lowered_for_another_client_never_lets_this_clients_window_pass_it() {
    let mut s = MemoryStore::at(T0);
    let per = |rate| Settings { mode: Mode::PerClient, ..overall(rate, 50_000) };
    try_set_rate(&mut s, b"r", &per(10)).unwrap();
    assert_eq!(take_as(&mut s, Some(b"c1"), 3, T0), Ok(Acquire::Granted));
    assert_eq!(set_rate(&mut s, b"r", &per(1), Some(b"c2"), true, false, T0), Ok(true));
    assert_eq!(available(&mut s, b"r", Some(b"c1"), T0), Ok(0), "3 live at a rate of 1");
    assert_eq!(grants(&mut s, "{r}:permits:c1"), [(T0, 3)], "the grants stay");
    assert_eq!(set_rate(&mut s, b"r", &per(10), Some(b"c1"), true, false, T0 + 1), Ok(true));
    assert_eq!(value(&mut s, "{r}:value:c1"), Some(7), "as Redisson's setRate(KEEPSTATE) body leaves it");
    let granted = (0..10).filter(|_| take_as(&mut s, Some(b"c1"), 1, T0 + 2) == Ok(Acquire::Granted)).count();
    assert_eq!(granted, 7);
}

/// A value key (None: absent), grants (ms after T0, permits), what is available.
type OddValue = (Option<&'static str>, &'static [(i64, u32)], i64);

#[rustfmt::skip]
const ODD_VALUES: &[OddValue] = &[
    // value key, grants (ms after T0, permits), available at T0 + 10 (rate 10 per 1,000 ms)
    (Some("3"),  &[],             10), // Redisson: nil arithmetic error on the refusal
    (Some("2"),  &[(0, 3)],        7), // lower than the window explains: recomputed
    (None,       &[(0, 4)],        6), // value gone, grants live: they count
    (Some("0"),  &[(-5_000, 3)],  10), // an old grant only
    (Some("15"), &[(0, 4)],        6), // above the rate (someone wrote it): recomputed
    (Some("8"),  &[(0, 4)],        6), // above what the window leaves: recomputed
];

#[test]
fn odd_values_are_recomputed_from_the_window() {
    for &(v, zs, want) in ODD_VALUES {
        let mut s = limiter(10, 1_000);
        if let Some(v) = v {
            s.set(b"{r}:value", v.as_bytes());
        }
        for &(at, p) in zs {
            s.zset_add(b"{r}:permits", &pack(R16, p), (T0 + at) as f64);
        }
        assert_eq!(available(&mut s, b"r", None, T0 + 10), Ok(want), "{v:?} {zs:?}");
        assert_eq!(value(&mut s, "{r}:value"), Some(want), "{v:?} {zs:?}");
        assert!(matches!(take(&mut s, 1, T0 + 10), Acquire::Granted), "{v:?} {zs:?}");
    }
}

#[test]
fn ttls_follow_the_keep_alive_or_the_hash() {
    let mut s = MemoryStore::at(T0);
    let set = Settings { keep_alive: 60_000, ..overall(10, 1_000) };
    try_set_rate(&mut s, b"r", &set).unwrap();
    s.advance(1_000);
    take(&mut s, 1, T0);
    for k in [&b"r"[..], b"{r}:value", b"{r}:permits"] {
        assert_eq!(s.pttl(k), 60_000, "{}", String::from_utf8_lossy(k));
    }
    let mut s = limiter(10, 1_000);
    s.pexpire_at(b"r", T0 + 30_000);
    assert_eq!(available(&mut s, b"r", None, T0), Ok(10));
    assert_eq!(s.pttl(b"{r}:value"), 30_000, "AVAILABLE sets the TTLs an acquire sets");
    release(&mut s, b"r", None, 1, T0).unwrap();
    assert_eq!(s.pttl(b"{r}:value"), 30_000);
}

#[test]
fn per_client_states_are_apart_and_need_a_client() {
    let mut s = MemoryStore::at(T0);
    try_set_rate(&mut s, b"r", &Settings { mode: Mode::PerClient, ..overall(2, 1_000) }).unwrap();
    assert_eq!(take_as(&mut s, None, 1, T0), Err(LockError::ClientRequired));
    for c in [&b"a"[..], b"b"] {
        assert_eq!(take_as(&mut s, Some(c), 2, T0), Ok(Acquire::Granted));
    }
    assert_eq!(value(&mut s, "{r}:value:a"), Some(0));
    assert_eq!(value(&mut s, "{r}:value:b"), Some(0));
    assert_eq!(state_key(&mut s, b"r", Some(b"a")), Ok(b"{r}:value:a".to_vec()));
}

/// A hash field the module cannot read (issue 36: a negative rate was taken): an error that
/// names it, and nothing written, on every command.
#[rustfmt::skip]
const BAD_FIELDS: &[(&str, &str, &str)] = &[
    ("rate", "-5", "rate"), ("rate", "0", "rate"), ("rate", "x", "rate"), ("rate", "2.5", "rate"),
    ("interval", "0", "interval"), ("interval", "-1000", "interval"), ("type", "2", "type"),
    ("keepAliveTime", "soon", "keepAliveTime"),
];

#[test]
fn every_error_is_found_before_anything_is_written() {
    let mut s = limiter(10, 1_000);
    take(&mut s, 1, T0);
    s.set(b"str", b"1");
    for &(field, bad, named) in BAD_FIELDS {
        let mut s = limiter(10, 1_000);
        take(&mut s, 4, T0);
        s.hash_set(b"r", field.as_bytes(), bad.as_bytes());
        let before = s.data.clone();
        let want = Err(LockError::BadLimiterField(named));
        assert_eq!(take_as(&mut s, None, 1, T0 + 1), want.clone().map(|_: i64| Acquire::Granted), "{field} {bad}");
        assert_eq!(available(&mut s, b"r", None, T0 + 1), want, "{field} {bad}");
        assert_eq!(release(&mut s, b"r", None, 1, T0 + 1), want, "{field} {bad}");
        assert_eq!(wait(&mut s, b"r", None, 1, T0 + 1), want, "{field} {bad}");
        assert_eq!(s.data, before, "{field} {bad}");
    }
    // A negative keep-alive is none, for Redisson as here.
    s.hash_set(b"r", b"keepAliveTime", b"-1");
    assert_eq!(config(&mut s, b"r").map(|c| c.keep_alive), Ok(0));
    let before = s.data.clone();
    #[rustfmt::skip]
    let cases: Vec<(Result<Acquire>, LockError)> = vec![
        (acquire(&mut s, b"none", None, 1, T0, fresh(), false), LockError::NotInitialized),
        (take_as(&mut s, None, 0, T0), LockError::PermitsRange),
        (take_as(&mut s, None, -1, T0), LockError::PermitsRange),
        (take_as(&mut s, None, 1 << 32, T0), LockError::PermitsRange),
        (take_as(&mut s, None, 11, T0), LockError::ExceedsRate),
        (acquire(&mut s, b"str", None, 1, T0, fresh(), false), LockError::WrongType),
    ];
    for (got, want) in cases {
        assert_eq!(got, Err(want));
    }
    assert_eq!(s.data, before);
    s.set(b"{r}:permits", b"not a zset");
    assert_eq!(take_as(&mut s, None, 1, T0 + 5_000), Err(LockError::WrongType));
    s.data = before.clone();
    s.zset_add(b"{r}:permits", &[16, 1, 2], T0 as f64);
    let before = s.data.clone();
    s.rate_index.clear();
    assert_eq!(available(&mut s, b"r", None, T0 + 10), Err(LockError::BadGrant));
    s.set(b"{r}:value", b"1.5");
    assert_eq!(release(&mut s, b"r", None, 1, T0), Err(LockError::NotInteger));
    s.set(b"{r}:value", b"9");
    assert_eq!(s.data, before);
}

#[test]
fn a_restricted_caller_is_checked_for_each_key_before_any_write() {
    let mut s = limiter(10, 1_000);
    s.acl = Some(vec![b"{r}:permits".to_vec()]);
    let before = s.data.clone();
    assert!(matches!(take_as(&mut s, None, 1, T0), Err(LockError::NoPerm(_, k)) if k == b"{r}:permits"));
    assert_eq!(s.data, before);
    s.acl = Some(vec![]);
    assert_eq!(take(&mut s, 1, T0), Acquire::Granted);
    let names: Vec<Vec<u8>> = s
        .checked
        .iter()
        .filter_map(|n| match n {
            crate::core::access::Need::Key(k, _) => Some(k.clone()),
            _ => None,
        })
        .collect();
    for k in [&b"r"[..], b"{r}:value", b"{r}:permits"] {
        assert!(names.iter().any(|n| n == k), "{} checked", String::from_utf8_lossy(k));
    }
}

#[test]
fn a_parked_client_ahead_keeps_the_permits_and_the_wait_is_read_without_writing() {
    let mut s = limiter(5, 1_000);
    take(&mut s, 5, T0);
    assert_eq!(acquire(&mut s, b"r", None, 1, T0 + 1_000, fresh(), true), Ok(Acquire::Wait(0)));
    let before = s.data.clone();
    assert_eq!(wait(&mut s, b"r", None, 1, T0 + 1_000), Ok(0));
    assert_eq!(wait(&mut s, b"r", None, 6, T0 + 1_000), Err(LockError::ExceedsRate));
    assert_eq!(s.data, before);
    take(&mut s, 5, T0 + 1_000);
    assert_eq!(wait(&mut s, b"r", None, 1, T0 + 1_200), Ok(3 + 1_000 - 200));
    assert_eq!(next_wake(&mut s, b"r", None, T0 + 1_200), Ok(Some(T0 + 2_000)));
}

#[test]
fn a_window_that_left_whole_is_dropped_whole() {
    let mut s = limiter(1_000, 100);
    for i in 0..100 {
        assert_eq!(take(&mut s, 2, T0 + i), Acquire::Granted);
    }
    assert_eq!(grants(&mut s, "{r}:permits").len(), 100);
    s.visited = 0;
    assert_eq!(available(&mut s, b"r", None, T0 + 5_000), Ok(1_000));
    assert!(s.visited <= 1, "nothing summed: {} members visited", s.visited);
    assert!(!s.exists(b"{r}:permits"));
    assert_eq!(value(&mut s, "{r}:value"), Some(1_000));
    // Not known (written by someone else): dropped the same way, unsummed.
    for i in 0..100 {
        take(&mut s, 1, T0 + 6_000 + i);
    }
    s.rate_index.clear();
    assert_eq!(take(&mut s, 3, T0 + 9_000), Acquire::Granted);
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0 + 9_000, 3)]);
}
