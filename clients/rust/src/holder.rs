//! What one owner holds on one lock name, as the library last heard it from the server.
//!
//! | field | means |
//! |---|---|
//! | `counts[side]` | this owner's holds on a side (the reentrant and fair lock use `Main`; a reentrant read-write lock's two sides share one holder, so a writer may also read and downgrade) |
//! | `period` | the current holding period: from the first grant to the last release or the loss; `None` when nothing is held |
//! | `deadline` | when the lease runs out unless renewed (never later than the server's expiry: counted from before the grant); `None`: a lease too long for an `Instant` |
//! | `watchdog` | some hold of the period was taken without a lease: the watchdog renews it |
//! | `renew_at` | when the watchdog renews it next (with `watchdog`) |
//! | `pending_unlock` | an unlock whose outcome never came: the next acquire reads the hold count back first |
//!
//! A lock object without an owner of its own makes a new holder per acquire (its guard is the
//! only hold); a reentrant one (`Lock::reentrant`, `with_owner`) keeps one for every acquire.
//! A period is lost when a renewal finds the lock gone or its deadline passes: its `lost`
//! token fires, every guard of the period reports [`Error::LockLost`](crate::Error) at unlock
//! and sends nothing (the loss released those holds), and the counts start again from zero.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::durations::after;
use crate::kinds::Side;

/// Periods are numbered across the process: the watchdog's schedule is keyed by it.
static PERIODS: AtomicU64 = AtomicU64::new(1);

/// One holding period.
#[derive(Debug)]
pub(crate) struct Period {
    pub id: u64,
    /// Fires when the lock is lost while held.
    pub lost: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    counts: [i64; 3],
    period: Option<Arc<Period>>,
    deadline: Option<Instant>,
    read_deadlines: Vec<Option<Instant>>,
    lease: Duration,
    watchdog: bool,
    renew_at: Option<Instant>,
    pending_unlock: bool,
}

/// One owner's holds on one lock name.
#[derive(Debug)]
pub(crate) struct Holder {
    pub owner: String,
    state: Mutex<State>,
}

/// When the watchdog must look at a period next: `deadline`, `renew_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub deadline: Option<Instant>,
    /// `Some` when the watchdog renews the period.
    pub renew_at: Option<Instant>,
}

