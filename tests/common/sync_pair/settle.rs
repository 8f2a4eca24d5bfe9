//! Settling the expirable semaphore's ended leases between steps. A native server returns each
//! lease at its deadline by a timer: one reclaim, and one message, per deadline. The Lua side
//! returns leases only when a body runs: one reclaim, one message, for every lease ended by
//! then. So the pair runs the `availablePermits` body on both sides as each lease end passes
//! ([`SyncPair::settle`]), before the next can, and both sides publish alike.
//!
//! A stalled test thread (a loaded machine) can miss that moment: when the Lua side's reclaim
//! covers two lease ends, or a lease end falls between the `now` the Lua side is sent and the
//! native call that reads the server's clock, the native side may have published once per
//! deadline or once for all (its timer may be late too). Which one is a matter of timing, not
//! of the module, and is told from the Lua side's lease zset alone (never from what the native
//! side did, so that no real difference can pass for timing): both sides are then flushed, as
//! after a stalled step. Whenever timing left one answer, the messages are compared strictly.

use std::collections::BTreeSet;

use super::super::diff::now_ms;
use super::super::sync_calls::{semaphore_channel, timeouts};
use super::{zset, SyncPair};

/// How long a native server's timer is given to return a lease that ended (it is late on a
/// loaded machine; the `availablePermits` call returns the lease then).
const TIMER_GRACE_MS: i64 = 80;
/// The native timer's wait stops this long before the next lease end of the name, so that the
/// call returns only the lease ends passed so far.
const NEXT_END_MARGIN_MS: i64 = 5;

impl SyncPair {
    /// While the Lua side holds ended leases in a `:timeout` zset, runs the `availablePermits`
    /// body on both sides, replies not compared: both reclaim. Flushes both sides where the
    /// native side's messages are left to timing (see the file's note). True if it ran.
    pub(super) fn settle(&mut self) -> bool {
        let Some((sha, pubarg)) = self.settle_with.clone() else { return false };
        let mut ran = false;
        let mut ambiguous = Vec::new();
        for name in self.names.clone() {
            let z = timeouts(&name);
            let expired = |c: &mut redis::Connection| -> usize {
                redis::cmd("ZCOUNT").arg(&z).arg(0).arg(now_ms()).query(c).unwrap_or(0)
            };
            if expired(&mut self.lc) == 0 {
                continue;
            }
            // The Lua side's zset changes only by the calls the pair sends.
            let snapshot = zset(&mut self.lc, &z);
            if self.waited.get(&name) != Some(&snapshot) {
                self.give_native_timer_time(&z, &snapshot);
                self.waited.insert(name.clone(), snapshot.clone());
            }
            // Reclaimed by both calls even where the native timer has not fired yet (a loaded
            // machine delays it): a late timer then finds nothing to return, where it would
            // otherwise publish once more than the Lua side.
            let now = now_ms();
            let mut a: Vec<Vec<u8>> = vec![b"EVALSHA".to_vec(), sha.clone().into_bytes(), b"3".to_vec()];
            let ch = semaphore_channel(&name);
            a.extend([name.as_bytes().to_vec(), z.as_bytes().to_vec(), ch.into_bytes(), now.to_string().into_bytes()]);
            if pubarg {
                a.push(b"PUBLISH".to_vec());
            }
            self.raw[0].call(&a);
            self.raw[1].call(&a);
            let native_done = now_ms();
            self.scripts_sent += 1;
            ran = true;
            // The lease ends the Lua side's call returned at once, and those the native call,
            // reading the server's clock up to `native_done`, may have returned beyond `now`.
            let ends: BTreeSet<i64> = snapshot.iter().map(|(_, s)| *s as i64).filter(|s| *s <= now).collect();
            let straddled = snapshot.iter().filter(|(_, s)| *s as i64 > now && *s as i64 <= native_done).count();
            if ends.len() > 1 {
                ambiguous.push(format!("{name}: {} lease ends passed before it was settled", ends.len()));
            } else if straddled > 0 {
                ambiguous.push(format!("{name}: a lease ended between the Lua side's now and the native call"));
            }
        }
        self.settled += usize::from(ran);
        if !ambiguous.is_empty() {
            eprintln!("step {}: {}: both flushed", self.steps, ambiguous.join("; "));
            self.resync();
        }
        ran
    }

    /// Waits (up to [`TIMER_GRACE_MS`]) for the native server's timer to return the leases the
    /// Lua side's `snapshot` of `z` shows ended, unless the next lease end comes first.
    fn give_native_timer_time(&mut self, z: &str, snapshot: &[(Vec<u8>, f64)]) {
        let start = now_ms();
        let next_end = snapshot.iter().map(|(_, s)| *s as i64).filter(|s| *s > start).min();
        let until = next_end.map_or(start + TIMER_GRACE_MS, |e| (e - NEXT_END_MARGIN_MS).min(start + TIMER_GRACE_MS));
        loop {
            let t = now_ms();
            let left: usize = redis::cmd("ZCOUNT").arg(z).arg(0).arg(t).query(&mut self.nc).unwrap_or(0);
            if left == 0 || t >= until {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// Lets `ms` pass between steps, settling each lease end as it passes (as
    /// [`SyncPair::guard`] does before a step), rather than all of them at the next step.
    pub fn idle(&mut self, ms: i64) {
        let end = now_ms() + ms;
        loop {
            let next = self.guard(0);
            let t = now_ms();
            if t >= end {
                return;
            }
            let wake = next.map_or(end, |e| (e + 3).min(end));
            std::thread::sleep(std::time::Duration::from_millis((wake - t).max(1) as u64));
        }
    }
}
