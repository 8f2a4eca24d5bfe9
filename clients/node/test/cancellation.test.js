'use strict';
// Issue 34's traps in the Node library: an aborted wait is over, with a grant that raced it
// given back, before the call rejects, so nothing the caller does next meets it; a lock's
// acquire takes an AbortSignal too; and no time overflows Node's 24.8-day timer limit (a
// longer timer fires after 1 ms) or the server's integers: long times work, past-any-wait
// timeouts wait without limit, meaningless ones are a RangeError before anything is sent.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { withServer, until, parked, calls } = require('./support/server');
const { LockClient, using } = require('..');

let r;
let client;
withServer((env) => ({ r, client } = env));

const MONTH = 30 * 24 * 3600 * 1000; // past Node's 2^31 - 1 ms timers

/** Runs `before()` ahead of the next CLIENT UNBLOCK the LockClient sends (once). */
function beforeNextUnblock(before) {
  const original = client.conn.client;
  client.conn.client = async (...args) => {
    client.conn.client = original;
    const skip = await before(args);
    if (skip !== undefined) return skip;
    return original.apply(client.conn, args);
  };
  return () => {
    client.conn.client = original;
  };
}

test('an aborted wait whose CLIENT UNBLOCK reaches the server before the wait is unblocked again', async () => {
  // Two connections are read in no fixed order: the unblock may find nothing parked yet.
  const sem = client.semaphore('c:early');
  const controller = new AbortController();
  const waiting = sem.acquire({ timeout: 60000, signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  beforeNextUnblock(async () => 0); // as if the server had not read the wait yet
  controller.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  assert.equal(await parked(r), 0, 'the wait is gone before the call rejected');
  assert.equal(await sem.availablePermits(), 0);
});

test('an aborted lock wait rejects with the reason, leaving nothing parked or held', async () => {
  const holder = client.lock('c:abort', { lease: 30000 });
  await holder.acquire();
  const lock = client.lock('c:abort', { lease: 30000 });
  const controller = new AbortController();
  const waiting = lock.acquire({ signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  controller.abort(new Error('enough'));
  await assert.rejects(waiting, /enough/);
  assert.equal(await parked(r), 0);
  await holder.release();
  assert.equal(await r.exists('c:abort'), 0, 'the aborted waiter was not handed the lock');
  await assert.rejects(lock.acquire({ signal: AbortSignal.abort() }), { name: 'AbortError' });
  assert.equal(await r.exists('c:abort'), 0, 'an aborted signal sends nothing');
});

test('a lock grant that raced the abort is given back before the call rejects', async () => {
  for (const [kind, make] of [
    ['lock', (n) => client.lock(n, { lease: 30000 })],
    ['fair', (n) => client.fairLock(n, { lease: 30000 })],
    ['write', (n) => client.readWriteLock(n, { lease: 30000 }).writeLock()],
  ]) {
    const name = `c:raced:${kind}`;
    const holder = make(name);
    await holder.acquire();
    const waiter = make(name);
    const controller = new AbortController();
    const waiting = waiter.acquire({ signal: controller.signal });
    await until(async () => (await parked(r)) === 1, 'the waiter parked');
    beforeNextUnblock(() => holder.release()); // the grant comes first
    controller.abort();
    await assert.rejects(waiting, { name: 'AbortError' });
    assert.equal(await r.exists(name), 0, `${kind}: given back before the rejection`);
    assert.equal(waiter.holders.length, 0);
    // The next acquire through the same object is a first hold, not a reentry.
    assert.equal(await waiter.acquire({ timeout: 0 }), true);
    assert.deepEqual(await r.call(kind === 'write' ? 'RWLOCK.HOLDS' : `${kind === 'fair' ? 'FAIRLOCK' : 'LOCK'}.HOLDS`, name, waiter.owner), kind === 'write' ? [0, 1] : 1);
    await waiter.release();
  }
});

test('an aborted semaphore and rate limiter give a raced grant back before the call rejects', async () => {
  const sem = client.semaphore('c:sem');
  let controller = new AbortController();
  let waiting = sem.acquire({ permits: 2, signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  beforeNextUnblock(() => r.call('SEMAPHORE.RELEASE', 'c:sem', '2'));
  controller.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  assert.equal(await r.get('c:sem'), '2');

  const limiter = client.rateLimiter('c:rate');
  await limiter.trySetRate('OVERALL', 2, 3600000);
  assert.equal(await limiter.tryAcquire(2), true);
  controller = new AbortController();
  waiting = limiter.acquire({ permits: 2, signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  beforeNextUnblock(() => r.call('RATELIMITER.RELEASE', 'c:rate', '2', 'CLIENT', limiter.clientId));
  controller.abort();
  await assert.rejects(waiting, { name: 'AbortError' });
  assert.equal(await r.zcard('{c:rate}:permits'), 0);
});

test('a lock wait that times out in the server leaves nothing for the unlock that follows', async () => {
  const holder = client.lock('c:timeout', { lease: 30000 });
  await holder.acquire();
  const shared = client.lock('c:timeout', { lease: 30000 });
  const first = shared.acquire({ timeout: 300 });
  await until(async () => (await parked(r)) === 1, 'the first waiter parked');
  const second = shared.acquire({ timeout: 30000 });
  await until(async () => (await parked(r)) === 2, 'the second waiter parked');
  assert.equal(await first, false);
  await holder.release();
  assert.equal(await second, true);
  assert.equal(shared.holders.length, 1);
  assert.deepEqual(await r.hgetall('c:timeout'), { [shared.owner]: '1' });
  await shared.release();
});

test('a lease of a month is not lost after a millisecond', async () => {
  const lock = client.lock('c:month');
  assert.equal(await lock.acquire({ lease: MONTH }), true);
  await sleep(200);
  assert.equal(lock.signal.aborted, false);
  const pttl = await r.pttl('c:month');
  assert.ok(pttl > MONTH - 60000, `lease ${pttl}`);
  await lock.release();

  const psem = client.permitExpirableSemaphore('c:month:psem', { lease: MONTH });
  await psem.trySetPermits(1);
  await using(psem, async (signal) => {
    await sleep(200);
    assert.equal(signal.aborted, false, 'the permit lease is not over');
  });
});

test('a wait of a month keeps waiting; past Number.MAX_SAFE_INTEGER or Infinity it has no limit', async () => {
  const holder = client.lock('c:long', { lease: 30000 });
  for (const timeout of [MONTH, Infinity, 1e300, Number.MAX_VALUE]) {
    await holder.acquire();
    const lock = client.lock('c:long', { lease: 30000 });
    const waiting = lock.acquire({ timeout });
    await until(async () => (await parked(r)) === 1, `the ${timeout} ms waiter parked`);
    await sleep(200);
    assert.equal(await parked(r), 1, `still waiting (${timeout})`);
    await holder.release();
    assert.equal(await waiting, true);
    await lock.release();
  }
});

test('a timeout that means nothing is a RangeError, and nothing is sent', async () => {
  const lock = client.lock('c:bad');
  const sem = client.semaphore('c:bad:sem');
  const sent = await calls(r, 'LOCK.ACQUIRE');
  for (const timeout of [NaN, -1, -Infinity, 1.5, '100', null]) {
    await assert.rejects(lock.acquire({ timeout }), RangeError, String(timeout));
    await assert.rejects(sem.acquire({ timeout }), RangeError, String(timeout));
  }
  for (const lease of [NaN, 0, -5, 2.5, 2 ** 60, Infinity]) {
    await assert.rejects(lock.acquire({ lease }), RangeError, String(lease));
  }
  assert.equal(await calls(r, 'LOCK.ACQUIRE'), sent);
  assert.equal(await r.exists('c:bad'), 0);
});

test('client settings past a timer or an exact integer are refused; long ones work without spinning', async () => {
  assert.throws(() => new LockClient(r, { watchdogTimeout: 2 ** 60 }), RangeError);
  assert.throws(() => new LockClient(r, { watchdogTimeout: 3000, renewInterval: 3000 }), RangeError);
  assert.throws(() => new LockClient(r, { commandTimeout: MONTH }), RangeError);
  assert.throws(() => new LockClient(r, { blockGrace: NaN }), RangeError);
  const long = new LockClient(r, { watchdogTimeout: 4 * MONTH, latchMs: 4 * MONTH });
  try {
    const lock = long.lock('c:watchdog');
    const renews = await calls(r, 'LOCK.RENEW');
    assert.equal(await lock.acquire(), true);
    await sleep(300);
    assert.equal(await calls(r, 'LOCK.RENEW'), renews, 'a renewal 40 days away is not sent every millisecond');
    assert.equal(lock.signal.aborted, false);
    await lock.release();
  } finally {
    await long.quit();
  }
});
