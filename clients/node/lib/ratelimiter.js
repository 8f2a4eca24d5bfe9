'use strict';
// Redisson's rate limiter (issue 30) on the module's RATELIMITER.* commands, on Redisson's
// RRateLimiter layout, so a Redisson client shares it by name: the hash `name` (rate, interval,
// type, keepAliveTime), `{name}:value[:<client id>]` and `{name}:permits[:<client id>]`.
//
// Every command but TRYSETRATE carries CLIENT <client id>: a PER_CLIENT limiter uses that
// client's window (an OVERALL one ignores it), as Redisson's bodies always get the instance's
// per-client keys. The client id is the LockClient's id, the uuid every owner id starts with,
// as Redisson uses its instance id (ServiceManager.getId()) for both.
//
// A wait is the server's BLOCK on a pooled connection, served in arrival order; an AbortSignal
// ends it with CLIENT UNBLOCK, and a grant that raced the abort is given back with
// RATELIMITER.RELEASE (SyncObject.wait). Redisson's limiter sends its scripts without waiting for
// the replicas (evalWriteAsync, never the synced eval of its locks and semaphores), so this one
// waits for none either. A change whose reply is lost rejects with LockStateUnknownError and
// is never sent again; reads are asked again.

const { checkClient } = require('./locks');
const { SyncObject, positive } = require('./synchronizers');

/** Redisson's RateType: one window for every client, or one per client id. */
const RateType = Object.freeze({ OVERALL: 'OVERALL', PER_CLIENT: 'PER_CLIENT' });

/** `name OVERALL|PER_CLIENT rate interval [KEEPALIVE ms]`, checked as Redisson checks them. */
function settings(type, rate, interval, keepAlive) {
  const mode = typeof type === 'string' ? type.toUpperCase() : type;
  if (mode !== RateType.OVERALL && mode !== RateType.PER_CLIENT) {
    throw new TypeError(`a rate type is 'OVERALL' or 'PER_CLIENT', not ${String(type)}`);
  }
  const args = [mode, positive(rate, 'rate'), positive(interval, 'interval')];
  if (keepAlive === undefined || keepAlive === 0) return args;
  if (positive(keepAlive, 'keepAlive') < interval) throw new RangeError('keepAlive must be at least the interval (Redisson\'s rule)');
  return [...args, 'KEEPALIVE', keepAlive];
}

/** Redisson's RRateLimiter: at most `rate` permits in any window of `interval` ms. */
class RateLimiter extends SyncObject {
  constructor(client, name, options = {}) {
    checkClient(client, 'RateLimiter', 'rateLimiter');
    super(client, name, false);
    const id = options.clientId ?? client.id;
    if (typeof id !== 'string' || id === '') throw new TypeError('clientId must be a non-empty string');
    /** The id of this client's window of a PER_CLIENT limiter (default: the LockClient's id). */
    this.clientId = id;
  }

  /**
   * Redisson's trySetRate: sets the rate if the limiter has none yet; resolves true if set.
   * `keepAlive`: the limiter's keys expire that many ms after their last use.
   */
  async trySetRate(type, rate, interval, options = {}) {
    return Number(await this.once('RATELIMITER.TRYSETRATE', settings(type, rate, interval, options.keepAlive))) === 1;
  }

  /**
   * Redisson's setRate(RateLimiterArgs): sets the rate whatever it was. The state starts
   * afresh unless `keepState` (the grants in the window count against the new rate); `xx`:
   * only if the limiter is set (Redisson's updateRate), else resolves false.
   */
  async setRate(type, rate, interval, options = {}) {
    const args = settings(type, rate, interval, options.keepAlive);
    if (options.keepState) args.push('KEEPSTATE');
    if (options.xx) args.push('XX');
    return Number(await this.once('RATELIMITER.SETRATE', [...args, 'CLIENT', this.clientId])) === 1;
  }

  /**
   * Takes `permits` (default 1), waiting in the server until they fit in the window, at most
   * `timeout` ms (undefined: no limit, Redisson's acquire; 0: tries once). Resolves true when
   * taken, false when the wait ran out; rejects with `signal.reason` when `signal` aborts first
   * (a grant that raced it is given back).
   */
  async acquire(options = {}) {
    const permits = positive(options.permits ?? 1, 'permits');
    const reply = await this.send('RATELIMITER.ACQUIRE', [permits, 'CLIENT', this.clientId], options, async (granted) => {
      if (granted != null) return false;
      await this.once('RATELIMITER.RELEASE', [permits, 'CLIENT', this.clientId]);
      return true;
    });
    return reply == null;
  }

  /** Redisson's tryAcquire(permits): takes the permits if they fit now; never waits. */
  tryAcquire(permits = 1) {
    return this.acquire({ permits, timeout: 0 });
  }

  /** Gives `permits` back to the window (never above the rate); resolves the permits available. */
  async release(permits = 1) {
    return Number(await this.once('RATELIMITER.RELEASE', [positive(permits, 'permits'), 'CLIENT', this.clientId]));
  }

  /** The permits that fit in the window now (0 to the rate). */
  async availablePermits() {
    return Number(await this.read('RATELIMITER.AVAILABLE', ['CLIENT', this.clientId]));
  }

  /** The limiter's settings `{ type, rate, interval, keepAlive }`, or null when it has none. */
  async getConfig() {
    const { client } = this;
    const reply = await client.untilAnswered(`HGETALL ${this.key}`, () => client.call('HGETALL', this.key, []));
    // ioredis replies HGETALL as an object (its reply transformer), RESP2 as a flat array.
    const f = Array.isArray(reply) ? Object.fromEntries(pairs(reply)) : reply;
    if (f.rate === undefined || f.interval === undefined || f.type === undefined) return null;
    const type = { 0: RateType.OVERALL, 1: RateType.PER_CLIENT }[f.type];
    if (type === undefined) throw new Error(`rate limiter ${this.key}: type field is ${f.type}, not 0 or 1`);
    return { type, rate: Number(f.rate), interval: Number(f.interval), keepAlive: Number(f.keepAliveTime ?? 0) };
  }
}

function* pairs(flat) {
  for (let i = 0; i + 1 < flat.length; i += 2) yield [flat[i], flat[i + 1]];
}

module.exports = { RateLimiter, RateType };
