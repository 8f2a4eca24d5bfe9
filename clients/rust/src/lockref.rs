//! [`LockRef`]: one holder on one lock, as a guard, its release and the watchdog need it,
//! without keeping the application's client alive.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Core;
use crate::holder::{Holder, Period};
use crate::kinds::Kind;
use crate::protocol::Target;
use crate::schedule::Watched;
use crate::watchdog;

/// One holder on one lock: what a guard, its release and the watchdog need of it.
#[derive(Clone, Debug)]
pub(crate) struct LockRef {
    pub core: Arc<Core>,
    pub name: Arc<str>,
    pub kind: &'static Kind,
    pub holder: Arc<Holder>,
}

impl LockRef {
    pub fn target(&self) -> Target<'_> {
        Target { core: &self.core, kind: self.kind, name: &self.name, owner: &self.holder.owner }
    }

    /// The replica sync of this client, if on.
    pub fn sync(&self) -> Option<Duration> {
        self.core.sync()
    }

    /// The holder's `period` changed (a grant, a partial release, a renewal): the watchdog's
    /// schedule follows it.
    pub fn watch(&self, period: &Arc<Period>) {
        let w = Watched::new(self.name.clone(), self.kind, self.holder.clone(), period.clone());
        watchdog::watch(&self.core, w);
    }

    /// Every hold of `period` is lost (the lock is gone); false if that period had ended.
    pub fn lose(&self, period: &Period) -> bool {
        let lost = self.holder.lose(period);
        self.core.schedule.remove(period.id);
        lost
    }
}
