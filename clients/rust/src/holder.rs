//! What one owner holds on one lock name, as the library last heard it from the server.
//!
//! | field | means |
//! |---|---|
//! | `counts[side]` | this owner's holds on a side (the reentrant and fair lock use `Main`; a read-write lock's two sides share one holder, so a writer may also read and downgrade) |
//! | `period` | the current holding period: from the first grant to the last release or the loss; `None` when nothing is held |
//! | `deadline` | when the lease runs out unless renewed (never later than the server's expiry: counted from before the grant) |
//! | `watchdog` | some hold of the period was taken without a lease: the watchdog renews it |
//! | `pending_unlock` | an unlock whose outcome never came: the next acquire reads the hold count back first |
//!
//! A period is lost when a renewal finds the lock gone or its deadline passes: its `lost`
//! token fires, every guard of the period reports [`Error::LockLost`](crate::Error) at unlock
//! and sends nothing (the loss released those holds), and the counts start again from zero.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::kinds::Side;

/// One holding period.
#[derive(Debug)]
pub(crate) struct Period {
    pub id: u64,
    /// Fires when the lock is lost while held.
    pub lost: CancellationToken,
    /// Fires when the period ends, by release or loss (the watchdog stops).
    pub ended: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    counts: [i64; 3],
    period: Option<Arc<Period>>,
    deadline: Option<Instant>,
    read_deadlines: Vec<Instant>,
    lease: Duration,
    watchdog: bool,
    pending_unlock: bool,
}

/// One owner's holds on one lock name.
#[derive(Debug)]
pub(crate) struct Holder {
    pub owner: String,
    state: Mutex<State>,
    /// Wakes the watchdog when the deadline moves.
    pub wake: Notify,
    periods: AtomicU64,
}

fn idx(side: Side) -> usize {
    match side {
        Side::Main => 0,
        Side::Read => 1,
        Side::Write => 2,
    }
}

impl Holder {
    pub fn new(owner: String) -> Holder {
        Holder { owner, state: Mutex::new(State::default()), wake: Notify::new(), periods: AtomicU64::new(0) }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the mutex was held cannot leave the counts half-written: every update
        // below is a few plain assignments. Keep going with what is there.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn count(&self, side: Side) -> i64 {
        self.state().counts[idx(side)]
    }

    #[cfg(test)]
    pub fn total(&self) -> i64 {
        self.state().counts.iter().sum()
    }

    /// The lease of the latest grant (an unlock that leaves holds sets it again).
    pub fn lease(&self) -> Duration {
        self.state().lease
    }

    pub fn period(&self) -> Option<Arc<Period>> {
        self.state().period.clone()
    }

    /// (deadline, watchdog on) for the watchdog task.
    pub fn schedule(&self) -> (Option<Instant>, bool) {
        let s = self.state();
        (s.deadline, s.watchdog)
    }

    /// Records a grant on `side`: `lease` it was granted with, `watchdog` whether the watchdog
    /// keeps it, `base` the earliest moment the server can have granted it. Returns the period
    /// and whether it is new (the caller starts its watchdog task).
    pub fn granted(&self, side: Side, lease: Duration, watchdog: bool, base: Instant) -> (Arc<Period>, bool) {
        let mut s = self.state();
        let before = s.counts[idx(side)];
        let total: i64 = s.counts.iter().sum();
        let (period, new) = match s.period.clone() {
            Some(p) if total > 0 => (p, false),
            _ => {
                let id = self.periods.fetch_add(1, Ordering::Relaxed) + 1;
                let p = Arc::new(Period { id, lost: CancellationToken::new(), ended: CancellationToken::new() });
                s.period = Some(p.clone());
                s.watchdog = false;
                s.read_deadlines.clear();
                s.deadline = None;
                (p, true)
            }
        };
        s.counts[idx(side)] += 1;
        s.lease = lease;
        s.watchdog |= watchdog;
        let end = base + lease;
        s.deadline = Some(match side {
            Side::Main => end,
            // A read raises the lock's TTL to its lease if lower; each read hold has its own.
            Side::Read => {
                s.read_deadlines.push(end);
                s.deadline.map_or(end, |d| d.max(end))
            }
            // A re-entered write adds its lease to the remaining TTL (as Redisson does).
            Side::Write if before > 0 => s.deadline.map_or(end, |d| d + lease),
            Side::Write => end,
        });
        drop(s);
        self.wake.notify_one();
        (period, new)
    }

