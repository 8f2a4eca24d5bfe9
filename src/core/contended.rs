//! `LOCK.CONTENDED`: who waits on what. The names clients are parked on, the worst first, each
//! with its kind, its holders and how long they have held it, how many wait and how long the
//! first of them has waited.
//!
//! The waiting side comes from the registry of parked clients (the wake-up path keeps it
//! anyway), the holding side from the name's own key, read only for the names shown: nothing
//! is added to the lock paths.

use super::names::{MODE, WRITE};
use super::wait_times::WaitKind;
use super::{parse_i64, Reply, Result, Store};

/// How many names are listed without `COUNT`.
pub const DEFAULT_COUNT: usize = 10;
/// How many holders of one name are listed (a read-write lock may have thousands of readers):
/// `holders_total` says how many there are.
pub const HOLDERS_SHOWN: usize = 5;

/// What makes a name worse than another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worst {
    /// The longest wait of its parked clients (the default): a stuck holder shows first.
    Wait,
    /// The most parked clients: where waiters pile up.
    Waiters,
}

/// A name with parked clients, as the registry sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contended {
    pub db: i32,
    pub name: Vec<u8>,
    /// What its first parked client waits for: the name's kind.
    pub first: WaitKind,
    pub waiters: usize,
    /// How long its first parked client has waited (ms).
    pub oldest_wait_ms: i64,
}

/// Orders `list` worst first by `by`, then by the other measure, then by database and name
/// (so equal names come out in the same order every time).
pub fn rank(list: &mut [Contended], by: Worst) {
    list.sort_unstable_by(|a, b| {
        let (wait, waiters) = (b.oldest_wait_ms.cmp(&a.oldest_wait_ms), b.waiters.cmp(&a.waiters));
        let worse = match by {
            Worst::Wait => wait.then(waiters),
            Worst::Waiters => waiters.then(wait),
        };
        worse.then(a.db.cmp(&b.db)).then_with(|| a.name.cmp(&b.name))
    });
}

/// The kind of a name whose first parked client waits for `first`, as `LOCK.INFO` and
/// `SYNC.INFO` name kinds.
pub fn name_kind(first: WaitKind) -> &'static str {
    match first {
        WaitKind::Lock => "reentrant",
        WaitKind::Read | WaitKind::Write => "read-write",
        WaitKind::Fair => "fair",
        WaitKind::Semaphore => "semaphore",
        WaitKind::Permits => "psemaphore",
        WaitKind::Latch => "countdown",
        WaitKind::RateLimit => "ratelimiter",
    }
}

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn field(name: &str, value: Reply) -> (Reply, Reply) {
    (bulk(name), value)
}

/// The first [`HOLDERS_SHOWN`] holders of a lock's hash (owner, for a read-write lock the
/// kind of hold, and the hold count) and how many there are. None for a synchronizer, whose
/// holders have no names, and for a key that is not a hash (the waiters get the error).
fn holders<S: Store>(s: &mut S, c: &Contended) -> Option<(Vec<Reply>, usize)> {
    if matches!(c.first, WaitKind::Semaphore | WaitKind::Permits | WaitKind::Latch | WaitKind::RateLimit) {
        return None;
    }
    let key = &c.name;
    let fields = s.hash_len(key).ok()?;
    let mode = s.hash_get(key, MODE).ok()?;
    // One more than shown, in case the scan meets the mode field among them.
    let entries = s.hash_entries_first(key, HOLDERS_SHOWN + 1).ok()?;
    let shown = entries.iter().filter(|(f, _)| f != MODE).take(HOLDERS_SHOWN);
    let list = shown
        .map(|(f, v)| {
            let count = parse_i64(v).map_or(Reply::Bulk(v.clone()), Reply::Int);
            let mut h = Vec::with_capacity(3);
            if mode.is_some() {
                let write = mode.as_deref() == Some(WRITE) && f.ends_with(b":write");
                let owner = if write { &f[..f.len() - 6] } else { &f[..] };
                h.push(field("owner", Reply::Bulk(owner.to_vec())));
                h.push(field("kind", bulk(if write { "write" } else { "read" })));
            } else {
                h.push(field("owner", Reply::Bulk(f.clone())));
            }
            h.push(field("count", count));
            Reply::Map(h)
        })
        .collect();
    Some((list, fields - usize::from(mode.is_some())))
}

/// One name of the reply, its key read from `s` (the name's database). `held_ms`: how long
/// the module has seen it held without a break, if it granted the hold.
pub fn describe<S: Store>(s: &mut S, c: &Contended, held_ms: Option<i64>) -> Result<Reply> {
    let (list, total) = holders(s, c).unwrap_or_default();
    Ok(Reply::Map(vec![
        field("name", Reply::Bulk(c.name.clone())),
        field("db", Reply::Int(i64::from(c.db))),
        field("kind", bulk(name_kind(c.first))),
        field("waiters", Reply::Int(c.waiters as i64)),
        field("oldest_wait_ms", Reply::Int(c.oldest_wait_ms.max(0))),
        field("holders_total", Reply::Int(total as i64)),
        field("holders", Reply::Array(list)),
        field("held_ms", held_ms.map_or(Reply::Nil, |ms| Reply::Int(ms.max(0)))),
        field("pttl", Reply::Int(s.pttl(&c.name))),
    ]))
}

