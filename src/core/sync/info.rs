//! `SYNC.INFO`: a read-only picture of one synchronizer (semaphore, expirable semaphore,
//! count-down latch), built from its keys and the clients parked on it.
//!
//! The keyspace alone cannot tell a semaphore from a latch (both are a string counter), so
//! the kind is the expirable semaphore's when `{name}:timeout` exists, else what its parked
//! clients wait for, else `counter` (a string) or `none`.

use super::names::permit_timeouts;
use super::permits::{id_hex, NO_LEASE};
use crate::core::access::{KeyUse, Need};
use crate::core::lock::info::{Parked, ParkedList};
use crate::core::sync::store::SyncStore;
use crate::core::{parse_i64, permit, Reply, Result};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn field(name: &str, value: Reply) -> (Reply, Reply) {
    (bulk(name), value)
}

/// The kind a parked client's request names (`registry::parked_on`'s words).
fn kind_of(parked: &[Parked]) -> Option<&'static str> {
    parked.first().map(|p| p.request)
}

/// The first `count` parked synchronizer clients (a rate limiter's too), as `SYNC.INFO` lists
/// them: the permits each waits for stand in an owner's place.
pub fn parked_replies(parked: &ParkedList, count: usize) -> Vec<Reply> {
    parked
        .first
        .iter()
        .take(count)
        .map(|p| {
            Reply::Map(vec![
                field("client", Reply::Int(p.client as i64)),
                field("request", bulk(p.request)),
                field("permits", Reply::Int(parse_i64(&p.owner).unwrap_or(0))),
                field("waited_ms", Reply::Int(p.waited_ms)),
            ])
        })
        .collect()
}

/// Builds the `SYNC.INFO` reply for `key`: at most `count` held permits and parked clients,
/// with their totals, so the work is O(count + log N) whatever the keyspace holds.
pub fn info<S: SyncStore>(s: &mut S, key: &[u8], count: usize, parked: ParkedList) -> Result<Reply> {
    let z = permit_timeouts(key);
    permit(s, || vec![Need::Key(z.clone(), KeyUse::Read)])?;
    let value = s.get(key)?;
    let held_total = s.zset_len(&z)?;
    let kind = match (held_total > 0, kind_of(parked.first), &value) {
        (true, _, _) => "psemaphore",
        (false, Some(k), _) => k,
        (false, None, Some(_)) => "counter",
        (false, None, None) => "none",
    };
    let now = s.now();
    let in_ms = |t: f64| if t >= NO_LEASE as f64 { Reply::Nil } else { Reply::Int(t as i64 - now) };
    let held: Vec<Reply> = s
        .zset_range_by_score(&z, f64::NEG_INFINITY, f64::INFINITY, Some(count))?
        .into_iter()
        .map(|(id, t)| Reply::Map(vec![field("id", bulk(&id_hex(&id))), field("expires_in_ms", in_ms(t))]))
        .collect();
    let next = super::permits::next_expiry(s, key)?;
    let parked_shown = parked_replies(&parked, count);
    let total = |n: usize| Reply::Int(n as i64);
    Ok(Reply::Map(vec![
        field("kind", bulk(kind)),
        field("value", value.map_or(Reply::Nil, |v| parse_i64(&v).map_or(Reply::Bulk(v), Reply::Int))),
        field("pttl", Reply::Int(s.pttl(key))),
        field("permits_held_total", total(held_total)),
        field("permits_held", Reply::Array(held)),
        field("next_expiry_in_ms", next.map_or(Reply::Nil, |t| Reply::Int(t - now))),
        field("parked_total", total(parked.total)),
        field("parked", Reply::Array(parked_shown)),
    ]))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::MemoryStore;
    use crate::core::sync::permits;

    #[test]
    fn an_expirable_semaphore_shows_its_held_permits_bounded_by_count() {
        let mut s = MemoryStore::at(1_000);
        permits::try_set_permits(&mut s, b"p", 5).unwrap();
        let mut n = 0u8;
        let mut id = || {
            n += 1;
            [n; permits::ID_LEN]
        };
        permits::acquire(&mut s, b"p", 2, 3_000, false, &mut id).unwrap();
        permits::acquire(&mut s, b"p", 1, permits::NO_LEASE, false, &mut id).unwrap();
        let r = info(&mut s, b"p", 2, ParkedList::default()).unwrap();
        assert_eq!(r.field("kind"), &bulk("psemaphore"));
        assert_eq!(r.field("value"), &Reply::Int(2));
        assert_eq!(r.field("permits_held_total"), &Reply::Int(3));
        let Reply::Array(held) = r.field("permits_held") else { panic!("array") };
        assert_eq!(held.len(), 2);
        assert_eq!(held[0].field("id"), &bulk(&"01".repeat(16)));
        assert_eq!(held[0].field("expires_in_ms"), &Reply::Int(2_000));
        assert_eq!(r.field("next_expiry_in_ms"), &Reply::Int(2_000));
    }

    #[test]
    fn a_counter_takes_its_kind_from_its_parked_clients() {
        let mut s = MemoryStore::at(0);
        crate::core::sync::countdown::try_set_count(&mut s, b"l", 2).unwrap();
        let r = info(&mut s, b"l", 10, ParkedList::default()).unwrap();
        assert_eq!(r.field("kind"), &bulk("counter"));
        let parked = [Parked { client: 3, request: "countdown", owner: b"0".to_vec(), waited_ms: 5 }];
        let r = info(&mut s, b"l", 10, ParkedList { first: &parked, total: 1 }).unwrap();
        assert_eq!(r.field("kind"), &bulk("countdown"));
        assert_eq!(r.field("parked_total"), &Reply::Int(1));
        assert_eq!(info(&mut s, b"none", 10, ParkedList::default()).unwrap().field("kind"), &bulk("none"));
    }
}
