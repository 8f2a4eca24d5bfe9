'use strict';
// What one owner holds on one lock name, as the library last heard it from the server: the
// hold count per side (`main` for the reentrant and fair locks; `read` and `write` for the
// read-write lock, whose two sides share one owner and one watchdog), the AbortSignal of the
// current holding period, the watchdog, and the time by which the lease runs out unless
// renewed.
//
// A holding period starts when the first hold is granted and ends when the last is released
// or the lock is lost. A renewal that finds the lock gone, or a lease that runs out before the
// watchdog could renew it, loses it: the signal aborts with a LockLostError, the `onLost`
// callback runs, and the `release()` of every hold of that period rejects with the error.

const { performance } = require('node:perf_hooks');
const { LockLostError, NoSyncedReplicasError } = require('./errors');
const { longTimeout, clearLong } = require('./timers');

const now = () => performance.now();

class Holder {
  constructor(client, key, owner, renewCommand, onLost) {
    this.client = client;
    this.key = key;
    this.owner = owner;
    this.renewCommand = renewCommand;
    this.onLost = onLost;
    this.counts = new Map();
    this.lostCounts = new Map();
    this.lostError = null;
    this.controller = null;
    this.epoch = 0;
    this.watchdog = false;
    this.deadline = 0;
    this.readDeadlines = [];
    this.deadlineTimer = null;
    this.renewTimer = null;
    this.lease = client.watchdogTimeout;
  }

  count(side) {
    return this.counts.get(side) ?? 0;
  }

  total() {
    let n = 0;
    for (const c of this.counts.values()) n += c;
    return n;
  }

  get signal() {
    return this.controller ? this.controller.signal : null;
  }

  /**
   * A hold on `side` was granted. `leaseMs` is the lease it was granted with, `watchdog` whether
   * the watchdog must keep it, `deadline` when (performance.now() clock) the lease runs out.
   */
  granted(side, leaseMs, watchdog, deadline) {
    if (this.total() === 0) {
      this.epoch += 1;
      this.controller = new AbortController();
      this.watchdog = false;
      this.readDeadlines = [];
    }
    this.counts.set(side, this.count(side) + 1);
    this.lease = leaseMs;
    if (watchdog && !this.watchdog) {
      this.watchdog = true;
      this.scheduleRenewal(this.client.renewInterval);
    }
    this.setDeadline(deadline);
  }

  /** One hold on `side` was released; `remaining` holds are left there. */
  released(side, remaining) {
    if (remaining > 0) this.counts.set(side, remaining);
    else this.counts.delete(side);
    if (this.total() === 0) this.endPeriod();
  }

  /**
   * The lock is gone: every hold of this period is lost. `lostCounts` makes the release of each
   * of them reject with `err` (the caller may not have noticed the signal).
   */
  lose(err) {
    if (this.total() === 0) return;
    for (const [side, n] of this.counts) this.lostCounts.set(side, (this.lostCounts.get(side) ?? 0) + n);
    this.lostError = err;
    this.counts.clear();
    const controller = this.controller;
    this.endPeriod();
    if (controller) controller.abort(err);
    if (this.onLost) {
      try {
        this.onLost(err);
      } catch {
        // A throwing callback must not break the watchdog's timer.
      }
    }
  }

  /** Whether a release of `side` is owed the loss error. */
  lostOn(side) {
    return (this.lostCounts.get(side) ?? 0) > 0;
  }

  /** Takes one lost hold of `side`: returns the loss error, or null if none is pending. */
  takeLost(side) {
    const n = this.lostCounts.get(side) ?? 0;
    if (n === 0) return null;
    if (n === 1) this.lostCounts.delete(side);
    else this.lostCounts.set(side, n - 1);
    return this.lostError;
  }

  endPeriod() {
    this.epoch += 1;
    this.watchdog = false;
    clearLong(this.deadlineTimer);
    clearLong(this.renewTimer);
    this.deadlineTimer = null;
    this.renewTimer = null;
  }

  /** The lease now runs out at `t` (never later than the server's expiry: `t` counts from the send). */
  setDeadline(t) {
    this.deadline = t;
    clearLong(this.deadlineTimer);
    const epoch = this.epoch;
    // A long timer: a lease past Node's 24.8-day setTimeout limit must not run out at once.
    this.deadlineTimer = longTimeout(() => {
      if (epoch !== this.epoch) return;
      this.lose(new LockLostError(`the lease of lock ${this.key} ran out before it was renewed or released`));
    }, t - now());
  }

  /** Redisson's watchdog: renew the whole lease every `renewInterval` ms while held. */
  scheduleRenewal(delay) {
    clearLong(this.renewTimer);
    const epoch = this.epoch;
    this.renewTimer = longTimeout(() => this.renew(epoch), delay);
  }

  async renew(epoch) {
    if (epoch !== this.epoch) return;
    const lease = this.client.watchdogTimeout;
    const sentAt = now();
    let next = this.client.renewInterval;
    try {
      // A renewal no replica acknowledged is still a renewal on the primary (Redisson logs it
      // and renews again at the next interval).
      const reply = await this.client
        .callSynced(this.renewCommand, this.key, [this.owner, lease])
        .catch((err) => (err instanceof NoSyncedReplicasError ? err.reply : Promise.reject(err)));
      if (epoch !== this.epoch) return;
      if (Number(reply) !== 1) {
        this.lose(new LockLostError(`lock ${this.key} is no longer held by ${this.owner} (a renewal found it gone)`));
        return;
      }
      this.lease = lease;
      this.readDeadlines = this.readDeadlines.map(() => sentAt + lease);
      this.setDeadline(sentAt + lease);
    } catch {
      // No reply: try again soon; the deadline timer declares the loss if the lease runs out.
      next = Math.min(next, 1000);
    }
    if (epoch === this.epoch) this.scheduleRenewal(next);
  }
}

module.exports = { Holder, now };
