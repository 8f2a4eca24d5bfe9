//! `LOCK.INFO`: a read-only picture of one lock, built from its keys and the parked clients.
//!
//! The kind is read from the keyspace the way Redisson lays it out: a hash with a `mode` field
//! is a read-write lock; a hash next to a fair queue or deadline zset is a fair lock; any other
//! hash is a reentrant lock; no hash but a queue is a free fair lock with waiters.

use super::rwlock::{MAX_HOLDS_PER_FIELD, MODE, WRITE};
use super::{parse_i64, Reply, Result, Store};
use crate::names;

/// A client parked with `BLOCK` on the lock, as the blocking registry reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Parked {
    pub client: u64,
    /// `lock`, `read` or `write`.
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

/// Builds the `LOCK.INFO` reply for `key`. Reads only.
pub fn info<S: Store>(s: &mut S, key: &[u8], parked: &[Parked]) -> Result<Reply> {
    let queue_key = names::fair_queue(key);
    let zset_key = names::fair_timeouts(key);
    let entries = s.hash_entries(key)?;
    let queue = s.list_all(&queue_key)?;
    let deadlines = s.zset_all(&zset_key)?;
    let token = match s.get(&names::token(key))? {
        None => Reply::Nil,
        Some(v) => parse_i64(&v).map_or(Reply::Bulk(v), Reply::Int),
    };
    let mode = entries.iter().find(|(f, _)| f == MODE).map(|(_, v)| v.clone());
    let fair = !queue.is_empty() || !deadlines.is_empty();
    let kind = match (entries.is_empty(), &mode, fair) {
        (false, Some(_), _) => "read-write",
        (_, None, true) => "fair",
        (false, None, false) => "reentrant",
        _ => "none",
    };
    let mut holders = Vec::new();
    for (f, v) in &entries {
        if f == MODE {
            continue;
        }
        let count = parse_i64(v).map_or(Reply::Bulk(v.clone()), Reply::Int);
        let mut h = Vec::new();
        if mode.is_some() {
            let write = mode.as_deref() == Some(WRITE) && f.ends_with(b":write");
            let owner = if write { &f[..f.len() - 6] } else { &f[..] };
            h.push(field("owner", Reply::Bulk(owner.to_vec())));
            h.push(field("kind", bulk(if write { "write" } else { "read" })));
            h.push(field("count", count));
            if !write {
                let n = parse_i64(v).unwrap_or(0).clamp(0, MAX_HOLDS_PER_FIELD);
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
    let waiting = queue
        .iter()
        .map(|owner| {
            let deadline = deadlines.iter().find(|(m, _)| m == owner).map(|(_, d)| *d as i64);
            Reply::Map(vec![
                field("owner", Reply::Bulk(owner.clone())),
                field("deadline_in_ms", deadline.map_or(Reply::Nil, |d| Reply::Int(d - now))),
            ])
        })
        .collect();
    let parked = parked
        .iter()
        .map(|p| {
            Reply::Map(vec![
                field("client", Reply::Int(p.client as i64)),
                field("request", bulk(p.request)),
                field("owner", Reply::Bulk(p.owner.clone())),
                field("waited_ms", Reply::Int(p.waited_ms)),
            ])
        })
        .collect();
    Ok(Reply::Map(vec![
        field("kind", bulk(kind)),
        field("mode", mode.map_or(Reply::Nil, Reply::Bulk)),
        field("pttl", Reply::Int(s.pttl(key))),
        field("holders", Reply::Array(holders)),
        field("queue", Reply::Array(waiting)),
        field("parked", Reply::Array(parked)),
        field("token", token),
    ]))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::{MemoryStore, Value};
    use std::collections::BTreeMap;

    fn get<'a>(r: &'a Reply, name: &str) -> &'a Reply {
        match r {
            Reply::Map(m) => &m.iter().find(|(k, _)| *k == bulk(name)).expect("field").1,
            _ => panic!("not a map: {r:?}"),
        }
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn a_missing_lock_is_of_kind_none_with_nil_mode_and_token() {
        let mut s = MemoryStore::at(1000);
        let r = info(&mut s, b"l", &[]).unwrap();
        assert_eq!(get(&r, "kind"), &bulk("none"));
        assert_eq!(get(&r, "mode"), &Reply::Nil);
        assert_eq!(get(&r, "pttl"), &Reply::Int(-2));
        assert_eq!(get(&r, "holders"), &Reply::Array(vec![]));
        assert_eq!(get(&r, "token"), &Reply::Nil);
    }

    #[test]
    fn a_reentered_lock_reports_its_owner_count_pttl_and_token() {
        let mut s = MemoryStore::at(1000);
        s.hash_set(b"l", b"o1", b"2");
        s.pexpire_at(b"l", 6000);
        s.incr(&names::token(b"l")).unwrap();
        let parked = [Parked { client: 7, request: "lock", owner: b("o2"), waited_ms: 40 }];
        let r = info(&mut s, b"l", &parked).unwrap();
        assert_eq!(get(&r, "kind"), &bulk("reentrant"));
        assert_eq!(get(&r, "pttl"), &Reply::Int(5000));
        let holder = Reply::Map(vec![field("owner", Reply::Bulk(b("o1"))), field("count", Reply::Int(2))]);
        assert_eq!(get(&r, "holders"), &Reply::Array(vec![holder]));
        assert_eq!(get(&r, "token"), &Reply::Int(1));
        let Reply::Array(p) = get(&r, "parked") else { panic!() };
        assert_eq!(get(&p[0], "client"), &Reply::Int(7));
        assert_eq!(get(&p[0], "waited_ms"), &Reply::Int(40));
    }

    #[test]
    fn a_write_lock_with_read_holds_lists_the_writer_and_each_read_holds_ttl() {
        let mut s = MemoryStore::at(1000);
        s.hash_set(b"l", b"mode", b"write");
        s.hash_set(b"l", b"o1:write", b"1");
        s.hash_set(b"l", b"o1", b"2");
        s.read_hold_set(b"l", b"o1", 1, 3000);
        s.read_hold_set(b"l", b"o1", 2, 4000);
        let r = info(&mut s, b"l", &[]).unwrap();
        assert_eq!(get(&r, "kind"), &bulk("read-write"));
        assert_eq!(get(&r, "mode"), &Reply::Bulk(b("write")));
        let Reply::Array(h) = get(&r, "holders") else { panic!() };
        let reader = h.iter().find(|h| get(h, "kind") == &bulk("read")).unwrap();
        assert_eq!(get(reader, "read_holds_pttl"), &Reply::Array(vec![Reply::Int(2000), Reply::Int(3000)]));
        let writer = h.iter().find(|h| get(h, "kind") == &bulk("write")).unwrap();
        assert_eq!(get(writer, "owner"), &Reply::Bulk(b("o1")));
    }

    #[test]
    fn a_free_fair_lock_with_waiters_lists_the_queue_in_order_with_relative_deadlines() {
        let mut s = MemoryStore::at(1000);
        s.data.insert(names::fair_queue(b"l"), (Value::List(vec![b("w2"), b("w1")]), None));
        let z: BTreeMap<Vec<u8>, f64> = [(b("w1"), 9000.0), (b("w2"), 4000.0)].into_iter().collect();
        s.data.insert(names::fair_timeouts(b"l"), (Value::Zset(z), None));
        let r = info(&mut s, b"l", &[]).unwrap();
        assert_eq!(get(&r, "kind"), &bulk("fair"));
        let Reply::Array(q) = get(&r, "queue") else { panic!() };
        assert_eq!(get(&q[0], "owner"), &Reply::Bulk(b("w2")));
        assert_eq!(get(&q[0], "deadline_in_ms"), &Reply::Int(3000));
        assert_eq!(get(&q[1], "deadline_in_ms"), &Reply::Int(8000));
    }

    #[test]
    fn a_lock_key_of_another_type_is_a_wrongtype_error() {
        let mut s = MemoryStore::at(1000);
        s.set_px_at(b"l", b"x", 5000);
        assert!(info(&mut s, b"l", &[]).is_err());
    }
}
