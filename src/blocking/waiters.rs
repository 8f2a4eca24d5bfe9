//! The clients parked on one lock, in arrival order, and an index from every parked client to
//! its place, so one that leaves (timeout, disconnect, `CLIENT UNBLOCK`) is found and removed
//! in O(log n) instead of a search of every lock's queue and a shift of its own.
//!
//! Without it, 5,000 parked fair waiters disconnecting at once (a client pool restarting)
//! cost 5,000 searches of every queue, each followed by an O(n) removal: quadratic, with the
//! server frozen meanwhile.
//!
//! Each waiter gets a sequence number when it parks, unique for the life of the module; a
//! lock's waiters are kept ordered by it, and the index maps a blocked-client handle (and a
//! client id) to (lock, number). Every way out of a [`Waiters`] updates the index, so the
//! two never disagree whoever removes a waiter (a grant, a timeout, a disconnect, a demotion).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use super::request::Line;
use super::waiter::Map;
use super::waiter::{LockId, Waiter};

/// The parked clients of one lock, first parked first, and how many wait in each line.
#[derive(Default)]
pub struct Waiters {
    by_seq: BTreeMap<u64, Waiter>,
    /// Waiters per [`Line`] (by its index in [`LINES`]): which lines to serve, without a walk.
    per_line: [usize; 3],
}

/// Every line, in the order `serve` serves them: the permits taken before a latch looks at the
/// count they leave.
pub const LINES: [Line; 3] = [Line::Lock, Line::Permits, Line::Latch];

fn line_index(w: &Waiter) -> usize {
    match w.req.line() {
        Line::Lock => 0,
        Line::Permits => 1,
        Line::Latch => 2,
    }
}

/// Where a parked client waits.
struct Place {
    lock: LockId,
    seq: u64,
}

#[derive(Default)]
struct Index {
    by_handle: Map<usize, Place>,
    by_client: Map<u64, usize>,
}

thread_local! {
    // Apart from the registry's RefCell: `Waiters` methods update it while the registry is
    // borrowed. Redis runs every module callback on its main thread.
    static INDEX: RefCell<Index> = RefCell::default();
    static NEXT_SEQ: Cell<u64> = const { Cell::new(0) };
}

fn forget(w: &Waiter) {
    INDEX.with(|i| {
        let mut i = i.borrow_mut();
        i.by_handle.remove(&w.bc.id());
        if i.by_client.get(&w.client) == Some(&w.bc.id()) {
            i.by_client.remove(&w.client);
        }
    });
}

impl Waiters {
    /// Parks `w` last on `lock` (this queue's lock).
    pub fn push_back(&mut self, lock: &LockId, w: Waiter) {
        let seq = NEXT_SEQ.with(|n| n.replace(n.get() + 1));
        INDEX.with(|i| {
            let mut i = i.borrow_mut();
            i.by_handle.insert(w.bc.id(), Place { lock: lock.clone(), seq });
            i.by_client.insert(w.client, w.bc.id());
        });
        self.per_line[line_index(&w)] += 1;
        self.by_seq.insert(seq, w);
    }

    /// The lines with waiters, in [`LINES`] order.
    pub fn lines(&self) -> Vec<Line> {
        LINES.iter().zip(self.per_line).filter(|(_, n)| *n > 0).map(|(l, _)| *l).collect()
    }

    /// The first waiter in `line` and its place in arrival order: the front when every waiter
    /// is in one line (the usual case), else found by a walk up to it.
    pub fn first_in(&self, line: Line) -> Option<(usize, &Waiter)> {
        self.by_seq.values().enumerate().find(|(_, w)| w.req.line() == line)
    }

    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    /// The `i`-th waiter in arrival order: O(i).
    pub fn get(&self, i: usize) -> Option<&Waiter> {
        self.by_seq.values().nth(i)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Waiter> {
        self.by_seq.values()
    }

    /// Removes the `i`-th waiter in arrival order: O(i + log n).
    pub fn remove(&mut self, i: usize) -> Option<Waiter> {
        let seq = *self.by_seq.keys().nth(i)?;
        self.remove_seq(seq)
    }

    pub fn pop_front(&mut self) -> Option<Waiter> {
        let (_, w) = self.by_seq.pop_first()?;
        self.left(&w);
        Some(w)
    }

    fn remove_seq(&mut self, seq: u64) -> Option<Waiter> {
        let w = self.by_seq.remove(&seq)?;
        self.left(&w);
        Some(w)
    }

    /// `w` is out of this queue: out of the index and of its line's count.
    fn left(&mut self, w: &Waiter) {
        forget(w);
        let n = &mut self.per_line[line_index(w)];
        *n = n.saturating_sub(1);
    }
}

/// Removes the parked client whose blocked-client handle is `bc` from its lock's waiters.
pub fn take_by_handle(locks: &mut Map<LockId, Waiters>, bc: usize) -> Option<(LockId, Waiter)> {
    let (lock, seq) = INDEX.with(|i| i.borrow().by_handle.get(&bc).map(|p| (p.lock.clone(), p.seq)))?;
    let w = locks.get_mut(&lock)?.remove_seq(seq)?;
    Some((lock, w))
}

/// Removes the parked client with id `client` from its lock's waiters.
pub fn take_by_client(locks: &mut Map<LockId, Waiters>, client: u64) -> Option<(LockId, Waiter)> {
    let bc = INDEX.with(|i| i.borrow().by_client.get(&client).copied())?;
    take_by_handle(locks, bc)
}

// Test code only (compiled under cfg(test)): an unwrap, expect or panic here is a failed test,
// never reachable from the loaded module.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocking::Request;
    use crate::ffi::blocked::BlockedClient;

