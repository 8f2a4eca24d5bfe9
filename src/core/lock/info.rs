//! `LOCK.INFO`: a read-only picture of one lock, built from its keys and the parked clients.
//!
//! The kind is read from the keyspace the way Redisson lays it out: a hash with a `mode` field
//! is a read-write lock; a hash next to a fair queue or deadline zset is a fair lock; any other
//! hash is a reentrant lock; no hash but a queue is a free fair lock with waiters.

use crate::core::access::{self, KeyUse};
use crate::core::names;
use crate::core::names::{MODE, WRITE};
use crate::core::store::MAX_HOLDS_PER_FIELD;
use crate::core::{parse_i64, permit, Reply, Result, Store};

/// A client parked with `BLOCK` on the lock, as the blocking registry reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Parked {
    pub client: u64,
    /// `lock`, `read`, `write` or `fair`.
    pub request: &'static str,
    /// The owner it asked for.
    pub owner: Vec<u8>,
    pub waited_ms: i64,
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn field(name: &str, value: Reply) -> (Reply, Reply) {
    (bulk(name), value)
}

/// How many items `LOCK.INFO` lists per array without `COUNT`.
pub const DEFAULT_COUNT: usize = 100;

/// The clients parked on the lock: the first few, and how many there are.
#[derive(Clone, Copy, Debug, Default)]
pub struct ParkedList<'a> {
    pub first: &'a [Parked],
    pub total: usize,
}

