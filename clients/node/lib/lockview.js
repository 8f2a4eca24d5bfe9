'use strict';
// LockView: what every kind of lock shares (acquire, release, the queries), on the holders of
// lib/holder.js; lib/locks.js gives each kind its commands and how it records a grant. See
// lib/locks.js for the ownership model: a holder per acquire, or one holder (reentrant).

const { randomUUID } = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const { Holder, now } = require('./holder');
const { tokenKey } = require('./names');
const { HOLD } = require('./using');
const { optionalMs, waitOf } = require('./timers');
const {
  isReplyError,
  notRun,
  LockLostError,
  LockNotHeldError,
  LockStateUnknownError,
  NoSyncedReplicasError,
} = require('./errors');

// How many times one acquire is sent again after a refusal by a former primary, or waits again
// after a lost wait settled as not granted.
const MAX_RETRIES = 20;

/** What every kind shares: acquire, release, queries. Subclasses give the commands. */
class LockView {
  constructor(client, name, fixed, side, spec, options) {
    this.client = client;
    this.name = name;
    this.key = client.key(name);
    this.side = side;
    this.spec = spec;
    this.lease = optionalMs(options.lease, 'lease');
    this.fenced = Boolean(options.fenced);
    if (this.fenced && !spec.fenceable) throw new TypeError(`${spec.acquire} has no fencing tokens`);
    this.onLost = options.onLost;
    /** Redisson's reentrance: the one holder this object is (`reentrant: true`, `owner`), else null. */
    this.fixed = fixed;
    /** Not reentrant: this object's holders, in grant order, until each is released. */
    this.holders = [];
    /** Not reentrant: the holders of the acquires in flight, oldest first. */
    this.pending = [];
    /** The owner id the next acquire takes, once `owner` was read before it. */
    this.reserved = null;
    this.lastSignal = null;
    /** The fencing token of the latest grant (`fenced` locks only). */
    this.token = null;
  }

  /** Whether every acquire of this object re-enters one holder (Redisson's reentrance). */
  get reentrant() {
    return this.fixed != null;
  }

  /**
   * The owner id of this object's current hold (the oldest it has); with none, of its oldest
   * acquire in flight; with none, the one its next acquire takes. Reentrant: its one owner id.
   */
  get owner() {
    if (this.fixed) return this.fixed.owner;
    const current = this.current() ?? this.pending[0];
    if (current) return current.owner;
    if (this.reserved == null) this.reserved = this.client.nextOwner();
    return this.reserved;
  }

  /** Aborted (with a LockLostError) when the current hold is lost; null before the first grant. */
  get signal() {
    if (this.fixed) return this.fixed.signal;
    const current = this.current();
    return current ? current.signal : this.lastSignal;
  }

  /** The oldest holder of this object that still holds (not reentrant). */
  current() {
    return this.holders.find((h) => h.count(this.side) > 0) ?? null;
  }

  /** The holder an acquire takes: the object's one holder, or a new one with a fresh owner. */
  holderForAcquire() {
    if (this.fixed) return this.fixed;
    const owner = this.reserved ?? this.client.nextOwner();
    this.reserved = null;
    return new Holder(this.client, this.key, owner, this.spec.renew, this.onLost);
  }

  /**
   * Acquires one hold. `timeout`: ms to wait (undefined: no limit; 0: try once). `lease`: ms
   * until the hold frees itself; without one (here or on the lock) the watchdog keeps it.
   * `signal`: aborting it ends the wait; a grant that raced the abort is given back before
   * the call rejects with `signal.reason`. Resolves true when granted, false when the wait
   * ran out. A grant no replica acknowledged is given back, and the call rejects with a
   * NoSyncedReplicasError.
   *
   * A wait whose reply is lost (its primary failed over, its connection broke) is settled by
   * asking what its owner holds; not granted, it is a new wait for the time left. A wait
   * refused because its node is no longer the primary (UNBLOCKED, READONLY) did not run: it
   * is sent again once the connections follow the new primary.
   */
  async acquire(options = {}) {
    return (await this.acquireHold(options)) != null;
  }

  /** acquire(), resolving the holder granted (or null when the wait ran out). */
  async acquireHold(options = {}) {
    const { waits, blockMs } = waitOf(options.timeout);
    const lease = optionalMs(options.lease, 'lease') ?? this.lease;
    const signal = options.signal ?? null;
    if (signal != null) signal.throwIfAborted();
    const holder = this.holderForAcquire();
    if (this.fixed) return this.acquireAs(holder, waits, blockMs, lease, signal);
    this.pending.push(holder);
    try {
      return await this.acquireAs(holder, waits, blockMs, lease, signal);
    } finally {
      this.pending.splice(this.pending.indexOf(holder), 1);
    }
  }

