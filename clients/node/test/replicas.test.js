'use strict';
// Replicas synced, as Redisson's checkLockSyncedSlaves (issue 29): on a primary with a replica,
// every grant, renewal and unlock (and semaphore change) waits for the replica (WAIT); with
// the replica stopped (SIGSTOP: it acknowledges nothing), a grant is given back and
// NoSyncedReplicasError thrown, a release stays applied and throws it, a renewal is kept. With
// no replica no WAIT is sent.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { startServer, startReplica, raw, until, calls, parked } = require('./support/server');
const { LockClient, NoSyncedReplicasError, LockNotHeldError } = require('..');

let primary;
let replica;
let p;
let rep;
let locks;

test.before(async () => {
  primary = await startServer();
  replica = await startReplica(primary);
  p = raw(primary.port);
  rep = raw(replica.port);
  locks = new LockClient(raw(primary.port), { syncTimeout: 200, watchdogTimeout: 3000, renewInterval: 300 });
});

test.after(async () => {
  if (locks) await locks.quit({ client: true });
  for (const c of [p, rep]) if (c) c.disconnect();
  for (const s of [replica, primary]) if (s) await s.stop();
});

/** Runs `fn` with the replica stopped (SIGSTOP), continued after it. */
async function stopped(fn) {
  replica.signal('SIGSTOP');
  try {
    return await fn();
  } finally {
    replica.signal('SIGCONT');
    await until(async () => Number(await p.call('WAIT', '1', '100')) === 1, 'the replica back');
  }
}

const waits = async () => (await calls(p, 'WAIT')) + (await calls(p, 'WAITAOF'));

test('every grant and release waits for the replica, which has it when the call returns', async () => {
  const lock = locks.lock('s:lock', { lease: 30000, reentrant: true });
  await lock.acquire({ timeout: 0 }); // the replica count is learned
  await lock.release();
  const before = await waits();
  assert.equal(await lock.acquire({ timeout: 0 }), true);
  assert.deepEqual(await rep.hgetall('s:lock'), { [lock.owner]: '1' });
  assert.equal(await lock.acquire(), true); // reentry, as a wait
  assert.deepEqual(await rep.hgetall('s:lock'), { [lock.owner]: '2' });
  await lock.release();
  assert.deepEqual(await rep.hgetall('s:lock'), { [lock.owner]: '1' });
  await lock.release();
  assert.equal(await rep.exists('s:lock'), 0);
  assert.equal((await waits()) - before, 4, 'one WAIT per call');
});

test('an unsynced grant is given back and rejects; an unsynced refusal is a refusal', async () => {
  const lock = locks.fairLock('s:fair', { lease: 30000 });
  const other = locks.fairLock('s:fair', { lease: 30000 });
  await stopped(async () => {
    const start = Date.now();
    const err = await lock.acquire({ timeout: 0 }).then(
      () => assert.fail('granted'),
      (e) => e,
    );
    assert.ok(err instanceof NoSyncedReplicasError, String(err));
    assert.equal(err.code, 'ELOCKNOSYNC');
    assert.equal(err.replicas, 1);
    assert.ok(Date.now() - start >= 200, 'it waited the sync timeout');
    assert.equal(await p.exists('s:fair'), 0, 'given back on the primary');
  });
  assert.equal(await lock.acquire({ timeout: 0 }), true);
  await stopped(async () => assert.equal(await other.acquire({ timeout: 0 }), false));
  await lock.release();
});

test('an unsynced reentry gives back that hold only; a fenced token stays', async () => {
  const lock = locks.readWriteLock('s:rw', { fenced: true, reentrant: true }).writeLock();
  assert.equal(await lock.acquire({ lease: 30000 }), true);
  assert.equal(lock.token, 1);
  await stopped(async () => {
    await assert.rejects(lock.acquire({ lease: 30000 }), NoSyncedReplicasError);
    assert.deepEqual(await p.hgetall('s:rw'), { mode: 'write', [`${lock.owner}:write`]: '1' });
  });
  assert.equal(await lock.holdCount(), 1);
  assert.equal(lock.token, 1);
  await lock.release();
  assert.equal(await p.exists('s:rw'), 0);
});

test('a grant made while parked is synced, and given back when it is not', async () => {
  const lock = locks.lock('s:park', { lease: 30000 });
  await p.call('LOCK.ACQUIRE', 's:park', 'holder', '30000');
  const pending = lock.acquire({ timeout: 10000 }).then(
    (v) => v,
    (e) => e,
  );
  await until(async () => (await parked(p)) === 1, 'the waiter parked');
  await stopped(async () => {
    assert.equal(await p.call('LOCK.UNLOCK', 's:park', 'holder', '30000'), 1);
    assert.ok((await pending) instanceof NoSyncedReplicasError);
    assert.equal(await p.exists('s:park'), 0, 'given back');
  });
  await p.call('LOCK.ACQUIRE', 's:park', 'holder', '30000');
  const again = lock.acquire({ timeout: 10000 });
  await until(async () => (await parked(p)) === 1, 'the waiter parked');
  await p.call('LOCK.UNLOCK', 's:park', 'holder', '30000');
  assert.equal(await again, true);
  assert.deepEqual(await rep.hgetall('s:park'), { [lock.owner]: '1' }, 'the replica had it when acquire resolved');
  await lock.release();
});

