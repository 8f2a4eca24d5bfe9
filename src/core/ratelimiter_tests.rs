// Test code only (never in the module): an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::rate_window::{pack, unpack};
use crate::core::store::{Store, SyncStore};

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

pub(crate) fn native() -> Grant<'static> {
    Grant { random: fresh(), fold: true }
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

/// The grant zset as (score, permits), lowest first.
pub(crate) fn grants(s: &mut MemoryStore, key: &str) -> Vec<(i64, u32)> {
    let mut v: Vec<(i64, u32)> = s
        .zset_all(key.as_bytes())
        .unwrap()
        .into_iter()
        .map(|(m, t)| (t as i64, unpack(&m).expect("member").1))
        .collect();
    v.sort();
    v
}

pub(crate) fn value(s: &mut MemoryStore, key: &str) -> Option<i64> {
    s.get_int(key.as_bytes()).unwrap()
}

pub(crate) fn take(s: &mut MemoryStore, permits: i64, now: i64) -> Acquire {
    acquire(s, b"r", None, permits, now, native(), false).unwrap()
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
    (0,     3, None,        3),  // folded into the member of ms 0
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
}

#[test]
fn grants_of_one_millisecond_fold_so_members_never_outnumber_the_interval() {
    let mut s = limiter(1_000_000, 100);
    for i in 0..5_000 {
        assert_eq!(take(&mut s, 1 + i % 7, T0 + i / 50), Acquire::Granted);
    }
    let z = grants(&mut s, "{r}:permits");
    assert_eq!(z.len(), 100, "one member per millisecond of the window");
    let live: i64 = z.iter().map(|&(_, p)| i64::from(p)).sum();
    assert_eq!(value(&mut s, "{r}:value"), Some(1_000_000 - live));
    // A Redisson body's member (fold off) stays its own.
    let lua = Grant { random: b"fedcba9876543210", fold: false };
    assert_eq!(acquire(&mut s, b"r", None, 2, T0 + 99, lua, false), Ok(Acquire::Granted));
    assert_eq!(s.zset_score(b"{r}:permits", &pack(b"fedcba9876543210", 2)), Ok(Some((T0 + 99) as f64)));
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

/// A grant made by Redisson's acquire body: its own member (no folding), the value decremented.
fn redisson_acquire(s: &mut MemoryStore, n: u32, at: i64) {
    let lua = Grant { random: fresh(), fold: false };
    crate::core::rate_window::add_grant(s, b"{r}:permits", at, n, lua).unwrap();
    s.decr_by(b"{r}:value", i64::from(n)).unwrap();
}

/// Redisson 7342 (the recompute drops released permits) and 7329 (available above the rate
/// after a release), with Redisson's own acquire and release bodies writing: their credit is
/// taken off the newest grants at the next call here, once.
#[test]
fn a_release_by_redissons_body_is_credited_once() {
    let mut s = limiter(10, 1_000);
    s.set(b"{r}:value", b"10");
    for i in 0..9 {
        redisson_acquire(&mut s, 1, T0 + 100 * i);
        redisson_release(&mut s, "{r}:value", 1, 10);
    }
    assert_eq!(value(&mut s, "{r}:value"), Some(10));
    assert_eq!(grants(&mut s, "{r}:permits").len(), 9);
    // 7342: at 1,001 ms the first grant expires; Redisson's recompute would leave 10 - 8 = 2.
    assert_eq!(available(&mut s, b"r", None, T0 + 1_001), Ok(10));
    assert!(grants(&mut s, "{r}:permits").is_empty(), "the eight released grants are off the window");
    assert_eq!(take(&mut s, 1, T0 + 1_001), Acquire::Granted);
    assert_eq!(value(&mut s, "{r}:value"), Some(9));
    // 7329: released, then expired: Redisson's availablePermits() would answer 9 + 1 + 1.
    redisson_release(&mut s, "{r}:value", 1, 10);
    assert_eq!(available(&mut s, b"r", None, T0 + 5_000), Ok(10));
    assert!(grants(&mut s, "{r}:permits").is_empty());
}

/// A module command between Redisson's acquires and releases folds each release at once.
#[test]
fn redisson_releases_between_module_calls_are_folded_each_time() {
    let mut s = limiter(10, 1_000);
    for i in 0..9 {
        assert_eq!(take(&mut s, 1, T0 + 100 * i), Acquire::Granted);
        redisson_release(&mut s, "{r}:value", 1, 10);
    }
    assert_eq!(grants(&mut s, "{r}:permits").len(), 1, "each call took the last release off its grant");
    assert_eq!(available(&mut s, b"r", None, T0 + 900), Ok(10));
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
    (Some("15"), &[(0, 4)],       10), // above the rate (someone wrote it): the grants are taken off
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
    assert_eq!(acquire(&mut s, b"r", None, 1, T0, native(), false), Err(LockError::ClientRequired));
    for c in [&b"a"[..], b"b"] {
        assert_eq!(acquire(&mut s, b"r", Some(c), 2, T0, native(), false), Ok(Acquire::Granted));
    }
    assert_eq!(value(&mut s, "{r}:value:a"), Some(0));
    assert_eq!(value(&mut s, "{r}:value:b"), Some(0));
    assert_eq!(state_key(&mut s, b"r", Some(b"a")), Ok(b"{r}:value:a".to_vec()));
}

#[test]
fn every_error_is_found_before_anything_is_written() {
    let mut s = limiter(10, 1_000);
    take(&mut s, 1, T0);
    s.hash_set(b"bad", b"rate", b"x");
    s.hash_set(b"bad", b"interval", b"1000");
    s.hash_set(b"bad", b"type", b"0");
    s.set(b"str", b"1");
    let before = s.data.clone();
    #[rustfmt::skip]
    let cases: Vec<(Result<Acquire>, LockError)> = vec![
        (acquire(&mut s, b"none", None, 1, T0, native(), false), LockError::NotInitialized),
        (acquire(&mut s, b"r", None, 0, T0, native(), false), LockError::PermitsRange),
        (acquire(&mut s, b"r", None, -1, T0, native(), false), LockError::PermitsRange),
        (acquire(&mut s, b"r", None, 1 << 32, T0, native(), false), LockError::PermitsRange),
        (acquire(&mut s, b"r", None, 11, T0, native(), false), LockError::ExceedsRate),
        (acquire(&mut s, b"bad", None, 1, T0, native(), false), LockError::BadLimiterField("rate")),
        (acquire(&mut s, b"str", None, 1, T0, native(), false), LockError::WrongType),
    ];
    for (got, want) in cases {
        assert_eq!(got, Err(want));
    }
    s.set(b"{r}:permits", b"not a zset");
    assert_eq!(acquire(&mut s, b"r", None, 1, T0 + 5_000, native(), false), Err(LockError::WrongType));
    s.data = before.clone();
    s.zset_add(b"{r}:permits", &[16, 1, 2], T0 as f64);
    let before = s.data.clone();
    s.rate_totals.clear();
    assert_eq!(available(&mut s, b"r", None, T0 + 5_000), Err(LockError::BadGrant));
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
    assert!(matches!(take_err(&mut s), LockError::NoPerm(_, k) if k == b"{r}:permits"));
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

fn take_err(s: &mut MemoryStore) -> LockError {
    acquire(s, b"r", None, 1, T0, native(), false).unwrap_err()
}

#[test]
fn a_parked_client_ahead_keeps_the_permits_and_the_wait_is_read_without_writing() {
    let mut s = limiter(5, 1_000);
    take(&mut s, 5, T0);
    assert_eq!(acquire(&mut s, b"r", None, 1, T0 + 1_000, native(), true), Ok(Acquire::Wait(0)));
    let before = s.data.clone();
    assert_eq!(wait(&mut s, b"r", None, 1, T0 + 1_000), Ok(0));
    assert_eq!(wait(&mut s, b"r", None, 6, T0 + 1_000), Err(LockError::ExceedsRate));
    assert_eq!(s.data, before);
    take(&mut s, 5, T0 + 1_000);
    assert_eq!(wait(&mut s, b"r", None, 1, T0 + 1_200), Ok(3 + 1_000 - 200));
    assert_eq!(next_wake(&mut s, b"r", None, T0 + 1_200), Ok(Some(T0 + 2_000)));
}

/// A model of the window (the grants as (ms, permits)), and random calls checked against it:
/// replies, the value, the zset's permits per ms, and the invariants.
#[test]
fn random_calls_follow_the_model_of_the_window() {
    let (rate, interval) = (12, 300);
    let mut s = limiter(rate, interval);
    let mut model: Vec<(i64, i64)> = Vec::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut now = T0;
    for step in 0..3_000 {
        now += [0, 0, 1, 7, 40, 150][next(6) as usize];
        model.retain(|&(t, _)| t > now - interval);
        let live: i64 = model.iter().map(|g| g.1).sum();
        let n = 1 + next(5) as i64;
        match next(4) {
            0 | 1 => {
                let got = take(&mut s, n, now);
                if live + n <= rate {
                    assert_eq!(got, Acquire::Granted, "step {step}");
                    match model.iter_mut().find(|g| g.0 == now) {
                        Some(g) => g.1 += n,
                        None => model.push((now, n)),
                    }
                } else {
                    let oldest = model.iter().map(|g| g.0).min().unwrap();
                    assert_eq!(got, Acquire::Wait(3 + interval - (now - oldest)), "step {step}");
                }
            }
            2 => {
                let mut left = n;
                model.sort();
                while left > 0 && !model.is_empty() {
                    let last = model.len() - 1;
                    let t = left.min(model[last].1);
                    model[last].1 -= t;
                    left -= t;
                    if model[last].1 == 0 {
                        model.pop();
                    }
                }
                let live: i64 = model.iter().map(|g| g.1).sum();
                assert_eq!(release(&mut s, b"r", None, n, now), Ok(rate - live), "step {step}");
            }
            _ => assert_eq!(available(&mut s, b"r", None, now), Ok(rate - live), "step {step}"),
        }
        model.sort();
        let live: i64 = model.iter().map(|g| g.1).sum();
        assert!((0..=rate).contains(&live), "step {step}: {live} live");
        assert_eq!(value(&mut s, "{r}:value"), Some(rate - live), "step {step}");
        let z: Vec<(i64, i64)> = grants(&mut s, "{r}:permits").into_iter().map(|(t, p)| (t, i64::from(p))).collect();
        assert_eq!(z, model, "step {step}");
        assert!(z.len() as i64 <= interval);
    }
}

#[test]
fn a_window_that_left_whole_is_dropped_whole() {
    let mut s = limiter(1_000, 100);
    for i in 0..100 {
        assert_eq!(take(&mut s, 2, T0 + i), Acquire::Granted);
    }
    assert_eq!(grants(&mut s, "{r}:permits").len(), 100);
    assert_eq!(available(&mut s, b"r", None, T0 + 5_000), Ok(1_000));
    assert!(!s.exists(b"{r}:permits"));
    assert_eq!(value(&mut s, "{r}:value"), Some(1_000));
    // Not known (summed by someone else): walked, and dropped the same way.
    for i in 0..100 {
        take(&mut s, 1, T0 + 6_000 + i);
    }
    s.rate_totals.clear();
    assert_eq!(take(&mut s, 3, T0 + 9_000), Acquire::Granted);
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0 + 9_000, 3)]);
}

#[test]
fn ordinary_states_are_those_redissons_acquires_make() {
    let mut s = limiter(10, 1_000);
    assert!(look(&mut s, b"r", None, T0).unwrap().ordinary(), "a new window");
    take(&mut s, 4, T0);
    assert!(look(&mut s, b"r", None, T0 + 5_000).unwrap().ordinary());
    redisson_release(&mut s, "{r}:value", 1, 10);
    assert!(!look(&mut s, b"r", None, T0 + 10).unwrap().ordinary(), "a release not taken off");
    s.set(b"{r}:value", b"2");
    assert!(!look(&mut s, b"r", None, T0 + 10).unwrap().ordinary(), "a low value");
    s.del(b"{r}:value");
    assert!(!look(&mut s, b"r", None, T0 + 10).unwrap().ordinary(), "grants without a value");
}
