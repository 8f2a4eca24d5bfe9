//! The script-only variants and reply conversions, on the in-memory store.

use super::*;
use crate::core::lock::rwlock::Side;
use crate::core::memory::MemoryStore;
use crate::redisson::table::Publish;

const NOW: i64 = 1_000_000;

#[test]
fn lua_numbers_are_read_as_lua_reads_them_or_left_to_lua() {
    assert!(matches!(lua_number(b"3"), LuaNumber::Int(3)));
    assert!(matches!(lua_number(b"-2"), LuaNumber::Int(-2)));
    for v in [&b"read"[..], b"write", b"", b"abc:def"] {
        assert!(matches!(lua_number(v), LuaNumber::NotANumber), "{v:?}");
    }
    for v in [&b" 3"[..], b"3.0", b"0x3", b"1e2", b"inf", b"-Infinity", b"nan", b"03"] {
        assert!(matches!(lua_number(v), LuaNumber::Unsure), "{v:?}");
    }
}

fn rw(s: &mut MemoryStore, fields: &[(&str, &str)]) {
    for (f, v) in fields {
        s.hash_set(b"l", f.as_bytes(), v.as_bytes());
    }
}

#[test]
fn renew_all_renews_every_readers_holds_when_the_owner_reads() {
    let mut s = MemoryStore::at(NOW);
    rw(&mut s, &[("mode", "read"), ("a", "2"), ("b", "1")]);
    for t in ["{l}:a:rwlock_timeout:1", "{l}:a:rwlock_timeout:2", "{l}:b:rwlock_timeout:1"] {
        s.set_px_at(t.as_bytes(), b"1", NOW + 10);
    }
    assert_eq!(renew_all(&mut s, b"l", b"a", b"500", false), Ok(Some(1)));
    for t in ["l", "{l}:a:rwlock_timeout:1", "{l}:a:rwlock_timeout:2", "{l}:b:rwlock_timeout:1"] {
        assert_eq!(s.pttl(t.as_bytes()), 500, "{t}");
    }
    // Not a reader: nothing renewed.
    assert_eq!(renew_all(&mut s, b"l", b"c", b"900", false), Ok(Some(0)));
    assert_eq!(s.pttl(b"l"), 500);
}

#[test]
fn the_shadowed_renewal_body_is_left_to_lua_once_a_count_reaches_two() {
    let mut s = MemoryStore::at(NOW);
    rw(&mut s, &[("mode", "read"), ("a", "1"), ("b", "1")]);
    assert_eq!(renew_all(&mut s, b"l", b"a", b"500", true), Ok(Some(1)));
    rw(&mut s, &[("b", "2")]);
    assert_eq!(renew_all(&mut s, b"l", b"a", b"700", true), Ok(None));
    // Nothing written before the decision.
    assert_eq!(s.pttl(b"l"), 500);
    rw(&mut s, &[("b", "1.5")]);
    assert_eq!(renew_all(&mut s, b"l", b"a", b"700", false), Ok(None));
}

#[test]
fn the_old_purge_is_judged_before_anything_runs() {
    let mut s = MemoryStore::at(NOW);
    let (q, z) = (b"redisson_lock_queue:{l}", b"redisson_lock_timeout:{l}");
    assert_eq!(strict_purge(&mut s, b"l"), Ok(Some(vec![])));
    for (w, at) in [("x", NOW - 100), ("y", NOW + 1000)] {
        s.list_push_tail(q, w.as_bytes());
        s.zset_add(z, w.as_bytes(), at as f64);
    }
    assert_eq!(strict_purge(&mut s, b"l"), Ok(Some(vec![b"x".to_vec()])));
    // A stale head, then one without a deadline: the old scripts raise a Lua error there.
    s.list_pop_head(q);
    s.list_pop_head(q);
    s.list_push_tail(q, b"x");
    s.list_push_tail(q, b"nodeadline");
    assert_eq!(strict_purge(&mut s, b"l"), Ok(None));
    // A deadline too close to now to call.
    let mut s = MemoryStore::at(NOW);
    s.list_push_tail(q, b"x");
    s.zset_add(z, b"x", (NOW + 2) as f64);
    assert_eq!(strict_purge(&mut s, b"l"), Ok(None));
}

#[test]
fn a_tail_waiter_without_a_deadline_is_left_to_lua() {
    let mut s = MemoryStore::at(NOW);
    let (q, z) = (b"redisson_lock_queue:{l}", b"redisson_lock_timeout:{l}");
    assert_eq!(tail_has_deadline(&mut s, b"l", b"o"), Ok(true));
    s.list_push_tail(q, b"t");
    assert_eq!(tail_has_deadline(&mut s, b"l", b"o"), Ok(false));
    assert_eq!(tail_has_deadline(&mut s, b"l", b"t"), Ok(true));
    s.zset_add(z, b"t", 5.0);
    assert_eq!(tail_has_deadline(&mut s, b"l", b"o"), Ok(true));
}

#[test]
fn replies_are_converted_to_each_scripts_own() {
    let seen = Seen::default();
    let fenced = Kind::LockAcquireFenced { token_reply: false };
    assert_eq!(convert(fenced, &seen, Reply::Array(vec![Reply::Int(-1), Reply::Int(7)])), Reply::Nil);
    assert_eq!(convert(fenced, &seen, Reply::Array(vec![Reply::Int(900), Reply::Int(-1)])), Reply::Int(900));
    // Refused by a lock that has no expiry.
    assert_eq!(convert(fenced, &seen, Reply::Array(vec![Reply::Int(-1), Reply::Int(-1)])), Reply::Int(-1));
    let token = Kind::LockAcquireFenced { token_reply: true };
    let r = Reply::Array(vec![Reply::Int(-1), Reply::Int(7)]);
    assert_eq!(convert(token, &seen, r.clone()), r);
    assert_eq!(convert(Kind::LockRenew { task: true }, &seen, Reply::Int(1)), Reply::Array(vec![Reply::Int(1)]));
    assert_eq!(convert(Kind::LockRenew { task: false }, &seen, Reply::Int(1)), Reply::Int(1));
    assert_eq!(convert(Kind::FairCancel, &seen, Reply::Int(1)), Reply::Nil);
    let old_unlock = Kind::RwUnlockWrite { publish: Publish::Fixed, latch: false, free_is_one: true };
    assert_eq!(convert(old_unlock, &seen, Reply::Nil), Reply::Nil);
    let free = Seen { rw_free: true, ..Seen::default() };
    assert_eq!(convert(old_unlock, &free, Reply::Nil), Reply::Int(1));
    let queued = Seen { queued_reply: Some(-40), ..Seen::default() };
    assert_eq!(convert(Kind::FairAcquire(FairVersion::Old), &queued, Reply::Int(300)), Reply::Int(-40));
    assert_eq!(convert(Kind::FairAcquire(FairVersion::Old), &queued, Reply::Nil), Reply::Nil);
    let force = Kind::RwForceUnlock { side: Side::Read, publish: Publish::Fixed };
    assert_eq!(convert(force, &free, Reply::Int(0)), Reply::Int(0));
}

#[test]
fn an_unlock_latch_is_plain_only_when_absent_or_zero_or_one() {
    let mut s = MemoryStore::at(NOW);
    assert_eq!(latch_plain(&mut s, b"l", b"r"), Ok(true));
    for (v, plain) in [("1", true), ("0", true), ("2", false), (" 1", false), ("x", false)] {
        s.set_px_at(b"redisson_unlock_latch:{l}:r", v.as_bytes(), NOW + 100);
        assert_eq!(latch_plain(&mut s, b"l", b"r"), Ok(plain), "{v}");
    }
}