    fn indexed() -> usize {
        INDEX.with(|i| i.borrow().by_handle.len())
    }

    fn waiter(n: u64) -> Waiter {
        let req = Request::Lock { owner: format!("o{n}").into_bytes(), lease: 1, token: false };
        Waiter { client: n, bc: BlockedClient::fake(1000 + n as usize), req, who: crate::acl::Who::Root, since: 0 }
    }

    fn sync_waiter(n: u64, req: Request) -> Waiter {
        Waiter { client: n, bc: BlockedClient::fake(2000 + n as usize), req, who: crate::acl::Who::Root, since: 0 }
    }

    #[test]
    fn each_line_is_counted_and_its_first_waiter_found_whatever_waits_ahead_of_it() {
        let id: LockId = (0, b"c".to_vec());
        let mut q = Waiters::default();
        q.push_back(&id, sync_waiter(1, Request::Semaphore { permits: 5 }));
        q.push_back(&id, sync_waiter(2, Request::Latch));
        q.push_back(&id, sync_waiter(3, Request::Permits { permits: 1, lease: 0 }));
        assert_eq!(q.lines(), [Line::Permits, Line::Latch]);
        assert_eq!(q.first_in(Line::Permits).map(|(i, w)| (i, w.client)), Some((0, 1)));
        assert_eq!(q.first_in(Line::Latch).map(|(i, w)| (i, w.client)), Some((1, 2)));
        assert!(q.first_in(Line::Lock).is_none());
        assert_eq!(q.remove(1).map(|w| w.client), Some(2), "the latch's waiter served");
        assert_eq!(q.lines(), [Line::Permits]);
        assert_eq!(q.pop_front().map(|w| w.client), Some(1));
        assert_eq!(q.first_in(Line::Permits).map(|(i, w)| (i, w.client)), Some((0, 3)));
        let mut locks: Map<LockId, Waiters> = Map::default();
        locks.insert(id.clone(), q);
        assert_eq!(take_by_client(&mut locks, 3).map(|(_, w)| w.client), Some(3));
        assert!(locks[&id].lines().is_empty(), "every way out keeps the counts");
    }

    fn clients(q: &Waiters) -> Vec<u64> {
        q.iter().map(|w| w.client).collect()
    }

    #[test]
    fn waiters_leave_by_handle_client_index_or_front_and_the_index_follows() {
        let a: LockId = (0, b"a".to_vec());
        let b: LockId = (1, b"b".to_vec());
        let mut locks: Map<LockId, Waiters> = Map::default();
        for n in 1..=5 {
            locks.entry(a.clone()).or_default().push_back(&a, waiter(n));
        }
        for n in 6..=8 {
            locks.entry(b.clone()).or_default().push_back(&b, waiter(n));
        }
        assert_eq!(indexed(), 8);
        let (lock, w) = take_by_handle(&mut locks, 1003).expect("parked");
        assert_eq!((lock, w.client), (a.clone(), 3));
        let (lock, w) = take_by_client(&mut locks, 7).expect("parked");
        assert_eq!((lock, w.client), (b.clone(), 7));
        assert!(take_by_handle(&mut locks, 1003).is_none(), "gone already");
        assert_eq!(locks[&a].get(1).map(|w| w.client), Some(2));
        assert_eq!(locks.get_mut(&a).and_then(|q| q.remove(1)).map(|w| w.client), Some(2), "a grant");
        assert!(take_by_client(&mut locks, 2).is_none(), "a granted waiter is out of the index");
        assert_eq!(locks.get_mut(&a).and_then(Waiters::pop_front).map(|w| w.client), Some(1));
        assert_eq!(clients(&locks[&a]), [4, 5]);
        assert_eq!(clients(&locks[&b]), [6, 8]);
        assert_eq!(locks[&a].iter().next().map(|w| w.client), Some(4));
        assert_eq!(indexed(), 4);
        for q in locks.values_mut() {
            while q.pop_front().is_some() {}
        }
        assert_eq!(indexed(), 0);
    }
}
