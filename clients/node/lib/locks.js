'use strict';
// The three kinds of lock. Each lock object is one holder (one owner id): what a thread is to
// Redisson. Acquiring the same object again re-enters it; tasks that must exclude each other
// take their own objects (`client.lock(name)` is cheap). The read and write locks of one
// ReadWriteLock share their owner, so a writer may also read and downgrade.

const { randomUUID } = require('node:crypto');
const { Holder, now } = require('./holder');
const { tokenKey } = require('./names');
const { setTimeout: sleep } = require('node:timers/promises');
const {
  isReplyError,
  notRun,
  LockLostError,
  LockNotHeldError,
  LockStateUnknownError,
  NoSyncedReplicasError,
} = require('./errors');

// Redisson's default for the fair lock's `threadWaitTime`: every client of one fair lock must
// use the same value, since a grant moves the other waiters' deadlines by it.
const FAIR_WAIT_DEFAULT = 300000;
// How many times one acquire is sent again after a refusal by a former primary, or waits again
// after a lost wait settled as not granted.
const MAX_RETRIES = 20;

/** What every kind shares: acquire, release, queries. Subclasses give the commands. */
class LockView {
  constructor(client, name, holder, side, spec, options) {
    this.client = client;
    this.name = name;
    this.key = holder.key;
    this.holder = holder;
    this.side = side;
    this.spec = spec;
    this.lease = optionalMs(options.lease, 'lease');
    this.fenced = Boolean(options.fenced);
    if (this.fenced && !spec.fenceable) throw new TypeError(`${spec.acquire} has no fencing tokens`);
    /** The fencing token of the latest grant (`fenced` locks only). */
    this.token = null;
  }

  /** The owner id this lock holds under: `<client uuid>:<n>` unless given. */
  get owner() {
    return this.holder.owner;
  }

  /** Aborted (with a LockLostError) when the lock is lost; null before the first grant. */
  get signal() {
    return this.holder.signal;
  }

  /**
   * Acquires one hold. `timeout`: ms to wait (undefined: no limit; 0: try once). `lease`: ms
   * until the hold frees itself; without one (here or on the lock) the watchdog keeps it.
   * Resolves true when granted, false when the wait ran out. A grant no replica acknowledged
   * is given back, and the call rejects with a NoSyncedReplicasError.
   *
   * A wait whose reply is lost (its primary failed over, its connection broke) is settled by
   * asking what this owner holds; not granted, it is a new wait for the time left. A wait
   * refused because its node is no longer the primary (UNBLOCKED, READONLY) did not run: it
   * is sent again once the connections follow the new primary.
   */
  async acquire(options = {}) {
    const { client, holder } = this;
    const timeout = options.timeout;
    const lease = optionalMs(options.lease, 'lease') ?? this.lease;
    const watchdog = lease === undefined;
    const leaseMs = watchdog ? client.watchdogTimeout : lease;
    const waits = timeout !== 0;
    const blockMs = timeout === undefined || timeout === Infinity ? 0 : nonNegative(timeout, 'timeout');
    const deadline = blockMs > 0 ? now() + blockMs : null;
    const before = holder.count(this.side);
    const started = Date.now();

    for (let attempt = 0; ; attempt++) {
      const block = deadline == null ? blockMs : Math.max(1, Math.ceil(deadline - now()));
      const args = [this.owner, leaseMs, ...this.acquireOptions(waits)];
      if (waits) args.push('BLOCK', block);
      if (this.fenced) args.push('TOKEN');
      const sentAt = now();
      let reply;
      let lost = null;
      try {
        if (waits) ({ reply, lost } = await client.callWaiting(this.spec.acquire, this.key, args, block, undefined, true));
        else reply = await client.callSynced(this.spec.acquire, this.key, args);
      } catch (err) {
        if (err instanceof NoSyncedReplicasError) return this.unsynced(err, leaseMs);
        const again = attempt < MAX_RETRIES && Date.now() - started < client.resolveTimeout;
        if (notRun(err) && again && (deadline == null || now() < deadline)) {
          await sleep(Math.min(50 * 2 ** attempt, 500));
          continue;
        }
        if (isReplyError(err)) throw err;
        lost = err;
      }

      let granted;
      let token = null;
      if (lost) {
        // The reply is lost, the command may have run: ask what this owner holds now (never
        // send the acquire again). A grant shows as one hold more than before.
        const what = `${this.spec.acquire} ${this.key}: reply lost (${lost.message})`;
        const held = await client.untilAnswered(what, () => this.serverHolds());
        granted = held > before;
        if (granted && this.fenced) {
          // Nobody else can be granted while this owner holds it: the counter is our token.
          token = Number(await client.untilAnswered(what, () => client.plain('GET', tokenKey(this.key))));
        }
        if (!granted && waits && attempt < MAX_RETRIES && (deadline == null || now() < deadline)) continue;
      } else if (this.fenced) {
        granted = Number(reply[0]) === -1;
        token = granted ? Number(reply[1]) : null;
      } else {
        granted = reply === null;
      }
      if (!granted) return false;
      if (this.fenced) this.token = token;
      this.recordGrant(before, sentAt, leaseMs, watchdog);
      return true;
    }
  }

