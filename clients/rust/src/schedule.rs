//! The watchdog's schedule: every holding period of a client, by the moment it needs looking
//! at next ([`Timing::due`]). A grant adds its period, a release or a loss removes it (a mutex
//! and two map operations; no task and no wake-up per hold). The watchdog task
//! (crate::watchdog) sleeps until the earliest due moment and never longer than one renew
//! interval, so a hold granted meanwhile (its first renewal one interval away) never has to
//! wake it; only a fixed lease shorter than that does.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::holder::{Holder, Period};
use crate::kinds::Kind;

/// A client's holding periods, and the wake-up of the task that looks after them.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    inner: Mutex<Inner>,
    /// Wakes the watchdog task (a due moment earlier than the one it sleeps until).
    pub wake: Notify,
}

#[derive(Debug, Default)]
struct Inner {
    /// Every live period of the client, by id.
    live: HashMap<u64, Watched>,
    /// The periods with something due, by when.
    due: BTreeSet<(Instant, u64)>,
    /// When the task wakes next (`None`: never, or not started).
    target: Option<Instant>,
    started: bool,
}

/// One holder's period on one lock.
#[derive(Debug, Clone)]
pub(crate) struct Watched {
    pub name: Arc<str>,
    pub kind: &'static Kind,
    pub holder: Arc<Holder>,
    pub period: Arc<Period>,
    /// Its key in `due` (`None`: not there: nothing due ever, or a renewal on its way).
    due: Option<Instant>,
}

impl Watched {
    pub fn new(name: Arc<str>, kind: &'static Kind, holder: Arc<Holder>, period: Arc<Period>) -> Watched {
        Watched { name, kind, holder, period, due: None }
    }

    /// Every hold of its period is lost; false if the period had ended.
    pub fn lose(&self, schedule: &Schedule) -> bool {
        let lost = self.holder.lose(&self.period);
        schedule.remove(self.period.id);
        lost
    }
}

impl Schedule {
    fn inner(&self) -> MutexGuard<'_, Inner> {
        // Every update below is a few map operations: a panic cannot leave them half-done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follows `w`'s period after a change (a grant, a partial release, a renewal), or forgets
    /// it when it ended. True when the task must be started (the first period of the client);
    /// nothing is kept once `closed` fired (an entry holds the client's core).
    pub fn update(&self, mut w: Watched, closed: &CancellationToken) -> bool {
        let id = w.period.id;
        if !w.holder.is_current(&w.period) {
            self.remove(id);
            return false;
        }
        let due = w.holder.timing().due();
        w.due = due;
        let mut s = self.inner();
        if closed.is_cancelled() {
            return false;
        }
        if let Some(at) = s.live.insert(id, w).and_then(|old| old.due) {
            s.due.remove(&(at, id));
        }
        if let Some(at) = due {
            s.due.insert((at, id));
        }
        if !s.started {
            s.started = true;
            s.target = due;
            return true;
        }
        if let Some(at) = due.filter(|at| s.target.is_none_or(|t| *at < t)) {
            s.target = Some(at);
            drop(s);
            self.wake.notify_one();
        }
        false
    }

    /// Forgets a period (released or lost).
    pub fn remove(&self, id: u64) {
        let mut s = self.inner();
        if let Some(at) = s.live.remove(&id).and_then(|w| w.due) {
            s.due.remove(&(at, id));
        }
    }

    /// Declares every live period of lock `name` lost whose holder `freed` says the server
    /// released (a force unlock); returns how many.
    pub fn lose_all(&self, name: &str, freed: impl Fn(&Holder) -> bool) -> usize {
        let found: Vec<Watched> =
            self.inner().live.values().filter(|w| &*w.name == name && freed(&w.holder)).cloned().collect();
        found.iter().filter(|w| w.lose(self)).count()
    }

    /// Takes the periods due by `now` out of the schedule (each is looked at, then put back).
    pub fn take_due(&self, now: Instant) -> Vec<Watched> {
        let mut s = self.inner();
        let mut out = Vec::new();
        while let Some(&(at, id)) = s.due.first() {
            if at > now {
                break;
            }
            s.due.pop_first();
            if let Some(w) = s.live.get_mut(&id) {
                w.due = None;
                out.push(w.clone());
            }
        }
        out
    }

    /// When the task wakes next: the first due moment, and at least at `idle` (so that a hold
    /// granted meanwhile, due one renew interval after its grant, never needs a wake-up).
    pub fn next_target(&self, idle: Option<Instant>) -> Option<Instant> {
        let mut s = self.inner();
        let first = s.due.first().map(|&(at, _)| at);
        let target = match (first, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        s.target = target;
        target
    }

    /// Forgets everything (the task ended: holds still there are not renewed any more).
    pub fn clear(&self) {
        let mut s = self.inner();
        s.live.clear();
        s.due.clear();
    }
}
