'use strict';
// Redisson's synchronizers (issue 26) on the module's commands, on Redisson's layout, so a
// Redisson client shares them by name: Semaphore (RSemaphore, SEMAPHORE.*),
// PermitExpirableSemaphore (RPermitExpirableSemaphore, PSEMAPHORE.*), CountDownLatch
// (RCountDownLatch, COUNTDOWN.*). A wait is the server's BLOCK on a pooled connection of its
// own, served in arrival order, as for the locks.
//
// Permits have no owner, so a lost reply cannot be settled by asking the server what the
// caller holds: a command that changes something is sent once, and a lost reply rejects with
// LockStateUnknownError (the permits may or may not have been taken). Reads are asked again.
//
// An acquire (or await) given an AbortSignal stops waiting when it aborts: the parked request
// is answered at once with CLIENT UNBLOCK <id> TIMEOUT from the shared connection, and permits
// granted before the unblock got there are given back; it then rejects with the signal's reason.

const { performance } = require('node:perf_hooks');
const { checkClient } = require('./locks');
const { HOLD } = require('./using');
const { clearLong, longTimeout, waitOf } = require('./timers');
const {
  isReplyError,
  LockLostError,
  LockNotHeldError,
  LockStateUnknownError,
  NoSyncedReplicasError,
} = require('./errors');

const now = () => performance.now();

/**
 * What every synchronizer shares: its client, name and key, and how commands are sent. The
 * semaphores' changes wait for the replicas (NoSyncedReplicasError when none acknowledged), as
 * Redisson's; the count-down latch's do not (`syncs` false), as Redisson's.
 */
class SyncObject {
  constructor(client, name, syncs = true) {
    this.client = client;
    this.name = name;
    this.key = client.key(name);
    this.syncs = syncs;
  }

  /** A command that changes something: sent once; a lost reply is LockStateUnknownError. */
  async once(command, args) {
    try {
      if (this.syncs) return await this.client.callSynced(command, this.key, args);
      return await this.client.call(command, this.key, args);
    } catch (err) {
      if (isReplyError(err) || err instanceof NoSyncedReplicasError) throw err;
      throw new LockStateUnknownError(`${command} ${this.key}: reply lost, outcome unknown (${err.message})`, {
        cause: err,
      });
    }
  }

  /**
   * A command that changes nothing twice: asked again while its reply is lost. With `sync`
   * (a lease update), the wait for the replicas follows it.
   */
  read(command, args = [], sync = false) {
    const { client } = this;
    const send = sync && this.syncs ? () => client.callSynced(command, this.key, args) : () => client.call(command, this.key, args);
    return client.untilAnswered(`${command} ${this.key}`, send);
  }

  /**
   * A command that may park (BLOCK `blockMs`, 0: no limit). `signal` aborts the wait: what it
   * was granted meanwhile goes to `giveBack(reply)`, then the call rejects with the reason. A
   * grant no replica acknowledged goes to `giveBack` too, then the call rejects with the
   * NoSyncedReplicasError.
   */
  async wait(command, args, blockMs, signal, giveBack) {
    let result;
    try {
      result = await this.client.callWaiting(command, this.key, args, blockMs, signal, this.syncs);
    } catch (err) {
      if (!(err instanceof NoSyncedReplicasError)) throw err;
      return this.unsynced(err, giveBack);
    }
    const { reply, lost, aborted } = result;
    if (aborted) {
      if (!lost && giveBack) await giveBack(reply).catch(() => {});
      throw signal.reason;
    }
    if (lost) {
      throw new LockStateUnknownError(`${command} ${this.key}: reply lost, outcome unknown (${lost.message})`, {
        cause: lost,
      });
    }
    return reply;
  }

  /** (args of BLOCK or none, blockMs): `timeout` undefined or Infinity waits without limit, 0 tries once (lib/timers.js). */
  static block(timeout) {
    return waitOf(timeout);
  }

  async send(command, args, options, giveBack) {
    const { signal } = options;
    if (signal != null) signal.throwIfAborted();
    const { waits, blockMs } = SyncObject.block(options.timeout);
    if (!waits) {
      try {
        return await this.once(command, args);
      } catch (err) {
        if (!(err instanceof NoSyncedReplicasError)) throw err;
        return this.unsynced(err, giveBack);
      }
    }
    return this.wait(command, [...args, 'BLOCK', blockMs], blockMs, signal, giveBack);
  }

  /**
   * An acquire no replica acknowledged (Redisson's handleNoSync): what it was granted is given
   * back (`giveBack(reply)`, which resolves true when there was a grant), then `err` thrown; a
   * refusal resolves as the refusal.
   */
  async unsynced(err, giveBack) {
    if (!giveBack || !(await giveBack(err.reply, true).catch(() => true))) return err.reply;
    throw err;
  }
}

/** Redisson's RSemaphore (SEMAPHORE.*): a count of permits, taken and given back by anyone. */
class Semaphore extends SyncObject {
  constructor(client, name) {
    checkClient(client, 'Semaphore', 'semaphore');
    super(client, name);
  }