    /// One hold on `side` was released (or given up on); `base` is when the unlock was sent.
    /// Returns true when the period ended.
    pub fn released(&self, side: Side, base: Instant) -> bool {
        let mut s = self.state();
        let i = idx(side);
        s.counts[i] = (s.counts[i] - 1).max(0);
        if s.counts.iter().sum::<i64>() == 0 {
            Self::end(&mut s);
            return true;
        }
        // Holds remain: the unlock set the lease again.
        match side {
            Side::Read => {
                // The server dropped the newest read hold and set the TTL from those left.
                s.read_deadlines.pop();
                if s.counts[idx(Side::Read)] > 0 && s.counts[idx(Side::Write)] == 0 {
                    s.deadline = s.read_deadlines.iter().max().copied();
                }
            }
            _ => {
                let lease = s.lease;
                s.deadline = Some(base + lease);
            }
        }
        drop(s);
        self.wake.notify_one();
        false
    }

    fn end(s: &mut State) {
        s.counts = [0; 3];
        s.watchdog = false;
        s.deadline = None;
        s.read_deadlines.clear();
        if let Some(p) = s.period.take() {
            p.ended.cancel();
        }
    }

    /// The lock is gone: every hold of `period` is lost (no-op if that period already ended).
    pub fn lose(&self, period: &Period) -> bool {
        let mut s = self.state();
        if s.period.as_ref().map(|p| p.id) != Some(period.id) {
            return false;
        }
        Self::end(&mut s);
        drop(s);
        period.lost.cancel();
        period.ended.cancel();
        true
    }

    /// A renewal sent at `base` succeeded: every hold now runs `lease` from then.
    pub fn renewed(&self, period: &Period, lease: Duration, base: Instant) {
        let mut s = self.state();
        if s.period.as_ref().map(|p| p.id) != Some(period.id) {
            return;
        }
        let end = base + lease;
        s.lease = lease;
        s.deadline = Some(end);
        for d in s.read_deadlines.iter_mut() {
            *d = end;
        }
    }

    /// Sets the hold count of `side` read back from the server (after an unlock whose outcome
    /// was unknown); ends the period if nothing is held.
    pub fn synced(&self, side: Side, holds: i64) {
        let mut s = self.state();
        s.pending_unlock = false;
        s.counts[idx(side)] = holds.max(0);
        if s.counts.iter().sum::<i64>() == 0 {
            Self::end(&mut s);
        }
    }

    pub fn set_pending_unlock(&self) {
        self.state().pending_unlock = true;
    }

    pub fn pending_unlock(&self) -> bool {
        self.state().pending_unlock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_period_starts_at_the_first_grant_and_ends_at_the_last_release() {
        let h = Holder::new("u:1".into());
        let (p1, new1) = h.granted(Side::Main, Duration::from_secs(30), true, at(0));
        let (p2, new2) = h.granted(Side::Main, Duration::from_secs(30), true, at(0));
        assert!(new1 && !new2 && p1.id == p2.id);
        assert!(!h.released(Side::Main, at(0)));
        assert!(h.released(Side::Main, at(0)));
        assert!(p1.ended.is_cancelled() && !p1.lost.is_cancelled());
        let (p3, new3) = h.granted(Side::Main, Duration::from_secs(1), false, at(0));
        assert!(new3 && p3.id != p1.id);
    }

    #[tokio::test]
    async fn losing_a_period_fires_its_token_and_clears_the_counts() {
        let h = Holder::new("u:1".into());
        let (p, _) = h.granted(Side::Write, Duration::from_secs(1), false, at(0));
        h.granted(Side::Read, Duration::from_secs(1), false, at(0));
        assert!(h.lose(&p));
        assert!(p.lost.is_cancelled());
        assert_eq!(h.total(), 0);
        assert!(!h.lose(&p), "a period is lost once");
    }

    #[tokio::test]
    async fn deadlines_follow_the_servers_ttl_rules() {
        let h = Holder::new("u:1".into());
        let base = at(0);
        h.granted(Side::Write, Duration::from_millis(100), false, base);
        h.granted(Side::Write, Duration::from_millis(100), false, base);
        assert_eq!(h.schedule().0, Some(base + Duration::from_millis(200)), "a re-entered write adds its lease");
        let r = Holder::new("u:2".into());
        r.granted(Side::Read, Duration::from_millis(300), false, base);
        r.granted(Side::Read, Duration::from_millis(100), false, base);
        assert_eq!(r.schedule().0, Some(base + Duration::from_millis(300)), "a read keeps the longest lease");
        r.released(Side::Read, base);
        assert_eq!(r.schedule().0, Some(base + Duration::from_millis(300)));
    }
}
