// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
//
// Each expectation is the body's Lua worked by hand (the bodies are in
// `shared/redisson-ratelimiter-scripts/`); tests/redisson/redisson_ratelimiter_states.rs runs the Lua
// itself beside the native answers.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::rate::body_settings::{
    expire_keys, gcra_acquire, set_or_update, set_rate, try_set_rate, Cond, ExpireOp, SetRate, TrySet,
};
use crate::core::rate::store::RateStore;
use crate::core::rate::window::unpack;
use crate::core::store::Store;
use crate::core::sync::store::SyncStore;

const T0: i64 = 1_700_000_000_000;
const KEYS: [&[u8]; 5] = [b"r", b"{r}:value", b"{r}:value:c", b"{r}:permits", b"{r}:permits:c"];
const HEAD: AcquireBody = AcquireBody { recompute: Recompute::Sum, expiry: Expiry::KeepAlive };
const OLDEST: AcquireBody = AcquireBody { recompute: Recompute::Zcard, expiry: Expiry::Untouched };

fn five() -> Five<'static> {
    Five::of(&KEYS).unwrap()
}

/// A store at `T0` with limiter `r` as 3.38's `trySetRate` writes it.
fn limiter(rate: i64, ty: &[u8], keep_alive: i64) -> MemoryStore {
    let mut s = MemoryStore::at(T0);
    let (rate, ka) = (rate.to_string(), keep_alive.to_string());
    let argv: [&[u8]; 4] = [rate.as_bytes(), b"1000", ty, ka.as_bytes()];
    assert_eq!(try_set_rate(&mut s, b"r", &argv, TrySet::KeepAlive), Ok(Reply::Int(1)));
    s
}

fn grant(s: &mut MemoryStore, z: &[u8], at: i64, random: &[u8], permits: u32) {
    s.zset_add(z, &pack(random, permits), at as f64);
}

fn value(s: &mut MemoryStore, k: &[u8]) -> Option<Vec<u8>> {
    s.get(k).unwrap()
}

fn members(s: &mut MemoryStore, z: &[u8]) -> Vec<(i64, Vec<u8>, u32)> {
    s.zset_all(z)
        .unwrap()
        .into_iter()
        .map(|(m, t)| (t as i64, unpack(&m).unwrap().0.to_vec(), unpack(&m).unwrap().1))
        .collect()
}

#[test]
fn a_first_acquire_writes_the_rate_then_the_grant_of_argvs_random_bytes() {
    let mut s = limiter(10, b"0", 0);
    assert_eq!(acquire(&mut s, &five(), HEAD, 3, T0, b"0123456789abcdef"), Ok(Reply::Nil));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"7".to_vec()));
    assert_eq!(members(&mut s, b"{r}:permits"), vec![(T0, b"0123456789abcdef".to_vec(), 3)]);
    // No keep-alive, no TTL on the hash: none on the state either.
    assert_eq!(s.pttl(b"{r}:value"), -1);
}

#[test]
fn a_per_client_limiter_uses_the_clients_keys() {
    let mut s = limiter(10, b"1", 0);
    assert_eq!(acquire(&mut s, &five(), HEAD, 2, T0, b"x"), Ok(Reply::Nil));
    assert_eq!(value(&mut s, b"{r}:value:c"), Some(b"8".to_vec()));
    assert_eq!(value(&mut s, b"{r}:value"), None);
}

#[test]
fn a_refusal_waits_for_the_lowest_score_as_luas_doubles_truncate() {
    let mut s = limiter(3, b"0", 0);
    s.set(b"{r}:value", b"0");
    // A score with a fraction (another client's): 3 + 1000 - (T0 + 200 - (T0 + 0.5)).
    s.zset_add(b"{r}:permits", &pack(b"a", 3), T0 as f64 + 0.5);
    assert_eq!(acquire(&mut s, &five(), HEAD, 1, T0 + 200, b"b"), Ok(Reply::Int(803)));
    assert_eq!(members(&mut s, b"{r}:permits").len(), 1);
}

#[test]
fn expired_grants_of_no_permits_stay_where_the_body_adds_nothing_back() {
    let mut s = limiter(10, b"0", 0);
    s.set(b"{r}:value", b"10");
    grant(&mut s, b"{r}:permits", T0 - 5000, b"z", 0);
    assert_eq!(acquire(&mut s, &five(), HEAD, 1, T0, b"n"), Ok(Reply::Nil));
    assert_eq!(members(&mut s, b"{r}:permits").len(), 2, "the 0-permit grant is not removed");
}