test('an unsynced release is applied and rejects; the lock is then not held', async () => {
  const lock = locks.lock('s:rel', { lease: 30000 });
  await lock.acquire();
  await stopped(async () => {
    const err = await lock.release().then(
      () => assert.fail('synced'),
      (e) => e,
    );
    assert.ok(err instanceof NoSyncedReplicasError);
    assert.equal(err.reply, 1);
    assert.equal(await p.exists('s:rel'), 0);
  });
  await assert.rejects(lock.release(), LockNotHeldError);
});

test('a renewal no replica acknowledged keeps the lock, and renewals go on', async () => {
  const lock = locks.lock('s:wd');
  await lock.acquire();
  await stopped(() => sleep(700));
  const before = await calls(p, 'LOCK.RENEW');
  await until(async () => (await calls(p, 'LOCK.RENEW')) >= before + 2, 'renewals go on');
  assert.equal(lock.signal.aborted, false);
  assert.ok((await p.pttl('s:wd')) > 2000);
  await lock.release();
});

test('semaphore grants no replica acknowledged are given back', async () => {
  const sem = locks.semaphore('s:sem');
  const psem = locks.permitExpirableSemaphore('s:psem', { lease: 30000 });
  await sem.trySetPermits(3);
  await psem.trySetPermits(2);
  await stopped(async () => {
    await assert.rejects(sem.acquire({ permits: 2, timeout: 0 }), NoSyncedReplicasError);
    assert.equal(await p.get('s:sem'), '3');
    await assert.rejects(sem.acquire({ permits: 2 }), NoSyncedReplicasError); // as a wait
    assert.equal(await p.get('s:sem'), '3');
    await assert.rejects(psem.acquire(), NoSyncedReplicasError);
    assert.equal(await p.zcard('{s:psem}:timeout'), 0);
    const err = await sem.release(1).then(
      () => assert.fail('synced'),
      (e) => e,
    );
    assert.equal(err.reply, 4, 'a release stays applied');
  });
  const ids = await psem.acquire();
  assert.equal(ids.length, 1);
  await psem.release(ids);
});

test('the rate limiter waits for no replica, as Redisson\'s', async () => {
  // Redisson sends its rate-limiter bodies with evalWriteAsync, never the synced eval.
  const limiter = locks.rateLimiter('s:rate');
  await stopped(async () => {
    const before = await waits();
    assert.equal(await limiter.trySetRate('OVERALL', 2, 60000), true);
    assert.equal(await limiter.tryAcquire(), true);
    assert.equal(await limiter.acquire({ timeout: 1000 }), true);
    assert.equal(await limiter.release(1), 1);
    assert.equal(await limiter.setRate('OVERALL', 3, 60000, { keepState: true }), true);
    assert.equal(await waits(), before, 'no WAIT sent');
  });
});

test('without sync nothing waits', async () => {
  const off = new LockClient(p, { syncReplicas: false });
  try {
    const lock = off.lock('s:off', { lease: 30000 });
    await stopped(async () => {
      const before = await waits();
      assert.equal(await lock.acquire({ timeout: 0 }), true);
      await lock.release();
      assert.equal(await waits(), before);
    });
  } finally {
    await off.quit();
  }
});

test('with no replica no WAIT is sent, and INFO at most about once a second', async () => {
  const solo = await startServer();
  const r = raw(solo.port);
  const client = new LockClient(r);
  try {
    const lock = client.lock('s:solo', { lease: 30000 });
    assert.equal(await lock.acquire({ timeout: 0 }), true); // connected, the count learned
    await lock.release();
    const before = await calls(r, 'INFO');
    const start = Date.now();
    for (let i = 0; i < 500; i++) {
      assert.equal(await lock.acquire({ timeout: 0 }), true);
      await lock.release();
    }
    const elapsed = (Date.now() - start) / 1000;
    const infos = (await calls(r, 'INFO')) - before - 1; // less the count above
    assert.ok(infos <= elapsed + 1, `${infos} INFO in ${elapsed} s: at most one a second`);
    assert.equal((await calls(r, 'WAIT')) + (await calls(r, 'WAITAOF')), 0);
  } finally {
    await client.quit();
    r.disconnect();
    await solo.stop();
  }
});