  /** Sets the permits if the semaphore does not exist; `lease`: ms until the key expires. */
  async trySetPermits(permits, options = {}) {
    const args = [nonNegative(permits, 'permits')];
    if (options.lease !== undefined) args.push('LEASE', positive(options.lease, 'lease'));
    return Number(await this.once('SEMAPHORE.TRYSETPERMITS', args)) === 1;
  }

  /**
   * Takes `permits` (default 1), waiting in the server at most `timeout` ms (undefined: no
   * limit; 0: tries once). Resolves true when taken, false when the wait ran out; rejects with
   * `signal.reason` when `signal` aborts first (no permit is kept).
   */
  async acquire(options = {}) {
    const permits = positive(options.permits ?? 1, 'permits');
    const reply = await this.send('SEMAPHORE.ACQUIRE', [permits], options, async (granted, unsynced) => {
      if (Number(granted) !== 1) return false;
      // Given back without waiting for the replicas when the grant itself was not synced.
      const args = [permits];
      if (unsynced) await this.client.call('SEMAPHORE.RELEASE', this.key, args).catch(() => {});
      else await this.release(permits);
      return true;
    });
    return Number(reply) === 1;
  }

  /** Gives `permits` (default 1) back, whoever took them; resolves the permits available. */
  async release(permits = 1) {
    return Number(await this.once('SEMAPHORE.RELEASE', [positive(permits, 'permits')]));
  }

  /** Adds `delta` permits (negative: removes them), as Redisson's addPermits. */
  async addPermits(delta) {
    if (!Number.isSafeInteger(delta)) throw new RangeError('delta must be an integer up to Number.MAX_SAFE_INTEGER in size');
    await this.once('SEMAPHORE.ADDPERMITS', [delta]);
  }

  /** Takes every available permit; resolves how many. */
  async drainPermits() {
    return Number(await this.once('SEMAPHORE.DRAIN', []));
  }

  /** The permits available now (0 when the semaphore does not exist). */
  async availablePermits() {
    return Number(await this.read('SEMAPHORE.AVAILABLE'));
  }

  /** For using(): `permits` held for the callback, released after it. */
  async [HOLD](options) {
    const permits = positive(options.permits ?? 1, 'permits');
    if (!(await this.acquire({ ...options, permits }))) return null;
    const controller = new AbortController();
    return {
      what: `${permits} permit(s) of semaphore ${this.key}`,
      signal: controller.signal,
      value: undefined,
      release: async () => {
        await this.release(permits);
      },
    };
  }
}

/**
 * Redisson's RPermitExpirableSemaphore (PSEMAPHORE.*): each permit taken has an id and a lease,
 * and comes back by itself when its lease runs out (on the server's clock).
 */
class PermitExpirableSemaphore extends SyncObject {
  constructor(client, name, options = {}) {
    checkClient(client, 'PermitExpirableSemaphore', 'permitExpirableSemaphore');
    super(client, name);
    /** The default lease (ms) of an acquire. */
    this.lease = options.lease === undefined ? undefined : positive(options.lease, 'lease');
    /** Held ids of using() callbacks running now -> their hold (deadline timers). */
    this.holds = new Map();
  }

  /** The lease of an acquire; 0 (never expires, Redisson's acquire() without one) if none. */
  leaseOf(options) {
    const lease = options.lease ?? this.lease;
    return lease === undefined ? 0 : positive(lease, 'lease');
  }

  /** Sets the permits if the semaphore does not exist; true if it was set. */
  async trySetPermits(permits) {
    return Number(await this.once('PSEMAPHORE.TRYSETPERMITS', [nonNegative(permits, 'permits')])) === 1;
  }

  /** Sets the total (available plus taken) to `permits`, as Redisson's setPermits. */
  async setPermits(permits) {
    await this.once('PSEMAPHORE.SETPERMITS', [nonNegative(permits, 'permits')]);
  }

  /**
   * Takes `permits` (default 1) for `lease` ms (default: the semaphore's; none: they never
   * expire), waiting as
   * Semaphore.acquire. Resolves their ids (32 hex digits each), or null when not taken.
   */
  async acquire(options = {}) {
    const permits = positive(options.permits ?? 1, 'permits');
    const lease = this.leaseOf(options);
    const reply = await this.send('PSEMAPHORE.ACQUIRE', [permits, lease], options, async (ids, unsynced) => {
      if (ids == null) return false;
      if (unsynced) await this.client.call('PSEMAPHORE.RELEASE', this.key, ids.map(String)).catch(() => {});
      else await this.tryRelease(ids);
      return true;
    });
    return reply == null ? null : reply.map(String);
  }

  /**
   * Gives back the permits of `ids` (one id or an array): all of them, or none when one is
   * unknown, already released or expired. Resolves true if they were released.
   */
  async tryRelease(ids) {
    const list = idList(ids);
    return Number(await this.once('PSEMAPHORE.RELEASE', list)) === list.length;
  }