#[test]
fn a_pending_release_is_recomputed_by_zcard_before_3_35_and_by_sum_after() {
    // 7 + 4 > 10: `rate - ZCARD` = 10 - 1, or `rate - used` = 10 - 6; then the grant of 1.
    for (body, want) in [(OLDEST, &b"8"[..]), (HEAD, b"3")] {
        let mut s = limiter(10, b"0", 0);
        // 6 permits live in one grant, 4 expired; the value holds a release of 7 (0 + 7).
        s.set(b"{r}:value", b"7");
        grant(&mut s, b"{r}:permits", T0 - 1500, b"old", 4);
        grant(&mut s, b"{r}:permits", T0 - 100, b"new", 6);
        assert_eq!(acquire(&mut s, &five(), body, 1, T0, b"q"), Ok(Reply::Nil));
        assert_eq!(value(&mut s, b"{r}:value"), Some(want.to_vec()), "{body:?}");
    }
}

#[test]
fn a_refusal_of_an_empty_window_fails_in_the_lua_and_writes_nothing() {
    let mut s = limiter(10, b"0", 0);
    s.set(b"{r}:value", b"0");
    assert_eq!(acquire(&mut s, &five(), HEAD, 1, T0, b"x"), Err(Why::Fails));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"0".to_vec()));
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(0));
}

#[test]
fn values_lua_reads_its_own_way_are_left_to_it() {
    for odd in [&b" 3"[..], b"2.5", b"abc", b"9007199254740993"] {
        let mut s = limiter(10, b"0", 0);
        s.set(b"{r}:value", odd);
        grant(&mut s, b"{r}:permits", T0 - 1500, b"old", 1);
        assert_eq!(acquire(&mut s, &five(), HEAD, 1, T0, b"x"), Err(Why::Odd));
        assert_eq!(value(&mut s, b"{r}:value"), Some(odd.to_vec()));
    }
    let mut s = limiter(10, b"0", 0);
    assert_eq!(acquire(&mut s, &five(), HEAD, 11, T0, b"x"), Err(Why::Fails), "the assert on the rate");
}

#[test]
fn the_ttls_follow_the_bodys_release() {
    // 3.38+: a keep-alive sets all three keys' TTL.
    let mut s = limiter(10, b"0", 60_000);
    acquire(&mut s, &five(), HEAD, 1, T0, b"x").unwrap();
    for k in [&b"r"[..], b"{r}:value", b"{r}:permits"] {
        assert_eq!(s.pttl(k), 60_000);
    }
    // 3.17.3-3.37: the hash's TTL only (its keep-alive field unread).
    let mut s = limiter(10, b"0", 60_000);
    s.pexpire_at(b"r", T0 + 5_000);
    let body = AcquireBody { recompute: Recompute::Sum, expiry: Expiry::HashTtl };
    acquire(&mut s, &five(), body, 1, T0, b"x").unwrap();
    assert_eq!(s.pttl(b"{r}:value"), 5_000);
    // 3.17.0-3.17.2: none at all.
    let mut s = limiter(10, b"0", 60_000);
    s.pexpire_at(b"r", T0 + 5_000);
    acquire(&mut s, &five(), OLDEST, 1, T0, b"x").unwrap();
    assert_eq!(s.pttl(b"{r}:value"), -1);
}

#[test]
fn available_replies_strings_unless_it_adds_expired_grants_back_with_no_cap() {
    let mut s = limiter(10, b"0", 0);
    assert_eq!(available(&mut s, &five(), T0), Ok(Reply::Bulk(b"10".to_vec())));
    assert_eq!(available(&mut s, &five(), T0), Ok(Reply::Bulk(b"10".to_vec())));
    // A release's credit counted again when its grant expires: above the rate (Redisson 7329).
    grant(&mut s, b"{r}:permits", T0 - 1500, b"g", 3);
    assert_eq!(available(&mut s, &five(), T0), Ok(Reply::Int(13)));
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(0));
}

#[test]
fn release_adds_up_to_the_rate_and_leaves_the_grants() {
    let mut s = limiter(10, b"0", 0);
    s.set(b"{r}:value", b"7");
    grant(&mut s, b"{r}:permits", T0 - 100, b"g", 3);
    assert_eq!(release(&mut s, &five(), 2), Ok(Reply::Nil));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"9".to_vec()));
    assert_eq!(release(&mut s, &five(), 5), Ok(Reply::Nil));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"10".to_vec()));
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(1));
}

#[test]
fn set_rate_writes_the_settings_and_drops_the_state_its_argv_names() {
    let mut s = limiter(10, b"0", 0);
    s.set(b"{r}:value", b"3");
    s.set(b"{r}:value:c", b"4");
    let argv: [&[u8]; 4] = [b"5", b"2000", b"1", b"0"];
    assert_eq!(set_rate(&mut s, &KEYS, &argv, SetRate::KeepAlive), Ok(Reply::Nil));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"3".to_vec()), "the other type's state stays");
    assert_eq!(value(&mut s, b"{r}:value:c"), None);
    assert_eq!(s.hash_get(b"r", b"type"), Ok(Some(b"1".to_vec())));
}