  async acquireAs(holder, waits, blockMs, lease, signal) {
    const { client } = this;
    const watchdog = lease === undefined;
    const leaseMs = watchdog ? client.watchdogTimeout : lease;
    const before = holder.count(this.side);
    const deadline = blockMs > 0 ? now() + blockMs : null;
    const started = Date.now();
    const timeLeft = () => deadline == null || now() < deadline;

    for (let attempt = 0; ; attempt++) {
      const block = deadline == null ? blockMs : Math.max(1, Math.ceil(deadline - now()));
      const args = [holder.owner, leaseMs, ...this.acquireOptions(waits)];
      if (waits) args.push('BLOCK', block);
      if (this.fenced) args.push('TOKEN');
      const sentAt = now();
      let reply;
      let lost = null;
      let aborted = false;
      try {
        if (waits) {
          ({ reply, lost, aborted = false } = await client.callWaiting(this.spec.acquire, this.key, args, block, signal ?? undefined, true));
        } else {
          reply = await client.callSynced(this.spec.acquire, this.key, args);
        }
      } catch (err) {
        if (err instanceof NoSyncedReplicasError) return this.unsynced(err, holder, leaseMs);
        const again = attempt < MAX_RETRIES && Date.now() - started < client.resolveTimeout;
        if (notRun(err) && again && timeLeft() && !(signal && signal.aborted)) {
          await sleep(Math.min(50 * 2 ** attempt, 500));
          continue;
        }
        if (isReplyError(err)) throw err;
        lost = err;
      }

      if (aborted && signal && lost === signal.reason) throw signal.reason; // aborted before it was sent
      let granted;
      let token = null;
      if (lost) {
        // The reply is lost, the command may have run: ask what this owner holds now (never
        // send the acquire again). A grant shows as one hold more than before.
        const what = `${this.spec.acquire} ${this.key}: reply lost (${lost.message})`;
        const held = await client.untilAnswered(what, () => this.serverHolds(holder.owner));
        granted = held > before;
        if (granted && this.fenced && !aborted) {
          // Nobody else can be granted while this owner holds it: the counter is our token.
          token = Number(await client.untilAnswered(what, () => client.plain('GET', tokenKey(this.key))));
        }
        const rewait = !granted && waits && attempt < MAX_RETRIES && timeLeft();
        if (rewait && !aborted && !(signal && signal.aborted)) continue;
      } else if (this.fenced) {
        granted = Number(reply[0]) === -1;
        token = granted ? Number(reply[1]) : null;
      } else {
        granted = reply === null;
      }
      if (aborted || (!granted && signal && signal.aborted)) {
        // Ended by the signal: whatever was granted meanwhile goes back before the rejection.
        if (granted) await this.giveBack(holder, leaseMs, 'abort').catch(() => {});
        throw signal.reason;
      }
      if (!granted) return null;
      if (this.fenced) this.token = token;
      this.recordGrant(holder, before, sentAt, leaseMs, watchdog);
      if (!this.fixed) this.holders.push(holder);
      this.lastSignal = holder.signal;
      return holder;
    }
  }

  /**
   * An acquire no replica acknowledged: a grant is given back (an unlock with its own LATCH,
   * not waited for), as Redisson's handleNoSync does, and `err` thrown; a refusal is a refusal.
   */
  async unsynced(err, holder, leaseMs) {
    const granted = this.fenced ? err.reply != null && Number(err.reply[0]) === -1 : err.reply === null;
    if (!granted) return null;
    // Not given back: never renewed, it frees itself at its lease's end.
    await this.giveBack(holder, leaseMs, 'give back').catch(() => {});
    throw err;
  }

  /** Unlocks the one hold `holder` was just granted and does not keep (not waited for by replicas). */
  giveBack(holder, leaseMs, why) {
    return this.latchedUnlock(holder.owner, leaseMs, `${this.spec.unlock} ${this.key} (${why})`, false);
  }

  /**
   * Sends an unlock with a fresh LATCH id until answered: a lost reply is settled by sending
   * the very same unlock again, which the server answers from the latch instead of releasing
   * a second hold. Once the reply of the only copy sent arrived, the latch has served and is
   * deleted (client.dropLatch), as Redisson deletes its own; after a re-send it is left to
   * expire (an earlier copy may still be on its way).
   */
  async latchedUnlock(owner, lease, what, synced) {
    const { client } = this;
    const requestId = randomUUID();
    const args = [owner, ...this.unlockSide(), lease, 'LATCH', requestId, client.latchMs];
    let sends = 0;
    const send = () => {
      sends += 1;
      return synced ? client.callSynced(this.spec.unlock, this.key, args) : client.call(this.spec.unlock, this.key, args);
    };
    try {
      const reply = await client.untilAnswered(what, send);
      if (sends === 1) client.dropLatch(this.key, requestId);
      return reply;
    } catch (err) {
      if (err instanceof NoSyncedReplicasError && sends === 1) client.dropLatch(this.key, requestId);
      throw err;
    }
  }

