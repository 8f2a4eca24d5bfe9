'use strict';
// The three kinds of lock. A lock object names a lock and may be shared by any number of
// concurrent callers, as a Mutex shared by async tasks is: each acquire is a holder of its own
// (a fresh owner id, `<client uuid>:<n>`, what a thread is to Redisson), so callers sharing one
// object exclude each other, and nothing is reentrant: an acquire while the same object's
// holder holds waits for it, in the server's queue. Redisson's reentrance is a choice:
// `reentrant: true` (or an explicit `owner`) makes the object one holder, whose every acquire
// re-enters, and the read and write locks of one ReadWriteLock then share it, so a writer may
// also read and downgrade.
//
// `release()` gives back the hold this object was granted first (for an exclusive lock the
// only one it can have, unless an earlier one was lost: then that release rejects with the
// loss); `using(lock, fn)` releases exactly the hold it took.

const { Holder } = require('./holder');
const { LockView } = require('./lockview');
const { optionalMs } = require('./timers');

// Redisson's default for the fair lock's `threadWaitTime`: every client of one fair lock must
// use the same value, since a grant moves the other waiters' deadlines by it.
const FAIR_WAIT_DEFAULT = 300000;

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

/**
 * The one holder of a reentrant lock object (`reentrant: true`, or an explicit `owner`, which
 * is one holder by its nature), or null: each acquire is then a holder of its own.
 */
function fixedHolder(client, name, spec, options) {
  if (options.owner === undefined && !options.reentrant) return null;
  if (options.owner !== undefined && options.reentrant === false) {
    throw new TypeError('an explicit owner is one holder, reentrant by its nature: leave out reentrant: false');
  }
  const owner = options.owner ?? client.nextOwner();
  if (typeof owner !== 'string' || owner === '') throw new TypeError('owner must be a non-empty string');
  return new Holder(client, client.key(name), owner, spec.renew, options.onLost);
}

/** Redisson's RLock (and RFencedLock with `fenced: true`). */
class Lock extends LockView {
  constructor(client, name, options = {}) {
    checkClient(client, 'Lock', 'lock');
    super(client, name, fixedHolder(client, name, LOCK, options), 'main', LOCK, options);
  }
}

/** Redisson's RedissonFairLock: granted in arrival order. */
class FairLock extends LockView {
  constructor(client, name, options = {}) {
    checkClient(client, 'FairLock', 'fairLock');
    super(client, name, fixedHolder(client, name, FAIR, options), 'main', FAIR, options);
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

  async serverHolds(owner) {
    const [reads, writes] = await this.client.call(RW.holds, this.key, [owner]);
    return Number(this.side === 'read' ? reads : writes);
  }

  /** Whether the lock is held in this mode (Redisson's readLock()/writeLock().isLocked()). */
  async isLocked() {
    return (await this.client.plain('HGET', this.key, 'mode')) === this.side;
  }
}

/** The read side of a ReadWriteLock: shared with other readers. */
class ReadLock extends RwSide {
  recordGrant(h, before, sentAt, leaseMs, watchdog) {
    // A read raises the lock's TTL to its lease if lower; each read hold has its own lease.
    const deadline = Math.max(h.total() > 0 ? h.deadline : 0, sentAt + leaseMs);
    h.granted('read', leaseMs, watchdog, deadline);
    h.readDeadlines.push(sentAt + leaseMs);
  }

  recordPartialRelease(h) {
    // The server dropped the newest read hold and set the TTL from the holds left.
    h.readDeadlines.pop();
    if (h.count('read') > 0 && h.count('write') === 0) h.setDeadline(Math.max(...h.readDeadlines, 0));
  }
}

/** The write side of a ReadWriteLock: exclusive; reentrant (and may also read) only as one holder. */
class WriteLock extends RwSide {
  recordGrant(h, before, sentAt, leaseMs, watchdog) {
    // A re-entered write adds its lease to the remaining TTL (as Redisson does).
    h.granted('write', leaseMs, watchdog, before > 0 ? h.deadline + leaseMs : sentAt + leaseMs);
  }
}

/**
 * Redisson's RReadWriteLock: `readLock()` and `writeLock()` on one name. Each acquire is a
 * holder of its own; with `reentrant: true` (or `owner`) both sides are one holder, as in
 * Redisson, so the writer may also take read holds and its last write release downgrades it.
 */
class ReadWriteLock {
  constructor(client, name, options = {}) {
    checkClient(client, 'ReadWriteLock', 'readWriteLock');
    const fixed = fixedHolder(client, name, RW, options);
    this.name = name;
    /** The one owner id of both sides (reentrant), else null: each acquire takes its own. */
    this.owner = fixed ? fixed.owner : null;
    // Only writes are fenced: RWLOCK.RLOCK has no TOKEN.
    this.read = new ReadLock(client, name, fixed, 'read', READ, { ...options, fenced: false });
    this.write = new WriteLock(client, name, fixed, 'write', WRITE, options);
  }

  readLock() {
    return this.read;
  }

  writeLock() {
    return this.write;
  }
}

module.exports = { Lock, FairLock, ReadWriteLock, ReadLock, WriteLock, FAIR_WAIT_DEFAULT, checkClient };