// Test code only (never in the module): an unwrap or panic here is how a test reports failure.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::memory::MemoryStore;

    fn c(name: &str, db: i32, waiters: usize, oldest: i64) -> Contended {
        Contended { db, name: name.as_bytes().to_vec(), first: WaitKind::Lock, waiters, oldest_wait_ms: oldest }
    }

    fn names(list: &[Contended]) -> Vec<String> {
        list.iter().map(|c| format!("{}/{}", c.db, String::from_utf8_lossy(&c.name))).collect()
    }

    #[test]
    fn the_longest_wait_comes_first_then_the_most_waiters_then_db_and_name() {
        let mut list = vec![c("b", 0, 1, 500), c("a", 0, 9, 100), c("c", 0, 3, 500), c("a", 1, 3, 500)];
        rank(&mut list, Worst::Wait);
        assert_eq!(names(&list), ["0/c", "1/a", "0/b", "0/a"]);
        rank(&mut list, Worst::Waiters);
        assert_eq!(names(&list), ["0/a", "0/c", "1/a", "0/b"]);
    }

    #[test]
    fn a_held_reentrant_lock_shows_its_holder_hold_age_lease_and_waiters() {
        let mut s = MemoryStore::at(1_000);
        s.hash_set(b"l", b"owner-1", b"2");
        s.pexpire_at(b"l", 31_000);
        let r = describe(&mut s, &c("l", 0, 4, 250), Some(1_200)).unwrap();
        assert_eq!(r.field("name"), &Reply::Bulk(b"l".to_vec()));
        assert_eq!(r.field("kind"), &bulk("reentrant"));
        assert_eq!(r.field("waiters"), &Reply::Int(4));
        assert_eq!(r.field("oldest_wait_ms"), &Reply::Int(250));
        assert_eq!(r.field("held_ms"), &Reply::Int(1_200));
        assert_eq!(r.field("pttl"), &Reply::Int(30_000));
        assert_eq!(r.field("holders_total"), &Reply::Int(1));
        let holder = Reply::Map(vec![field("owner", Reply::Bulk(b"owner-1".to_vec())), field("count", Reply::Int(2))]);
        assert_eq!(r.field("holders"), &Reply::Array(vec![holder]));
    }

    #[test]
    fn a_read_write_lock_names_each_hold_and_lists_at_most_the_first_few_readers() {
        let mut s = MemoryStore::at(1_000);
        s.hash_set(b"rw", MODE, b"read");
        for i in 0..8 {
            s.hash_set(b"rw", format!("r{i}").as_bytes(), b"1");
        }
        let mut w = c("rw", 0, 1, 10);
        w.first = WaitKind::Write;
        let r = describe(&mut s, &w, None).unwrap();
        assert_eq!(r.field("kind"), &bulk("read-write"));
        assert_eq!(r.field("holders_total"), &Reply::Int(8));
        assert_eq!(r.field("held_ms"), &Reply::Nil, "not granted by the module: unknown");
        let Reply::Array(h) = r.field("holders") else { panic!() };
        assert_eq!(h.len(), HOLDERS_SHOWN);
        assert_eq!(h[0].field("kind"), &bulk("read"));
        let mut s = MemoryStore::at(1_000);
        s.hash_set(b"rw", MODE, b"write");
        s.hash_set(b"rw", b"w1:write", b"1");
        let r = describe(&mut s, &w, None).unwrap();
        let Reply::Array(h) = r.field("holders") else { panic!() };
        assert_eq!(h[0].field("owner"), &Reply::Bulk(b"w1".to_vec()));
        assert_eq!(h[0].field("kind"), &bulk("write"));
    }

    #[test]
    fn a_free_lock_a_synchronizer_and_a_key_of_another_type_show_no_holders() {
        let mut s = MemoryStore::at(1_000);
        let r = describe(&mut s, &c("gone", 0, 1, 5), None).unwrap();
        assert_eq!(r.field("holders"), &Reply::Array(vec![]));
        assert_eq!(r.field("pttl"), &Reply::Int(-2));
        s.set_px_at(b"str", b"x", 99_000);
        let r = describe(&mut s, &c("str", 0, 1, 5), None).unwrap();
        assert_eq!(r.field("holders_total"), &Reply::Int(0), "WRONGTYPE: the waiters are told, not this");
        s.hash_set(b"sem", b"permits", b"0");
        let mut sem = c("sem", 0, 2, 5);
        sem.first = WaitKind::Semaphore;
        let r = describe(&mut s, &sem, None).unwrap();
        assert_eq!(r.field("kind"), &bulk("semaphore"));
        assert_eq!(r.field("holders"), &Reply::Array(vec![]));
    }

    #[test]
    fn every_kind_of_waiter_names_the_kind_of_its_name() {
        let kinds: Vec<&str> = WaitKind::ALL.iter().map(|&k| name_kind(k)).collect();
        assert_eq!(
            kinds,
            ["reentrant", "read-write", "read-write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"]
        );
    }
}