  recordGrant(holder, before, sentAt, leaseMs, watchdog) {
    holder.granted(this.side, leaseMs, watchdog, sentAt + leaseMs);
  }

  /**
   * Releases one hold: of this object's one holder (reentrant), else the oldest hold this
   * object was granted. Rejects with LockLostError for a hold lost while held, LockNotHeldError
   * when this object holds nothing.
   */
  async release() {
    if (this.fixed) return this.releaseHold(this.fixed);
    const holder = this.holders.find((h) => !h.releasing && (h.count(this.side) > 0 || h.lostOn(this.side)));
    if (!holder) throw new LockNotHeldError(`lock ${this.key} is not held through this lock object`);
    return this.releaseHold(holder);
  }

  /** Releases one hold of `holder`. */
  async releaseHold(holder) {
    // A hold lost while held is released by the loss itself. Nothing is sent: the unlock
    // would take a hold of a later grant instead (or find nothing).
    const lostErr = holder.takeLost(this.side);
    if (lostErr) {
      this.forget(holder);
      throw lostErr;
    }
    holder.releasing = true;
    try {
      await this.unlockOne(holder);
    } finally {
      holder.releasing = false;
      this.forget(holder);
    }
  }

  /** Drops a holder that holds nothing and owes no loss error (not reentrant). */
  forget(holder) {
    if (this.fixed || holder.total() > 0 || holder.lostOn(this.side)) return;
    const i = this.holders.indexOf(holder);
    if (i >= 0) this.holders.splice(i, 1);
  }

  async unlockOne(holder) {
    const sentAt = now();
    let reply;
    let unsynced = null;
    try {
      reply = await this.latchedUnlock(holder.owner, holder.lease, `${this.spec.unlock} ${this.key}`, true);
    } catch (err) {
      if (!(err instanceof NoSyncedReplicasError)) {
        if (err instanceof LockStateUnknownError) {
          // Whatever happened, stop renewing this hold: if it is still there, its lease frees it.
          holder.released(this.side, Math.max(holder.count(this.side) - 1, 0));
        }
        throw err;
      }
      // Applied on the primary, not acknowledged by a replica: recorded, then thrown.
      unsynced = err;
      reply = err.reply;
    }
    const local = holder.count(this.side);
    if (reply === null) {
      if (local > 0) {
        const err = new LockLostError(`lock ${this.key} was no longer held by ${holder.owner} at release`);
        holder.lose(err);
        holder.takeLost(this.side);
        throw err;
      }
      throw new LockNotHeldError(`lock ${this.key} is not held by ${holder.owner}`);
    }
    holder.released(this.side, Math.max(local - 1, 0));
    if (holder.total() > 0) this.recordPartialRelease(holder, sentAt);
    if (unsynced) throw unsynced;
  }

  recordPartialRelease(holder, sentAt) {
    // Holds remain: the unlock set the lease again.
    holder.setDeadline(sentAt + holder.lease);
  }

  /** For using(): the hold taken for the callback, released exactly. */
  async [HOLD](options) {
    const holder = await this.acquireHold(options);
    if (holder == null) return null;
    return { what: `lock ${this.key}`, signal: holder.signal, value: undefined, release: () => this.releaseHold(holder) };
  }

  /** The current hold's count on this lock, from the server (0 when this object holds nothing). */
  async holdCount() {
    if (!this.fixed && !this.current()) return 0;
    return this.serverHolds(this.owner);
  }

  /** Whether this object's current hold is held (Redisson's isHeldByCurrentThread). */
  async isHeld() {
    return (await this.holdCount()) > 0;
  }

  /** Whether anyone holds it. */
  async isLocked() {
    return Number(await this.client.plain('EXISTS', this.key)) === 1;
  }

  /** The lock's remaining time to live in ms (-2: free, -1: no expiry). */
  async remainingMs() {
    return Number(await this.client.plain('PTTL', this.key));
  }

  /** Frees the lock whoever holds it; true if it was held. */
  async forceUnlock() {
    let reply;
    let unsynced = null;
    try {
      reply = Number(await this.client.callSynced(this.spec.force, this.key, this.forceArgs()));
    } catch (err) {
      if (!(err instanceof NoSyncedReplicasError)) throw err;
      unsynced = err; // applied on the primary
      reply = Number(err.reply);
    }
    if (reply === 1) {
      for (const holder of this.fixed ? [this.fixed] : [...this.holders]) {
        if (holder.total() > 0) holder.lose(new LockLostError(`lock ${this.key} was force-unlocked by its own holder`));
      }
    }
    if (unsynced) throw unsynced;
    return reply === 1;
  }

  async serverHolds(owner) {
    return Number(await this.client.call(this.spec.holds, this.key, [owner]));
  }

  acquireOptions() {
    return [];
  }

  unlockSide() {
    return [];
  }

  forceArgs() {
    return [];
  }
}

module.exports = { LockView };
