//! [`LockRef`]: what a lock's background work (the watchdog, a guard's release) needs of it,
//! without keeping the application's client alive; and the millisecond arguments.

use std::sync::Arc;
use std::time::Duration;

use crate::client::Core;
use crate::holder::Holder;
use crate::kinds::Kind;
use crate::protocol::Target;

/// What a background task needs of a lock, without keeping the application's client alive.
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
}

/// A duration as the module's millisecond argument.
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
