// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
//
// The window under the rate limiter's commands: members folded per millisecond, bounded work
// after a quiet spell on a long window, the index kept and reused. The store double
// (`MemoryStore`) checks every index the limiter keeps against a rebuild of its zset, so each
// test here also proves the index right after every call.

use crate::core::memory::MemoryStore;
use crate::core::rate::bodies::{self, AcquireBody, Expiry, Five, Recompute};
use crate::core::rate::index::STEP;
use crate::core::rate::limiter::tests::{fresh, grants, limiter, take, value, T0};
use crate::core::rate::limiter::{available, release, Acquire};
use crate::core::rate::store::RateStore;
use crate::core::reply::Reply;
use crate::core::store::Store;
use crate::core::sync::store::SyncStore;

#[test]
fn a_busy_millisecond_folds_into_one_member_once_it_is_old_enough() {
    let mut s = limiter(1_000_000, 100);
    for i in 0..5_000 {
        assert_eq!(take(&mut s, 1 + i % 7, T0 + i / 50), Acquire::Granted);
    }
    // Milliseconds 0 to 83 folded (16 ms old), the newest 16 as their 50 grants came.
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(84 + 16 * 50));
    let z = grants(&mut s, "{r}:permits");
    let live: i64 = z.iter().map(|&(_, p)| i64::from(p)).sum();
    assert_eq!(value(&mut s, "{r}:value"), Some(1_000_000 - live));
    assert_eq!(available(&mut s, b"r", None, T0 + 100), Ok(1_000_000 - live + i64::from(z[0].1)));
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(83 + 1 + 15 * 50), "ms 0 left, ms 84 folded");
    assert_eq!(grants(&mut s, "{r}:permits"), z[1..], "the sums per ms are the same");
}

#[test]
fn a_quiet_millisecond_keeps_its_members_and_a_busy_one_folds_even_alone() {
    let mut s = limiter(1_000_000, 1_000);
    for i in 0..50 {
        assert_eq!(take(&mut s, 2, T0 + i / 5), Acquire::Granted);
    }
    assert_eq!(available(&mut s, b"r", None, T0 + 100), Ok(1_000_000 - 100));
    // Five grants a millisecond: below FOLD_MIN, each keeps its member.
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(50));
    let mut s = limiter(1_000_000, 1_000);
    s.pexpire_at(b"r", T0 + 60_000);
    for _ in 0..20 {
        assert_eq!(take(&mut s, 3, T0), Acquire::Granted);
    }
    assert_eq!(available(&mut s, b"r", None, T0 + 15), Ok(1_000_000 - 60));
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(20), "not yet old enough");
    assert_eq!(take(&mut s, 1, T0 + 16), Acquire::Granted);
    // The busy millisecond was the whole zset: folded without the zset ever vanishing.
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0, 60), (T0 + 16, 1)]);
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(2));
    assert_eq!(s.pttl(b"{r}:permits"), 60_000);
}

#[test]
fn grants_out_of_order_keep_the_window_and_its_index() {
    let mut s = limiter(100, 1_000);
    for at in [50, 40, 40, 60, 10, 60, 60, 70, 5] {
        assert_eq!(take(&mut s, 2, T0 + at), Acquire::Granted, "at {at}");
    }
    assert_eq!(release(&mut s, b"r", None, 5, T0 + 80), Ok(100 - 13));
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0 + 5, 2), (T0 + 10, 2), (T0 + 40, 4), (T0 + 50, 2), (T0 + 60, 3)]);
    assert_eq!(available(&mut s, b"r", None, T0 + 1_045), Ok(100 - 5));
}

/// A window of `n` grants of `p` permits, one every `every` ms from T0, made by module calls.
fn filled(interval: i64, n: i64, every: i64, p: i64) -> MemoryStore {
    let mut s = limiter(1_000_000_000, interval);
    for i in 0..n {
        assert_eq!(take(&mut s, p, T0 + i * every), Acquire::Granted);
    }
    s
}

