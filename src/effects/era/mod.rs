//! The fencing era on the module's store, one family: the era in the keyspace (here) and the
//! node's own record of it ([`file`]).
//!
//! Here, the era of `crate::core::lock::era` on the store: the floor a grant starts from, and
//! a counter's move up to it, the era's record written first where this history lacks it (and
//! the node's era file before that).

pub mod file;

use super::RedisStore;
use crate::core::lock::era;
use crate::core::sync::store::SyncStore;
use crate::core::{names, slots, IntBuf};

impl RedisStore<'_> {
    /// `SET` of the era key, if the era in force is not recorded in this history yet: before
    /// the fencing write that needs it, in the same database (and, in a cluster, in the slot
    /// of `counter`, which this node serves), so whatever holds that write holds the record.
    pub fn record_era(&mut self, counter: &[u8]) {
        if !era::needs_record() {
            return;
        }
        // The node's own file first: the record may be lost with its history, the file not.
        file::open(&self.ctx);
        let slot = self.ctx.in_cluster().then(|| slots::key_slot(counter));
        let key = names::era_key(slot);
        let mut buf = IntBuf::default();
        self.set(&key, buf.format(era::era()));
        era::recorded();
    }

    /// `SET counter floor`, the era recorded first.
    pub(super) fn raise_token_(&mut self, counter: &[u8], floor: i64) {
        self.record_era(counter);
        let mut buf = IntBuf::default();
        self.set(counter, buf.format(floor));
        era::count_moved();
    }
}
