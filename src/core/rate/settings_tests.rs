// Test code only (never in the module): an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::rate::limiter::tests::{fresh, grants, limiter, overall, take, value, T0};
use crate::core::rate::limiter::{acquire, available, config, Acquire, Mode};
use crate::core::store::Store;

#[test]
fn try_set_rate_writes_redissons_four_fields_once() {
    let mut s = MemoryStore::at(T0);
    let set = Settings { mode: Mode::PerClient, rate: 10, interval: 1_000, keep_alive: 5_000 };
    assert_eq!(try_set_rate(&mut s, b"r", &set), Ok(true));
    let mut h = s.hash("r");
    h.sort();
    let want = [("interval", "1000"), ("keepAliveTime", "5000"), ("rate", "10"), ("type", "1")];
    assert_eq!(h, want.map(|(a, b)| (a.to_string(), b.to_string())));
    assert_eq!(s.pttl(b"r"), 5_000);
    assert_eq!(try_set_rate(&mut s, b"r", &overall(3, 10)), Ok(false));
    assert_eq!(config(&mut s, b"r").unwrap().rate, 10);
}

#[test]
fn a_lowered_rate_is_not_overcome_by_expiries_it_already_counted() {
    let mut s = limiter(10, 1_000);
    for i in 0..8 {
        take(&mut s, 1, T0 + i);
    }
    let lower = Settings { rate: 5, ..overall(5, 1_000) };
    assert_eq!(set_rate(&mut s, b"r", &lower, None, true, false, T0 + 10), Ok(true));
    assert_eq!(value(&mut s, "{r}:value"), Some(0));
    // Three of the eight leave the window: five are still live, the rate is five.
    assert_eq!(available(&mut s, b"r", None, T0 + 1_002), Ok(0));
    assert!(matches!(take(&mut s, 1, T0 + 1_002), Acquire::Wait(_)));
    // Six gone, two live: three of the five.
    assert_eq!(available(&mut s, b"r", None, T0 + 1_005), Ok(3));
}

#[test]
fn set_rate_resets_keeps_or_changes_type_as_redissons_set_or_update() {
    let mut s = limiter(10, 1_000);
    take(&mut s, 4, T0);
    assert_eq!(set_rate(&mut s, b"r", &overall(20, 1_000), None, true, false, T0 + 1), Ok(true));
    assert_eq!(value(&mut s, "{r}:value"), Some(16), "KEEPSTATE: the window stays, the value is recomputed");
    assert_eq!(grants(&mut s, "{r}:permits"), [(T0, 4)]);
    assert_eq!(set_rate(&mut s, b"r", &overall(20, 1_000), None, false, false, T0 + 2), Ok(true));
    assert_eq!(value(&mut s, "{r}:value"), None);
    assert!(grants(&mut s, "{r}:permits").is_empty());
    take(&mut s, 1, T0 + 3);
    acquire(&mut s, b"r", Some(b"c"), 1, T0 + 3, fresh(), false).unwrap();
    let per = Settings { mode: Mode::PerClient, ..overall(20, 1_000) };
    assert_eq!(set_rate(&mut s, b"r", &per, Some(b"c"), true, false, T0 + 4), Ok(true));
    assert!(
        s.get(b"{r}:value").unwrap().is_none() && s.get(b"{r}:value:c").unwrap().is_none(),
        "a new type drops both"
    );
    assert_eq!(set_rate(&mut s, b"none", &per, None, false, true, T0), Ok(false), "XX on an absent limiter");
    assert!(!s.exists(b"none"));
}