impl Timing {
    /// The first of the two (None: nothing to do, ever).
    pub fn due(&self) -> Option<Instant> {
        match (self.deadline, self.renew_at) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        }
    }
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
        Holder { owner, state: Mutex::new(State::default()) }
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

    /// When the watchdog must look at the current period next.
    pub fn timing(&self) -> Timing {
        let s = self.state();
        Timing { deadline: s.deadline, renew_at: s.renew_at.filter(|_| s.watchdog) }
    }

    /// Records a grant on `side`: `lease` it was granted with, `watchdog` whether the watchdog
    /// keeps it (renewed first at `renew_at`), `base` the earliest moment the server can have
    /// granted it. Returns the period and whether it is new.
    pub fn granted(
        &self,
        side: Side,
        lease: Duration,
        watchdog: Option<Instant>,
        base: Instant,
    ) -> (Arc<Period>, bool) {
        let mut s = self.state();
        let before = s.counts[idx(side)];
        let total: i64 = s.counts.iter().sum();
        let (period, new) = match s.period.clone() {
            Some(p) if total > 0 => (p, false),
            _ => {
                let id = PERIODS.fetch_add(1, Ordering::Relaxed);
                let p = Arc::new(Period { id, lost: CancellationToken::new() });
                s.period = Some(p.clone());
                s.watchdog = false;
                s.renew_at = None;
                s.read_deadlines.clear();
                s.deadline = None;
                (p, true)
            }
        };
        s.counts[idx(side)] += 1;
        s.lease = lease;
        if let Some(at) = watchdog {
            s.watchdog = true;
            s.renew_at.get_or_insert(at);
        }
        let end = after(base, lease);
        s.deadline = match side {
            Side::Main => end,
            // A read raises the lock's TTL to its lease if lower; each read hold has its own.
            Side::Read => {
                s.read_deadlines.push(end);
                match (s.deadline, end) {
                    _ if total == 0 => end,
                    (Some(d), Some(e)) => Some(d.max(e)),
                    // One of them never ends.
                    _ => None,
                }
            }
            // A re-entered write adds its lease to the remaining TTL (as Redisson does).
            Side::Write if before > 0 => s.deadline.and_then(|d| after(d, lease)),
            Side::Write => end,
        };
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
                    s.deadline = latest(&s.read_deadlines);
                }
            }
            _ => {
                let lease = s.lease;
                s.deadline = after(base, lease);
            }
        }
        false
    }

    fn end(s: &mut State) {
        s.counts = [0; 3];
        s.watchdog = false;
        s.renew_at = None;
        s.deadline = None;
        s.read_deadlines.clear();
        s.period = None;
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
        true
    }

    /// Whether `period` is the current one (not ended, not lost).
    pub fn is_current(&self, period: &Period) -> bool {
        self.state().period.as_ref().map(|p| p.id) == Some(period.id)
    }

    /// A renewal sent at `base` succeeded: every hold now runs `lease` from then; the next
    /// renewal is at `next`.
    pub fn renewed(&self, period: &Period, lease: Duration, base: Instant, next: Instant) {
        let mut s = self.state();
        if s.period.as_ref().map(|p| p.id) != Some(period.id) {
            return;
        }
        let end = after(base, lease);
        s.lease = lease;
        s.deadline = end;
        s.renew_at = Some(next);
        for d in s.read_deadlines.iter_mut() {
            *d = end;
        }
    }

    /// A renewal failed: the next try is at `next` (the deadline declares the loss meanwhile).
    pub fn renew_again_at(&self, period: &Period, next: Instant) {
        let mut s = self.state();
        if s.period.as_ref().map(|p| p.id) == Some(period.id) && s.watchdog {
            s.renew_at = Some(next);
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

/// The latest of some deadlines (`None` among them: no deadline at all).
fn latest(deadlines: &[Option<Instant>]) -> Option<Instant> {
    deadlines.iter().try_fold(None, |acc: Option<Instant>, d| d.map(|d| Some(acc.map_or(d, |a| a.max(d)))))?
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
        let (p1, new1) = h.granted(Side::Main, Duration::from_secs(30), Some(at(10_000)), at(0));
        let (p2, new2) = h.granted(Side::Main, Duration::from_secs(30), Some(at(10_000)), at(0));
        assert!(new1 && !new2 && p1.id == p2.id);
        assert!(!h.released(Side::Main, at(0)));
        assert!(h.released(Side::Main, at(0)));
        assert!(!h.is_current(&p1) && !p1.lost.is_cancelled());
        let (p3, new3) = h.granted(Side::Main, Duration::from_secs(1), None, at(0));
        assert!(new3 && p3.id != p1.id);
    }

    #[tokio::test]
    async fn losing_a_period_fires_its_token_and_clears_the_counts() {
        let h = Holder::new("u:1".into());
        let (p, _) = h.granted(Side::Write, Duration::from_secs(1), None, at(0));
        h.granted(Side::Read, Duration::from_secs(1), None, at(0));
        assert!(h.lose(&p));
        assert!(p.lost.is_cancelled());
        assert_eq!(h.total(), 0);
        assert!(!h.lose(&p), "a period is lost once");
    }

    #[tokio::test]
    async fn deadlines_follow_the_servers_ttl_rules() {
        let h = Holder::new("u:1".into());
        let base = at(0);
        h.granted(Side::Write, Duration::from_millis(100), None, base);
        h.granted(Side::Write, Duration::from_millis(100), None, base);
        assert_eq!(h.timing().deadline, Some(base + Duration::from_millis(200)), "a re-entered write adds its lease");
        let r = Holder::new("u:2".into());
        r.granted(Side::Read, Duration::from_millis(300), None, base);
        r.granted(Side::Read, Duration::from_millis(100), None, base);
        assert_eq!(r.timing().deadline, Some(base + Duration::from_millis(300)), "a read keeps the longest lease");
        r.released(Side::Read, base);
        assert_eq!(r.timing().deadline, Some(base + Duration::from_millis(300)));
    }

    #[tokio::test]
    async fn a_lease_too_long_for_an_instant_has_no_deadline_and_no_panic() {
        let h = Holder::new("u:1".into());
        h.granted(Side::Write, Duration::MAX, None, at(0));
        h.granted(Side::Write, Duration::MAX, None, at(0));
        h.granted(Side::Read, Duration::MAX, None, at(0));
        assert_eq!(h.timing(), Timing { deadline: None, renew_at: None });
        h.released(Side::Write, at(0));
        h.released(Side::Read, at(0));
        assert_eq!(h.timing().due(), None, "nothing for the watchdog to do, ever");
        let r = Holder::new("u:2".into());
        let renew = at(10);
        r.granted(Side::Read, Duration::from_millis(300), None, at(0));
        r.granted(Side::Read, Duration::MAX, Some(renew), at(0));
        assert_eq!(r.timing(), Timing { deadline: None, renew_at: Some(renew) });
        assert_eq!(r.timing().due(), Some(renew));
    }
}