  /** As tryRelease, but rejects with LockNotHeldError when nothing was released. */
  async release(ids) {
    if (!(await this.tryRelease(ids))) {
      throw new LockNotHeldError(`permit(s) ${idList(ids).join(', ')} of ${this.key}: unknown, already released or expired`);
    }
  }

  /** Sets the lease of a permit still held to `lease` ms from now (0: never expires); false if it is gone. */
  async updateLease(id, lease) {
    const [one] = idList(id);
    const sentAt = now();
    const ok = Number(await this.read('PSEMAPHORE.UPDATELEASE', [one, nonNegative(lease, 'lease')], true)) === 1;
    const hold = this.holds.get(one);
    if (ok && hold) hold.extend(one, lease === 0 ? Infinity : sentAt + lease);
    return ok;
  }

  /** The permits available now (expired ones back). */
  async availablePermits() {
    return Number(await this.read('PSEMAPHORE.AVAILABLE'));
  }

  /** The permits taken and not expired. */
  async acquiredPermits() {
    return Number(await this.read('PSEMAPHORE.ACQUIRED'));
  }

  /**
   * For using(): permits held for the callback (`fn(signal, ids)`); the signal aborts with a
   * LockLostError when a lease runs out first (updateLease moves it), and the release after
   * the callback rejects with it.
   */
  async [HOLD](options) {
    const lease = this.leaseOf(options);
    const sentAt = now();
    const ids = await this.acquire({ ...options, lease });
    if (ids == null) return null;
    const hold = new PermitHold(this, ids, lease === 0 ? Infinity : sentAt + lease);
    for (const id of ids) this.holds.set(id, hold);
    return {
      what: `${ids.length} permit(s) of ${this.key}`,
      signal: hold.controller.signal,
      value: ids,
      release: async () => {
        hold.end();
        const released = await this.tryRelease(ids);
        if (!released) throw hold.lost ?? new LockLostError(`permit(s) ${ids.join(', ')} of ${this.key} expired before release`);
      },
    };
  }
}

/** The permits of one using() callback: aborts its signal when the first lease runs out. */
class PermitHold {
  constructor(sem, ids, deadline) {
    this.sem = sem;
    this.ids = ids;
    this.controller = new AbortController();
    this.deadlines = new Map(ids.map((id) => [id, deadline]));
    this.timer = null;
    this.lost = null;
    this.arm();
  }

  extend(id, deadline) {
    if (this.lost) return;
    this.deadlines.set(id, deadline);
    this.arm();
  }

  arm() {
    clearLong(this.timer);
    const first = Math.min(...this.deadlines.values());
    if (first === Infinity) return;
    this.timer = longTimeout(() => {
      this.lost = new LockLostError(`a permit lease of ${this.sem.key} ran out before release`);
      this.controller.abort(this.lost);
    }, first - now());
  }

  end() {
    clearLong(this.timer);
    for (const id of this.ids) if (this.sem.holds.get(id) === this) this.sem.holds.delete(id);
  }
}

/** Redisson's RCountDownLatch (COUNTDOWN.*): waiters are all woken when the count reaches zero. */
class CountDownLatch extends SyncObject {
  constructor(client, name) {
    checkClient(client, 'CountDownLatch', 'countDownLatch');
    super(client, name, false);
  }

  /** Sets the count if the latch does not exist; true if it was set. */
  async trySetCount(count) {
    return Number(await this.once('COUNTDOWN.TRYSETCOUNT', [nonNegative(count, 'count')])) === 1;
  }

  /** Decrements the count; resolves the count left (at zero the latch opens, the key goes). */
  async countDown() {
    return Number(await this.once('COUNTDOWN.DECR', []));
  }

  /** The count now (0 when the latch does not exist). */
  async count() {
    return Number(await this.read('COUNTDOWN.COUNT'));
  }

  /**
   * Redisson's await: waits in the server until the count is zero, at most `timeout` ms
   * (undefined: no limit; 0: checks once). Resolves true once it is zero (or the latch does
   * not exist), false when the time ran out; rejects with `signal.reason` if `signal` aborts.
   */
  async await(options = {}) {
    return Number(await this.send('COUNTDOWN.AWAIT', [], options, null)) === 1;
  }
}

function idList(ids) {
  const list = Array.isArray(ids) ? ids : [ids];
  if (list.length === 0) throw new TypeError('no permit id given');
  for (const id of list) {
    if (typeof id !== 'string' || id === '') throw new TypeError('a permit id is a non-empty string');
  }
  return list;
}

/** A count or a time: an integer in [1, Number.MAX_SAFE_INTEGER]. */
function positive(v, what) {
  if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${what} must be a positive integer up to Number.MAX_SAFE_INTEGER, not ${String(v)}`);
  return v;
}

/** A count or a time: an integer in [0, Number.MAX_SAFE_INTEGER]. */
function nonNegative(v, what) {
  if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`${what} must be a non-negative integer up to Number.MAX_SAFE_INTEGER, not ${String(v)}`);
  return v;
}

module.exports = { SyncObject, Semaphore, PermitExpirableSemaphore, CountDownLatch, positive };
