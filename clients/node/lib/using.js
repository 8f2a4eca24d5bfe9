'use strict';
// using(lock, fn): acquire, run, release, whatever fn does. Also using(semaphore, fn): permits
// held for fn (see lib/synchronizers.js).

const { LockTimeoutError } = require('./errors');

/**
 * How a synchronizer is held for using(): `target[HOLD](options)` resolves null when not
 * acquired within `timeout`, else `{ what, signal, value, release }`: fn gets `(signal, value)`
 * and `release()` ends the hold.
 */
const HOLD = Symbol('redis-lockmod.hold');

/**
 * Acquires `lock` (options as `lock.acquire`), runs `fn(signal)` and releases exactly the hold
 * it took (a lock object shared by concurrent callers has one per caller), also when `fn`
 * throws. `signal` aborts if the lock is lost while `fn` runs. Rejects with
 * LockTimeoutError when the lock was not acquired within `timeout`, and with LockLostError
 * when `fn` finished but the lock had been lost meanwhile (its work was not exclusive). When
 * `fn` throws, its error wins over any error of the release.
 *
 * A Semaphore or PermitExpirableSemaphore holds `permits` (default 1) for `fn` instead; a
 * PermitExpirableSemaphore gives `fn(signal, ids)` the permit ids.
 */
async function using(lock, fn, options = {}) {
  if (lock == null || typeof lock[HOLD] !== 'function') {
    throw new TypeError('using takes a lock: using(locks.lock(name), async (signal) => { ... })');
  }
  if (typeof fn !== 'function') throw new TypeError('using(lock, fn): fn must be a function');
  const hold = await lock[HOLD](options);
  if (hold == null) {
    const what = typeof lock.acquireHold === 'function' ? `lock ${lock.name}` : `${lock.name}: permits`;
    throw new LockTimeoutError(`${what} not acquired within ${options.timeout} ms`);
  }
  return run(() => fn(hold.signal, hold.value), () => hold.release());
}

async function run(body, release) {
  let result;
  try {
    result = await body();
  } catch (err) {
    await release().catch(() => {});
    throw err;
  }
  await release();
  return result;
}

module.exports = { using, HOLD };
