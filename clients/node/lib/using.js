'use strict';
// using(lock, fn): acquire, run, release, whatever fn does.

const { LockTimeoutError } = require('./errors');

/**
 * Acquires `lock` (options as `lock.acquire`), runs `fn(signal)` and releases the lock, also
 * when `fn` throws. `signal` aborts if the lock is lost while `fn` runs. Rejects with
 * LockTimeoutError when the lock was not acquired within `timeout`, and with LockLostError
 * when `fn` finished but the lock had been lost meanwhile (its work was not exclusive). When
 * `fn` throws, its error wins over any error of the release.
 */
async function using(lock, fn, options = {}) {
  if (lock == null || typeof lock.acquire !== 'function' || typeof lock.release !== 'function') {
    throw new TypeError('using takes a lock: using(locks.lock(name), async (signal) => { ... })');
  }
  if (typeof fn !== 'function') throw new TypeError('using(lock, fn): fn must be a function');
  if (!(await lock.acquire(options))) {
    throw new LockTimeoutError(`lock ${lock.name} not acquired within ${options.timeout} ms`);
  }
  const signal = lock.signal;
  let result;
  try {
    result = await fn(signal);
  } catch (err) {
    await lock.release().catch(() => {});
    throw err;
  }
  await lock.release();
  return result;
}

module.exports = { using };