/// Builds the `LOCK.INFO` reply for `key`. Reads only, and at most `count` of each list
/// (holders, queue, parked) and `count` read-hold TTLs in all, with their totals: the work
/// and the reply are O(count) whatever the keyspace holds (a planted hash of a million read
/// holds, a queue of 40,000 waiters).
pub fn info<S: Store>(s: &mut S, key: &[u8], count: usize, parked: ParkedList) -> Result<Reply> {
    permit(s, || access::lock_info(key))?;
    let queue_key = names::fair_queue(key);
    let zset_key = names::fair_timeouts(key);
    // Every key is type-checked first (O(1) each).
    let fields = s.hash_len(key)?;
    let queue_total = s.list_len(&queue_key)?;
    let deadlines_total = s.zset_len(&zset_key)?;
    let token = match s.get(&names::token(key))? {
        None => Reply::Nil,
        Some(v) => parse_i64(&v).map_or(Reply::Bulk(v), Reply::Int),
    };
    let mode = s.hash_get(key, MODE)?;
    let fair = queue_total > 0 || deadlines_total > 0;
    let kind = match (fields == 0, &mode, fair) {
        (false, Some(_), _) => "read-write",
        (_, None, true) => "fair",
        (false, None, false) => "reentrant",
        _ => "none",
    };
    let holders_total = fields - usize::from(mode.is_some());
    // One more than wanted, in case the scan meets the mode field among them.
    let entries = s.hash_entries_first(key, count.saturating_add(1))?;
    let mut read_hold_budget = count;
    let mut holders = Vec::new();
    for (f, v) in entries.iter().filter(|(f, _)| f != MODE).take(count) {
        let count = parse_i64(v).map_or(Reply::Bulk(v.clone()), Reply::Int);
        let mut h = Vec::new();
        if mode.is_some() {
            let write = mode.as_deref() == Some(WRITE) && f.ends_with(b":write");
            let owner = if write { &f[..f.len() - 6] } else { &f[..] };
            h.push(field("owner", Reply::Bulk(owner.to_vec())));
            h.push(field("kind", bulk(if write { "write" } else { "read" })));
            h.push(field("count", count));
            if !write {
                let n = parse_i64(v).unwrap_or(0).clamp(0, MAX_HOLDS_PER_FIELD).min(read_hold_budget as i64);
                read_hold_budget -= n as usize;
                permit(s, || (1..=n).map(|i| access::read_hold(key, f, i, KeyUse::Read)).collect())?;
                let ttls = (1..=n).map(|i| Reply::Int(s.pttl(&names::read_timeout(key, f, i)))).collect();
                h.push(field("read_holds_pttl", Reply::Array(ttls)));
            }
        } else {
            h.push(field("owner", Reply::Bulk(f.clone())));
            h.push(field("count", count));
        }
        holders.push(Reply::Map(h));
    }
    let now = s.now();
    let mut waiting = Vec::new();
    // Each deadline by its own lookup: O(1) per waiter shown, not a walk of the zset.
    for owner in s.list_first(&queue_key, count)? {
        let deadline = s.zset_score(&zset_key, &owner)?.map(|d| d as i64);
        waiting.push(Reply::Map(vec![
            field("owner", Reply::Bulk(owner)),
            field("deadline_in_ms", deadline.map_or(Reply::Nil, |d| Reply::Int(d - now))),
        ]));
    }
    let parked_shown = parked
        .first
        .iter()
        .take(count)
        .map(|p| {
            Reply::Map(vec![
                field("client", Reply::Int(p.client as i64)),
                field("request", bulk(p.request)),
                field("owner", Reply::Bulk(p.owner.clone())),
                field("waited_ms", Reply::Int(p.waited_ms)),
            ])
        })
        .collect();
    let total = |n: usize| Reply::Int(n as i64);
    Ok(Reply::Map(vec![
        field("kind", bulk(kind)),
        field("mode", mode.map_or(Reply::Nil, Reply::Bulk)),
        field("pttl", Reply::Int(s.pttl(key))),
        field("holders_total", total(holders_total)),
        field("holders", Reply::Array(holders)),
        field("queue_total", total(queue_total)),
        field("queue", Reply::Array(waiting)),
        field("parked_total", total(parked.total)),
        field("parked", Reply::Array(parked_shown)),
        field("token", token),
    ]))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::{MemoryStore, Value};
    use std::collections::BTreeMap;

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn a_missing_lock_is_of_kind_none_with_nil_mode_and_token() {
        let mut s = MemoryStore::at(1000);
        let r = info(&mut s, b"l", DEFAULT_COUNT, ParkedList::default()).unwrap();
        assert_eq!(r.field("kind"), &bulk("none"));
        assert_eq!(r.field("mode"), &Reply::Nil);
        assert_eq!(r.field("pttl"), &Reply::Int(-2));
        assert_eq!(r.field("holders"), &Reply::Array(vec![]));
        assert_eq!(r.field("token"), &Reply::Nil);
    }

    #[test]
    fn a_reentered_lock_reports_its_owner_count_pttl_and_token() {
        let mut s = MemoryStore::at(1000);
        s.hash_set(b"l", b"o1", b"2");
        s.pexpire_at(b"l", 6000);
        s.incr(&names::token(b"l")).unwrap();
        let parked = [Parked { client: 7, request: "lock", owner: b("o2"), waited_ms: 40 }];
        let r = info(&mut s, b"l", DEFAULT_COUNT, ParkedList { first: &parked, total: 1 }).unwrap();
        assert_eq!(r.field("kind"), &bulk("reentrant"));
        assert_eq!(r.field("pttl"), &Reply::Int(5000));
        let holder = Reply::Map(vec![field("owner", Reply::Bulk(b("o1"))), field("count", Reply::Int(2))]);
        assert_eq!(r.field("holders"), &Reply::Array(vec![holder]));
        assert_eq!(r.field("token"), &Reply::Int(1));
        let Reply::Array(p) = r.field("parked") else { panic!() };
        assert_eq!(p[0].field("client"), &Reply::Int(7));
        assert_eq!(p[0].field("waited_ms"), &Reply::Int(40));
    }

    #[test]
    fn a_write_lock_with_read_holds_lists_the_writer_and_each_read_holds_ttl() {
        let mut s = MemoryStore::at(1000);
        s.hash_set(b"l", b"mode", b"write");
        s.hash_set(b"l", b"o1:write", b"1");
        s.hash_set(b"l", b"o1", b"2");
        s.read_hold_set(b"l", b"o1", 1, 3000);
        s.read_hold_set(b"l", b"o1", 2, 4000);
        let r = info(&mut s, b"l", DEFAULT_COUNT, ParkedList::default()).unwrap();
        assert_eq!(r.field("kind"), &bulk("read-write"));
        assert_eq!(r.field("mode"), &Reply::Bulk(b("write")));
        let Reply::Array(h) = r.field("holders") else { panic!() };
        let reader = h.iter().find(|h| h.field("kind") == &bulk("read")).unwrap();
        assert_eq!(reader.field("read_holds_pttl"), &Reply::Array(vec![Reply::Int(2000), Reply::Int(3000)]));
        let writer = h.iter().find(|h| h.field("kind") == &bulk("write")).unwrap();
        assert_eq!(writer.field("owner"), &Reply::Bulk(b("o1")));
    }

    #[test]
    fn a_free_fair_lock_with_waiters_lists_the_queue_in_order_with_relative_deadlines() {
        let mut s = MemoryStore::at(1000);
        s.data.insert(names::fair_queue(b"l"), (Value::List(vec![b("w2"), b("w1")]), None));
        let z: BTreeMap<Vec<u8>, f64> = [(b("w1"), 9000.0), (b("w2"), 4000.0)].into_iter().collect();
        s.data.insert(names::fair_timeouts(b"l"), (Value::Zset(z), None));
        let r = info(&mut s, b"l", DEFAULT_COUNT, ParkedList::default()).unwrap();
        assert_eq!(r.field("kind"), &bulk("fair"));
        let Reply::Array(q) = r.field("queue") else { panic!() };
        assert_eq!(q[0].field("owner"), &Reply::Bulk(b("w2")));
        assert_eq!(q[0].field("deadline_in_ms"), &Reply::Int(3000));
        assert_eq!(q[1].field("deadline_in_ms"), &Reply::Int(8000));
    }

    #[test]
    fn a_planted_million_read_holds_are_listed_only_up_to_count() {
        let mut s = MemoryStore::at(1000);
        s.hash_set(b"l", b"mode", b"read");
        s.hash_set(b"l", b"f0", b"1048576");
        s.hash_set(b"l", b"f1", b"1048576");
        let r = info(&mut s, b"l", 10, ParkedList::default()).unwrap();
        assert_eq!(r.field("holders_total"), &Reply::Int(2));
        let Reply::Array(h) = r.field("holders") else { panic!() };
        let shown: usize = h
            .iter()
            .map(|h| match h.field("read_holds_pttl") {
                Reply::Array(a) => a.len(),
                _ => panic!(),
            })
            .sum();
        assert_eq!(shown, 10, "10 read-hold TTLs in all, not 2 million");
        assert_eq!(h[0].field("count"), &Reply::Int(1_048_576), "the count is the real one");
    }

    #[test]
    fn a_long_queue_and_many_holders_and_parked_clients_are_cut_at_count_with_totals() {
        let mut s = MemoryStore::at(1000);
        for i in 0..50 {
            s.hash_set(b"l", format!("o{i}").as_bytes(), b"1");
        }
        let waiters: Vec<Vec<u8>> = (0..1000).map(|i| format!("w{i}").into_bytes()).collect();
        let z: BTreeMap<Vec<u8>, f64> =
            waiters.iter().enumerate().map(|(i, w)| (w.clone(), 2000.0 + i as f64)).collect();
        s.data.insert(names::fair_queue(b"l"), (Value::List(waiters), None));
        s.data.insert(names::fair_timeouts(b"l"), (Value::Zset(z), None));
        let parked: Vec<Parked> =
            (0..20).map(|i| Parked { client: i, request: "fair", owner: b("p"), waited_ms: 1 }).collect();
        let r = info(&mut s, b"l", 5, ParkedList { first: &parked, total: 20 }).unwrap();
        let len = |name| match r.field(name) {
            Reply::Array(a) => a.len(),
            _ => panic!(),
        };
        assert_eq!((len("holders"), len("queue"), len("parked")), (5, 5, 5));
        assert_eq!(r.field("holders_total"), &Reply::Int(50));
        assert_eq!(r.field("queue_total"), &Reply::Int(1000));
        assert_eq!(r.field("parked_total"), &Reply::Int(20));
        let Reply::Array(q) = r.field("queue") else { panic!() };
        assert_eq!(q[4].field("owner"), &Reply::Bulk(b("w4")));
        assert_eq!(q[4].field("deadline_in_ms"), &Reply::Int(1004));
    }

    #[test]
    fn a_lock_key_of_another_type_is_a_wrongtype_error() {
        let mut s = MemoryStore::at(1000);
        s.set_px_at(b"l", b"x", 5000);
        assert!(info(&mut s, b"l", DEFAULT_COUNT, ParkedList::default()).is_err());
    }
}