/// Issue 36: the one call after a quiet spell on a long window walks at most `STEP` expired
/// members, one bucket and the two ends, whatever the window holds; the expired grants it
/// leaves are taken off the value, so Redisson's body, which adds them back, reads exactly
/// what the window leaves; the next calls remove the rest.
#[test]
fn a_call_after_a_quiet_spell_on_a_long_window_does_bounded_work() {
    let (interval, n, every) = (20_000, 4_000, 5);
    let mut s = filled(interval, n, every, 3);
    let rate = 1_000_000_000;
    // Half of the window left: 2,001 grants expired, 1,999 live.
    let now = T0 + interval + 10_000;
    let live = 3 * (n - 1 - 10_000 / every);
    s.visited = 0;
    assert_eq!(available(&mut s, b"r", None, now), Ok(rate - live));
    let width = interval / 64;
    assert!(s.visited <= STEP + 2 + width as usize, "{} members visited", s.visited);
    assert_eq!(s.index_rebuilds, 0, "the window's index was the module's");
    let left = n - STEP as i64 - live / 3;
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(n as usize - STEP));
    assert_eq!(value(&mut s, "{r}:value"), Some(rate - live - 3 * left), "the rest taken off the value");
    // Redisson's body (3.38+) adds the expired grants to the value: exactly what is available.
    let k = Five {
        name: b"r",
        value: b"{r}:value",
        client_value: b"{r}:value:c",
        permits: b"{r}:permits",
        client_permits: b"{r}:permits:c",
    };
    let body = AcquireBody { recompute: Recompute::Sum, expiry: Expiry::KeepAlive };
    assert_eq!(bodies::acquire(&mut s, &k, body, 5, now, b"0123456789abcdef"), Ok(Reply::Nil));
    assert_eq!(value(&mut s, "{r}:value"), Some(rate - live - 5));
    // The module's next calls see the body's write (the zset's ends moved), rebuild once, and
    // agree with it.
    assert_eq!(available(&mut s, b"r", None, now), Ok(rate - live - 5));
    assert_eq!(s.index_rebuilds, 1);
}

#[test]
fn the_expired_grants_go_a_step_at_a_time_and_the_count_stays_exact() {
    let (interval, n, every) = (20_000, 4_000, 5);
    let mut s = filled(interval, n, every, 2);
    let rate = 1_000_000_000;
    // 3,001 grants expired, 999 live.
    let now = T0 + interval + 15_000;
    let live = 2 * (n - 1 - 15_000 / every);
    for call in 1..=4 {
        s.visited = 0;
        assert_eq!(take(&mut s, 1, now), Acquire::Granted, "call {call}");
        assert!(s.visited <= STEP + 2 + (interval / 64) as usize, "call {call}: {} visited", s.visited);
        assert_eq!(available(&mut s, b"r", None, now), Ok(rate - live - call), "call {call}");
    }
    // Eight calls removed 512 each: every expired grant is gone.
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(999 + 4));
    assert_eq!(value(&mut s, "{r}:value"), Some(rate - live - 4));
    assert_eq!(s.index_rebuilds, 0);
}

#[test]
fn a_window_written_by_someone_else_is_summed_once_then_remembered() {
    let mut s = filled(1_000, 300, 1, 1);
    assert_eq!(s.index_rebuilds, 0);
    s.zset_add(b"{r}:permits", &crate::core::rate::window::pack(fresh(), 4), (T0 + 299) as f64);
    s.decr_by(b"{r}:value", 4).unwrap();
    assert_eq!(available(&mut s, b"r", None, T0 + 500), Ok(1_000_000_000 - 304));
    assert_eq!(s.index_rebuilds, 1);
    s.visited = 0;
    assert_eq!(available(&mut s, b"r", None, T0 + 600), Ok(1_000_000_000 - 304));
    assert_eq!((s.index_rebuilds, s.visited), (1, 1), "its first member only");
}

/// A Redisson body that removes one expired grant and adds one keeps the zset's length: its
/// first member tells the index is stale, even where the index said the whole window left.
#[test]
fn a_body_keeping_the_length_is_told_by_the_first_member() {
    let mut s = limiter(100, 1_000);
    assert_eq!(take(&mut s, 1, T0), Acquire::Granted);
    for _ in 0..9 {
        assert_eq!(take(&mut s, 1, T0 + 500), Acquire::Granted);
    }
    assert_eq!(available(&mut s, b"r", None, T0 + 501), Ok(90));
    // Redisson's tryAcquire at T0 + 1,200: the grant of T0 leaves, one of its own comes.
    s.zset_rem_range(b"{r}:permits", 0.0, (T0 + 200) as f64);
    s.zset_add(b"{r}:permits", &crate::core::rate::window::pack(fresh(), 4), (T0 + 1_200) as f64);
    s.set(b"{r}:value", b"87");
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(10));
    // At T0 + 1,600 the index's newest grant (T0 + 500) has left: the body's has not.
    assert_eq!(available(&mut s, b"r", None, T0 + 1_600), Ok(96));
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0 + 1_200, 4)]);
    assert_eq!(value(&mut s, "{r}:value"), Some(96));
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
        assert!(s.zset_len(b"{r}:permits").unwrap() as i64 <= interval + rate);
    }
    assert_eq!(s.index_rebuilds, 0);
}
