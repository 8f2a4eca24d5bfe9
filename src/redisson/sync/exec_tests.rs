use super::*;
use crate::core::memory::MemoryStore;
use crate::core::store::Store;
use crate::redisson::table::Publish;

const NOW: i64 = 1_000_000;
const ID: [u8; ID_LEN] = [7; ID_LEN];

fn run(s: &mut MemoryStore, kind: SyncKind, args: &[&[u8]]) -> Option<Reply> {
    answer(s, kind, args).ok().flatten()
}

#[test]
fn the_replies_are_the_bodies_own() {
    let mut s = MemoryStore::at(NOW);
    let drain = SyncKind::SemDrain;
    assert_eq!(run(&mut s, drain, &[b"s"]), Some(Reply::Int(0)), "absent: the integer 0");
    s.set(b"s", b"5");
    assert_eq!(run(&mut s, drain, &[b"s"]), Some(Reply::Bulk(b"5".to_vec())), "the old value as a bulk string");
    let release = SyncKind::SemRelease { publish: Publish::Arg(2) };
    assert_eq!(run(&mut s, release, &[b"s", b"2"]), Some(Reply::Nil), "release returns nothing");
    let available = SyncKind::PAvailable { publish: Publish::Arg(2) };
    assert_eq!(run(&mut s, available, &[b"s"]), Some(Reply::Bulk(b"2".to_vec())), "nothing reclaimed: GET");
    s.zset_add(b"{s}:timeout", &ID, (NOW - 5) as f64);
    assert_eq!(run(&mut s, available, &[b"s"]), Some(Reply::Int(3)), "reclaimed: the INCRBY result");
}

#[test]
fn the_expirable_acquire_replies_its_id_ok_or_the_lowest_lease_end() {
    let mut s = MemoryStore::at(NOW);
    let one = SyncKind::PAcquire { publish: Publish::Fixed, ids: false };
    let until = (NOW + 500).to_string();
    assert_eq!(run(&mut s, one, &[b"p", b"1", until.as_bytes(), &ID]), Some(Reply::Nil), "absent: nil");
    s.set(b"p", b"1");
    assert_eq!(run(&mut s, one, &[b"p", b"1", until.as_bytes(), &ID]), Some(Reply::Bulk(ID.to_vec())));
    let other = [8u8; ID_LEN];
    let want = format!(":{}", NOW + 500).into_bytes();
    assert_eq!(run(&mut s, one, &[b"p", b"1", until.as_bytes(), &other]), Some(Reply::Bulk(want)));
    // A score the server would format otherwise: left to Lua, nothing written.
    s.zset_add(b"{p}:timeout", &other, 1.5);
    assert_eq!(run(&mut s, one, &[b"p", b"1", until.as_bytes(), &other]), None);
}

#[test]
fn counts_beyond_what_lua_formats_exactly_stay_lua() {
    let mut s = MemoryStore::at(NOW);
    s.set(b"s", b"100000000000000");
    assert_eq!(run(&mut s, SyncKind::SemAdd { publish: Publish::Fixed }, &[b"s", b"1"]), None);
    assert_eq!(run(&mut s, SyncKind::SemRelease { publish: Publish::Fixed }, &[b"s", b"1"]), None);
    assert_eq!(s.get(b"s"), Ok(Some(b"100000000000000".to_vec())), "nothing written");
    s.set(b"s", b" 3");
    assert!(answer(&mut s, SyncKind::SemAcquire, &[b"s", b"1"]).is_err(), "Lua's tonumber reads it: Lua answers");
}

#[test]
fn the_old_set_permits_bodies_publish_an_unchanged_total_the_new_one_does_not() {
    for (exact, writes) in [(false, true), (true, false)] {
        let mut s = MemoryStore::at(NOW);
        s.set(b"p", b"3");
        let k = SyncKind::PSetPermits { publish: Publish::Arg(2), exact };
        assert_eq!(run(&mut s, k, &[b"p", b"3"]), Some(Reply::Nil));
        assert_eq!(!s.published.is_empty(), writes, "exact: {exact}");
    }
}

#[test]
fn a_count_down_of_an_absent_latch_leaves_no_key() {
    let mut s = MemoryStore::at(NOW);
    assert_eq!(run(&mut s, SyncKind::CountDown { publish: Publish::Fixed }, &[b"l"]), Some(Reply::Nil));
    assert!(!s.exists(b"l"));
}

#[test]
fn drain_and_try_set_answer_on_any_string_as_the_lua_does() {
    for odd in [&b" 3"[..], b"2.0", b"abc"] {
        let mut s = MemoryStore::at(NOW);
        s.set(b"s", odd);
        let try_set = SyncKind::TrySet { publish: Publish::Arg(2), old: false };
        assert_eq!(run(&mut s, try_set, &[b"s", b"4"]), Some(Reply::Int(0)), "a value is there: refused");
        assert_eq!(run(&mut s, SyncKind::SemTrySetTtl, &[b"s", b"4", b"LEASE", b"1000"]), Some(Reply::Int(0)));
        assert!(s.published.is_empty());
        assert_eq!(run(&mut s, SyncKind::SemDrain, &[b"s"]), Some(Reply::Bulk(odd.to_vec())), "replied as it is");
        assert_eq!(s.get(b"s"), Ok(Some(b"0".to_vec())));
    }
    let mut s = MemoryStore::at(NOW);
    s.hash_set(b"s", b"f", b"1");
    assert!(answer(&mut s, SyncKind::SemDrain, &[b"s"]).is_err(), "another type: the script's WRONGTYPE");
}

#[test]
fn a_value_lua_reads_as_a_number_is_a_script_state_anything_else_an_error() {
    let mut s = MemoryStore::at(NOW);
    for (value, cause) in [(&b" 3"[..], Cause::ScriptState), (b"2.0", Cause::ScriptState), (b"abc", Cause::Error)] {
        s.set(b"s", value);
        let e = answer(&mut s, SyncKind::SemAcquire, &[b"s", b"1"]).expect_err("not an integer");
        assert_eq!(cause_of(&mut s, b"s", &e), cause, "{:?}", String::from_utf8_lossy(value));
    }
    s.del(b"s");
    s.hash_set(b"s", b"f", b"1");
    let e = answer(&mut s, SyncKind::SemAcquire, &[b"s", b"1"]).expect_err("another type");
    assert_eq!(cause_of(&mut s, b"s", &e), Cause::Error);
}
