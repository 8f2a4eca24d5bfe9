'use strict';
// The watchdog and the lost-lock signal. The client's watchdog lease is 1 s, renewed every
// 300 ms, so that "outlives its lease" takes seconds, not minutes.

const test = require('node:test');
const assert = require('node:assert/strict');
const { once } = require('node:events');
const { setTimeout: sleep } = require('node:timers/promises');
const { withServer, calls } = require('./support/server');
const { LockLostError, using } = require('..');

let r;
let client;
withServer((env) => ({ r, client } = env), { watchdogTimeout: 1000, renewInterval: 300 });

/** Resolves with the abort reason of `signal` (bounded: fails if it never aborts). */
async function aborted(signal, ms = 10000) {
  if (signal.aborted) return signal.reason;
  const stop = new AbortController();
  const giveUp = sleep(ms, null, { signal: stop.signal }).then(
    () => assert.fail(`signal not aborted within ${ms} ms`),
    () => {},
  );
  await Promise.race([once(signal, 'abort'), giveUp]);
  stop.abort();
  return signal.reason;
}

test('the watchdog keeps a 1 s lease alive for 5 s, then stops at release', async () => {
  const lock = client.lock('wd');
  const renewsBefore = await calls(r, 'LOCK.RENEW');
  assert.equal(await lock.acquire(), true);
  await sleep(5000);
  assert.equal(lock.signal.aborted, false);
  assert.deepEqual(await r.hgetall('wd'), { [lock.owner]: '1' });
  const pttl = await r.pttl('wd');
  assert.ok(pttl > 0 && pttl <= 1000, `renewed lease: ${pttl}`);
  assert.ok((await calls(r, 'LOCK.RENEW')) - renewsBefore >= 5, 'renewed along the way');
  await lock.release();
  assert.equal(await r.exists('wd'), 0);
  const renewsAfter = await calls(r, 'LOCK.RENEW');
  await sleep(700);
  assert.equal(await calls(r, 'LOCK.RENEW'), renewsAfter, 'no renewal after release');
  assert.equal(lock.signal.aborted, false);
});

test('the watchdog keeps read and write holds of a read-write lock alive', async () => {
  const rw = client.readWriteLock('wd:rw', { reentrant: true });
  await rw.writeLock().acquire();
  await rw.readLock().acquire();
  await sleep(2500);
  assert.deepEqual(await r.call('RWLOCK.HOLDS', 'wd:rw', rw.owner), [1, 1]);
  await rw.writeLock().release();
  await rw.readLock().release();
  assert.equal(await r.exists('wd:rw'), 0);
});

for (const kind of ['lock', 'fair', 'write']) {
  test(`a ${kind} lock force-unlocked by someone else aborts its signal and its release rejects`, async () => {
    const lost = [];
    const opts = { onLost: (e) => lost.push(e) };
    const lock =
      kind === 'lock'
        ? client.lock('lost:' + kind, opts)
        : kind === 'fair'
          ? client.fairLock('lost:' + kind, opts)
          : client.readWriteLock('lost:' + kind, opts).writeLock();
    assert.equal(await lock.acquire(), true);
    const signal = lock.signal;
    const force = { lock: ['LOCK.FORCEUNLOCK'], fair: ['FAIRLOCK.FORCEUNLOCK'], write: ['RWLOCK.FORCEUNLOCK'] }[kind];
    assert.equal(await r.call(force[0], 'lost:' + kind, ...(kind === 'write' ? ['WRITE'] : [])), 1);
    const reason = await aborted(signal);
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.equal(reason.code, 'ELOCKLOST');
    assert.deepEqual(lost, [reason]);
    await assert.rejects(lock.release(), LockLostError);
    assert.equal(await r.exists('lost:' + kind), 0);
    // The lock object is usable again afterwards, with a fresh signal.
    assert.equal(await lock.acquire({ timeout: 0 }), true);
    assert.notEqual(lock.signal, signal);
    assert.equal(lock.signal.aborted, false);
    await lock.release();
  });
}

test('releasing a hold lost before a new grant rejects and leaves the new hold alone', async () => {
  const lock = client.lock('lost:again');
  await lock.acquire();
  const old = lock.signal;
  await r.call('LOCK.FORCEUNLOCK', 'lost:again');
  await aborted(old);
  assert.equal(await lock.acquire(), true); // a new holding period
  await assert.rejects(lock.release(), LockLostError); // the hold of the old one
  assert.deepEqual(await r.hgetall('lost:again'), { [lock.owner]: '1' });
  await lock.release();
  assert.equal(await r.exists('lost:again'), 0);
  await assert.rejects(lock.release(), { code: 'ELOCKNOTHELD' });
});

test('using() hands the callback a signal that aborts when the lock is lost, and rejects', async () => {
  const lock = client.lock('lost:using');
  await assert.rejects(
    using(lock, async (signal) => {
      await r.call('LOCK.FORCEUNLOCK', 'lost:using');
      const reason = await aborted(signal);
      assert.ok(reason instanceof LockLostError);
      return 'done';
    }),
    LockLostError,
  );
});

test('a fixed lease that runs out aborts the signal; the watchdog does not renew it', async () => {
  const lock = client.lock('lease');
  const renewsBefore = await calls(r, 'LOCK.RENEW');
  assert.equal(await lock.acquire({ lease: 300 }), true);
  const reason = await aborted(lock.signal);
  assert.ok(reason instanceof LockLostError);
  assert.match(reason.message, /lease/);
  await assert.rejects(lock.release(), LockLostError);
  assert.equal(await calls(r, 'LOCK.RENEW'), renewsBefore);
});