#[test]
fn set_or_update_keeps_the_state_as_rate_minus_the_grants_left() {
    let mut s = limiter(10, b"0", 0);
    s.set(b"{r}:value", b"1");
    grant(&mut s, b"{r}:permits", T0 - 5000, b"old", 4);
    grant(&mut s, b"{r}:permits", T0 - 100, b"new", 7);
    let argv: [&[u8]; 7] = [b"5", b"1000", b"0", b"0", b"1700000000000", b"1", b"0"];
    assert_eq!(set_or_update(&mut s, &five(), &argv), Ok(Reply::Int(1)));
    assert_eq!(value(&mut s, b"{r}:value"), Some(b"0".to_vec()), "max(0, 5 - 7)");
    assert_eq!(s.zset_len(b"{r}:permits"), Ok(1));
    // Must exist: nothing for an absent limiter.
    let mut s = MemoryStore::at(T0);
    let argv: [&[u8]; 7] = [b"5", b"1000", b"0", b"0", b"1700000000000", b"1", b"1"];
    assert_eq!(set_or_update(&mut s, &five(), &argv), Ok(Reply::Int(0)));
    assert!(!s.exists(b"r"));
}

#[rustfmt::skip]
#[test]
fn expiry_conditions_are_pexpires() {
    // (condition, current expiry, new) -> set?
    let cases: [(Cond, Option<i64>, i64, bool); 10] = [
        (Cond::Always, None, 5, true), (Cond::Nx, None, 5, true), (Cond::Nx, Some(9), 5, false),
        (Cond::Xx, None, 5, false), (Cond::Xx, Some(9), 5, true), (Cond::Gt, None, 5, false),
        (Cond::Gt, Some(4), 5, true), (Cond::Gt, Some(5), 5, false), (Cond::Lt, None, 5, true),
        (Cond::Lt, Some(5), 5, false),
    ];
    for (cond, current, when, set) in cases {
        let mut s = MemoryStore::at(T0);
        s.set(b"k", b"v");
        if let Some(c) = current {
            s.pexpire_at(b"k", T0 + c);
        }
        let got = expire_keys(&mut s, &[b"k", b"absent"], ExpireOp::After(when), cond);
        assert_eq!(got, Ok(Reply::Int(i64::from(set))), "{cond:?} {current:?} {when}");
        let want = if set { T0 + when } else { current.map_or(-1, |c| T0 + c) };
        let at = match s.pttl(b"k") {
            t if t >= 0 => T0 + t,
            t => t,
        };
        assert_eq!(at, want, "{cond:?} {current:?} {when}");
    }
    // A time already past deletes the key, with an event that differs by server: the Lua's.
    let mut s = MemoryStore::at(T0);
    s.set(b"k", b"v");
    assert_eq!(expire_keys(&mut s, &[b"k"], ExpireOp::At(1000), Cond::Always), Err(Why::Odd));
    assert!(s.exists(b"k"));
    s.pexpire_at(b"k", T0 + 50);
    assert_eq!(expire_keys(&mut s, &[b"k", b"absent"], ExpireOp::Persist, Cond::Always), Ok(Reply::Int(1)));
    assert_eq!(s.pttl(b"k"), -1);
    assert!(!s.persist(b"k"));
}

#[test]
fn gcras_body_runs_gcra_with_the_hashs_settings() {
    let mut s = MemoryStore::at(T0);
    for (f, v) in [(&b"maxBurst"[..], &b"4"[..]), (b"rate", b"10"), (b"period", b"0.25")] {
        s.hash_set(b"{g}:config", f, v);
    }
    let Ok(Reply::Array(first)) = gcra_acquire(&mut s, b"{g}:config", b"g", b"1") else { panic!() };
    assert_eq!(first[..3], [Reply::Int(0), Reply::Int(5), Reply::Int(4)]);
    assert_eq!(gcra_acquire(&mut s, b"{g}:config", b"g", b"1.0"), Err(Why::Odd));
    assert_eq!(gcra_acquire(&mut s, b"{g}:config", b"g", b"0"), Err(Why::Fails));
    assert_eq!(gcra_acquire(&mut s, b"{g}:none", b"g", b"1"), Err(Why::Fails));
    s.hash_set(b"{g}:config", b"period", b"6e1");
    assert_eq!(gcra_acquire(&mut s, b"{g}:config", b"g", b"1"), Err(Why::Odd));
}
