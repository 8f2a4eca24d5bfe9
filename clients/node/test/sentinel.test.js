'use strict';
// Sentinel (issue 29): a LockClient made from a Sentinel-managed ioredis client
// (`new Redis({ sentinels, name })`) follows a failover. A primary, a replica and three
// sentinels (down after 1 s); locks held (synced to the replica) and waiters parked, then the
// primary is killed: the sentinels promote the replica, the parked waiters' lost waits are
// settled there (not granted) and become new waits on the new primary, granted when the lock
// is released there; the held locks are still held on the new primary and the watchdog goes on
// renewing them there.

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { startServer, startReplica, startSentinels, raw, until, calls, parked } = require('./support/server');
const { LockClient } = require('..');

test('locks and waiters follow a Sentinel failover to the new primary', async (t) => {
  const primary = await startServer();
  const replica = await startReplica(primary);
  let sentinels;
  const conns = [];
  let locks;
  try {
    sentinels = await startSentinels(primary);
    const m = new Redis({ sentinels: sentinels.sentinels, name: sentinels.name });
    m.on('error', () => {});
    conns.push(m);
    locks = new LockClient(m, { watchdogTimeout: 10000, renewInterval: 500 });
    const held = locks.lock('held');
    const fixed = locks.fairLock('fixed', { lease: 60000 });
    assert.equal(await held.acquire(), true); // each synced to the replica before it resolves
    assert.equal(await fixed.acquire(), true);
    const old = raw(primary.port);
    conns.push(old);
    for (const name of ['busy', 'rbusy']) await old.call('LOCK.ACQUIRE', name, 'holder', '60000');
    assert.equal(await old.call('WAIT', '1', '5000'), 1);

    const waiter = locks.lock('busy', { lease: 60000 });
    const reader = locks.readWriteLock('rbusy', { lease: 60000 }).readLock();
    await old.call('DEL', 'rbusy');
    await old.call('RWLOCK.WLOCK', 'rbusy', 'holder', '60000');
    assert.equal(await old.call('WAIT', '1', '5000'), 1);
    const settled = (p) => p.then((v) => v, (e) => e);
    const waits = [settled(waiter.acquire({ timeout: 40000 })), settled(reader.acquire({ timeout: 40000 }))];
    await until(async () => (await parked(old)) === 2, 'both waiters parked on the primary');

    const killed = Date.now();
    await primary.stop(); // SIGKILL
    await until(async () => (await sentinels.primaryPort()) === replica.port, 'the sentinels promoted the replica', 30000);
    const now = raw(replica.port);
    conns.push(now);
    await until(async () => /role:master/.test(await now.info('replication')), 'the replica is the primary');
    await until(async () => (await parked(now)) === 2, 'both waiters parked again on the new primary', 30000);
    const failover = (Date.now() - killed) / 1000;

    assert.deepEqual(await now.hgetall('held'), { [held.owner]: '1' }, 'the held lock survived the failover');
    assert.deepEqual(await now.hgetall('fixed'), { [fixed.owner]: '1' });
    const renewed = await calls(now, 'LOCK.RENEW');
    await until(async () => (await calls(now, 'LOCK.RENEW')) >= renewed + 2, 'the watchdog renews on the new primary');
    assert.ok((await now.pttl('held')) > 9000);
    assert.equal(held.signal.aborted, false);

    assert.equal(await now.call('LOCK.UNLOCK', 'busy', 'holder', '60000'), 1);
    assert.equal(await now.call('RWLOCK.UNLOCK', 'rbusy', 'holder', 'WRITE', '60000'), 1);
    const [a, b] = await Promise.all(waits);
    assert.equal(a, true, String(a));
    assert.equal(b, true, String(b));
    assert.deepEqual(await now.hgetall('busy'), { [waiter.owner]: '1' });
    assert.deepEqual(await now.call('RWLOCK.HOLDS', 'rbusy', reader.owner), [1, 0]);
    await held.release();
    await fixed.release();
    await waiter.release();
    await reader.release();
    assert.equal(await now.exists('held', 'fixed', 'busy', 'rbusy'), 0);
    t.diagnostic(`the waiters were parked again ${failover.toFixed(1)} s after the kill`);
  } finally {
    if (locks) locks.disconnect();
    for (const c of conns) c.disconnect();
    if (sentinels) await sentinels.stop();
    await replica.stop();
    await primary.stop();
  }
});