  /**
   * An acquire no replica acknowledged: a grant is given back (an unlock with its own LATCH,
   * not waited for), as Redisson's handleNoSync does, and `err` thrown; a refusal is a refusal.
   */
  async unsynced(err, leaseMs) {
    const granted = this.fenced ? err.reply != null && Number(err.reply[0]) === -1 : err.reply === null;
    if (!granted) return false;
    const { client } = this;
    const args = [this.owner, ...this.unlockSide(), leaseMs, 'LATCH', randomUUID(), client.latchMs];
    await client
      .untilAnswered(`${this.spec.unlock} ${this.key} (give back)`, () => client.call(this.spec.unlock, this.key, args))
      .catch(() => {}); // not given back: never renewed, it frees itself at its lease's end
    throw err;
  }

  recordGrant(before, sentAt, leaseMs, watchdog) {
    this.holder.granted(this.side, leaseMs, watchdog, sentAt + leaseMs);
  }

  /**
   * Releases one hold. Every unlock carries a fresh LATCH id: a lost reply is resolved by
   * sending the very same unlock again, which the server answers from the latch instead of
   * releasing a second hold. Rejects with LockLostError for a hold lost while held,
   * LockNotHeldError when this owner held nothing.
   */
  async release() {
    const { client, holder } = this;
    // A hold lost while held is released by the loss itself. Nothing is sent: the unlock
    // would take a hold of a later grant instead (or find nothing).
    const lostErr = holder.takeLost(this.side);
    if (lostErr) throw lostErr;
    const args = [this.owner, ...this.unlockSide(), holder.lease, 'LATCH', randomUUID(), client.latchMs];
    const sentAt = now();
    let reply;
    let unsynced = null;
    try {
      reply = await client.untilAnswered(`${this.spec.unlock} ${this.key}`, () =>
        client.callSynced(this.spec.unlock, this.key, args),
      );
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
        const err = new LockLostError(`lock ${this.key} was no longer held by ${this.owner} at release`);
        holder.lose(err);
        holder.takeLost(this.side);
        throw err;
      }
      throw new LockNotHeldError(`lock ${this.key} is not held by ${this.owner}`);
    }
    holder.released(this.side, Math.max(local - 1, 0));
    if (holder.total() > 0) this.recordPartialRelease(sentAt);
    if (unsynced) throw unsynced;
  }

  recordPartialRelease(sentAt) {
    // Holds remain: the unlock set the lease again.
    this.holder.setDeadline(sentAt + this.holder.lease);
  }

  /** This owner's hold count on this lock, from the server. */
  async holdCount() {
    return this.serverHolds();
  }

  /** Whether this owner holds it (Redisson's isHeldByCurrentThread). */
  async isHeld() {
    return (await this.serverHolds()) > 0;
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
    if (reply === 1 && this.holder.total() > 0) {
      this.holder.lose(new LockLostError(`lock ${this.key} was force-unlocked by its own holder`));
    }
    if (unsynced) throw unsynced;
    return reply === 1;
  }

  async serverHolds() {
    return Number(await this.client.call(this.spec.holds, this.key, [this.owner]));
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

const LOCK = {
  acquire: 'LOCK.ACQUIRE',
  unlock: 'LOCK.UNLOCK',
  renew: 'LOCK.RENEW',
  holds: 'LOCK.HOLDS',
  force: 'LOCK.FORCEUNLOCK',
  fenceable: true,
};

const FAIR = {
  acquire: 'FAIRLOCK.ACQUIRE',
  unlock: 'FAIRLOCK.UNLOCK',
  renew: 'FAIRLOCK.RENEW',
  holds: 'FAIRLOCK.HOLDS',
  force: 'FAIRLOCK.FORCEUNLOCK',
  fenceable: true,
};

/**
 * Throws a TypeError naming the right call unless `client` is a LockClient: the natural first
 * guess, `new Lock(redis, name)` with an ioredis client, would otherwise fail deep inside.
 */
function checkClient(client, kind, factory) {
  if (client != null && typeof client.nextOwner === 'function' && typeof client.callWaiting === 'function') return;
  const got = client != null && typeof client.duplicate === 'function' ? ', not an ioredis client' : '';
  throw new TypeError(
    `${kind} takes a LockClient${got}: new ${kind}(new LockClient(redis), name), ` +
      `or locks.${factory}(name) with const locks = new LockClient(redis)`,
  );
}

function newHolder(client, name, spec, options) {
  const owner = options.owner ?? client.nextOwner();
  if (typeof owner !== 'string' || owner === '') throw new TypeError('owner must be a non-empty string');
  return new Holder(client, client.key(name), owner, spec.renew, options.onLost);
}

/** Redisson's RLock (and RFencedLock with `fenced: true`). */
class Lock extends LockView {
  constructor(client, name, options = {}) {
    checkClient(client, 'Lock', 'lock');
    super(client, name, newHolder(client, name, LOCK, options), 'main', LOCK, options);
  }
}

/** Redisson's RedissonFairLock: granted in arrival order. */
class FairLock extends LockView {
  constructor(client, name, options = {}) {
    checkClient(client, 'FairLock', 'fairLock');
    super(client, name, newHolder(client, name, FAIR, options), 'main', FAIR, options);
    this.wait = optionalMs(options.wait, 'wait') ?? FAIR_WAIT_DEFAULT;
  }

  acquireOptions(waits) {
    // A try without a wait must not join the queue (Redisson's tryLock()).
    return waits ? [this.wait] : [this.wait, 'NOQUEUE'];
  }
}

const RW = { renew: 'RWLOCK.RENEW', holds: 'RWLOCK.HOLDS', force: 'RWLOCK.FORCEUNLOCK' };
const READ = { ...RW, acquire: 'RWLOCK.RLOCK', unlock: 'RWLOCK.UNLOCK', fenceable: false };
const WRITE = { ...RW, acquire: 'RWLOCK.WLOCK', unlock: 'RWLOCK.UNLOCK', fenceable: true };

class RwSide extends LockView {
  unlockSide() {
    return [this.side === 'read' ? 'READ' : 'WRITE'];
  }

  forceArgs() {
    return [this.side === 'read' ? 'READ' : 'WRITE'];
  }

  async serverHolds() {
    const [reads, writes] = await this.client.call(RW.holds, this.key, [this.owner]);
    return Number(this.side === 'read' ? reads : writes);
  }

  /** Whether the lock is held in this mode (Redisson's readLock()/writeLock().isLocked()). */
  async isLocked() {
    return (await this.client.plain('HGET', this.key, 'mode')) === this.side;
  }
}

/** The read side of a ReadWriteLock: shared with other readers. */
class ReadLock extends RwSide {
  recordGrant(before, sentAt, leaseMs, watchdog) {
    // A read raises the lock's TTL to its lease if lower; each read hold has its own lease.
    const h = this.holder;
    const deadline = Math.max(h.total() > 0 ? h.deadline : 0, sentAt + leaseMs);
    h.granted('read', leaseMs, watchdog, deadline);
    h.readDeadlines.push(sentAt + leaseMs);
  }

  recordPartialRelease() {
    // The server dropped the newest read hold and set the TTL from the holds left.
    const h = this.holder;
    h.readDeadlines.pop();
    if (h.count('read') > 0 && h.count('write') === 0) h.setDeadline(Math.max(...h.readDeadlines, 0));
  }
}

/** The write side of a ReadWriteLock: exclusive, reentrant, may also read. */
class WriteLock extends RwSide {
  recordGrant(before, sentAt, leaseMs, watchdog) {
    // A re-entered write adds its lease to the remaining TTL (as Redisson does).
    const h = this.holder;
    h.granted('write', leaseMs, watchdog, before > 0 ? h.deadline + leaseMs : sentAt + leaseMs);
  }
}

/** Redisson's RReadWriteLock: `readLock()` and `writeLock()` share one owner. */
class ReadWriteLock {
  constructor(client, name, options = {}) {
    checkClient(client, 'ReadWriteLock', 'readWriteLock');
    const holder = newHolder(client, name, RW, options);
    this.name = name;
    this.owner = holder.owner;
    // Only writes are fenced: RWLOCK.RLOCK has no TOKEN.
    this.read = new ReadLock(client, name, holder, 'read', READ, { ...options, fenced: false });
    this.write = new WriteLock(client, name, holder, 'write', WRITE, options);
  }

  readLock() {
    return this.read;
  }

  writeLock() {
    return this.write;
  }
}

function optionalMs(v, what) {
  if (v === undefined || v === null) return undefined;
  if (!Number.isInteger(v) || v <= 0) throw new RangeError(`${what} must be a positive integer (ms)`);
  return v;
}

function nonNegative(v, what) {
  if (!Number.isInteger(v) || v < 0) throw new RangeError(`${what} must be a non-negative integer (ms)`);
  return v;
}

module.exports = { Lock, FairLock, ReadWriteLock, ReadLock, WriteLock, FAIR_WAIT_DEFAULT, checkClient };
