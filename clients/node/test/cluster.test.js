'use strict';
// The library on a Redis Cluster (ioredis' Cluster client): every command goes straight to the
// lock's slot (no MOVED), waits park on the right node, a lost reply is settled there.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { Cluster } = require('ioredis');
const { raw, calls } = require('./support/server');
const { startCluster } = require('./support/cluster');
const { LockClient, LockLostError } = require('..');

let cluster;
let rc;
let client;

test.before(async () => {
  cluster = await startCluster(3);
  rc = new Cluster([{ host: '127.0.0.1', port: cluster.ports[0] }]);
  rc.on('error', () => {});
  client = new LockClient(rc, { watchdogTimeout: 1000, renewInterval: 300 });
});

test.after(async () => {
  if (client) await client.quit();
  if (rc) rc.disconnect();
  if (cluster) await cluster.stop();
});

/** Sums a counter of `command` over every node (INFO commandstats). */
async function stat(command, field) {
  let total = 0;
  for (const port of cluster.ports) {
    const r = raw(port);
    const info = await r.info('commandstats');
    r.disconnect();
    const m = info.match(new RegExp(`^cmdstat_${command.replace('.', '\\.')}:.*${field}=(\\d+)`, 'm'));
    total += m ? Number(m[1]) : 0;
  }
  return total;
}

/** The node that serves `key`'s slot. */
async function nodeOf(key) {
  const slot = Number(await rc.cluster('KEYSLOT', key));
  for (const [from, to, [, port]] of await rc.cluster('SLOTS')) {
    if (slot >= from && slot <= to) return raw(port);
  }
  throw new Error(`no node serves slot ${slot}`);
}

const NAMES = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];

test('locks on names in every slot range are routed to their node, never redirected', async () => {
  const slots = new Set();
  for (const name of NAMES) slots.add(Number(await rc.cluster('KEYSLOT', name)));
  assert.ok(slots.size > 1);
  for (const name of NAMES) {
    const lock = client.lock(name, { fenced: true });
    assert.equal(await lock.acquire(), true);
    assert.equal(lock.token, 1);
    assert.equal(await lock.holdCount(), 1);
    const node = await nodeOf(name);
    assert.deepEqual(await node.hgetall(name), { [lock.owner]: '1' });
    node.disconnect();
    await lock.release();
    assert.equal(await lock.isLocked(), false);
  }
  assert.equal(await stat('lock.acquire', 'rejected_calls'), 0, 'no MOVED');
  assert.equal(await stat('lock.unlock', 'rejected_calls'), 0, 'no MOVED');
});

test('8 tasks x 25 acquisitions per kind exclude each other on a cluster', async () => {
  const kinds = {
    lock: (name) => client.lock(name),
    fair: (name) => client.fairLock(name),
    write: (name) => client.readWriteLock(name).writeLock(),
  };
  for (const [kind, make] of Object.entries(kinds)) {
    const name = `ex:${kind}`;
    let inside = 0;
    let max = 0;
    const task = async () => {
      const lock = make(name);
      for (let i = 0; i < 25; i++) {
        assert.equal(await lock.acquire({ timeout: 60000 }), true);
        inside += 1;
        max = Math.max(max, inside);
        await rc.incr(`{${name}}:n`);
        inside -= 1;
        await lock.release();
      }
    };
    await Promise.all(Array.from({ length: 8 }, task));
    assert.equal(max, 1, kind);
    assert.equal(await rc.get(`{${name}}:n`), '200', kind);
  }
});

test('the watchdog renews on the lock node and a force-unlock there aborts the signal', async () => {
  const lock = client.lock('golf');
  await lock.acquire();
  await sleep(1500);
  assert.equal(await lock.isHeld(), true, 'renewed past its 1 s lease');
  const node = await nodeOf('golf');
  await node.call('LOCK.FORCEUNLOCK', 'golf');
  node.disconnect();
  // The renewal may have noticed the loss already (it runs every 300 ms): then the event has fired.
  const reason = lock.signal.aborted
    ? lock.signal.reason
    : await new Promise((resolve) => lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)));
  assert.ok(reason instanceof LockLostError);
  await assert.rejects(lock.release(), LockLostError);
});

test('a grant whose reply is lost on a cluster node is recognised as held', async () => {
  const c = new LockClient(rc, { commandTimeout: 200 });
  const node = await nodeOf('hotel');
  try {
    const lock = c.lock('hotel');
    await c.lock('warmup:{hotel}').acquire({ timeout: 0, lease: 1000 }); // connect to the node first
    const holds = await calls(node, 'LOCK.HOLDS');
    const stalled = node.call('DEBUG', 'SLEEP', '1');
    await sleep(100);
    assert.equal(await lock.acquire({ timeout: 0 }), true);
    await stalled;
    assert.ok((await calls(node, 'LOCK.HOLDS')) > holds, 'settled by LOCK.HOLDS on the lock node');
    assert.deepEqual(await node.hgetall('hotel'), { [lock.owner]: '1' });
    await lock.release();
    assert.equal(await node.exists('hotel'), 0);
  } finally {
    node.disconnect();
    await c.quit();
  }
});

test('the synchronizers route to their slot, park there, and an abort ends the wait there', async () => {
  for (const name of NAMES) {
    const sem = client.semaphore(`sem-${name}`);
    assert.equal(await sem.trySetPermits(1), true);
    const node = await nodeOf(`sem-${name}`);
    assert.equal(await node.get(`sem-${name}`), '1');
    assert.equal(await sem.acquire(), true);
    const controller = new AbortController();
    const waiting = sem.acquire({ signal: controller.signal });
    await sleep(100);
    controller.abort(new Error('stop'));
    await assert.rejects(waiting, /stop/);
    const next = sem.acquire({ timeout: 10000 });
    await sleep(100);
    await sem.release();
    assert.equal(await next, true);
    node.disconnect();
    const psem = client.permitExpirableSemaphore(`psem-${name}`, { lease: 30000 });
    await psem.trySetPermits(1);
    const ids = await psem.acquire();
    assert.equal(await psem.tryRelease(ids), true);
    const latch = client.countDownLatch(`latch-${name}`);
    await latch.trySetCount(1);
    const opened = latch.await({ timeout: 10000 });
    await latch.countDown();
    assert.equal(await opened, true);
  }
  assert.equal(await stat('semaphore.acquire', 'rejected_calls'), 0, 'no MOVED');
});

test('rate limiters route to their slot, keep their keys there, and park there', async () => {
  for (const name of ['api-alpha', '{user:42}:api', 'api-foxtrot']) {
    const limiter = client.rateLimiter(name);
    assert.equal(await limiter.trySetRate('PER_CLIENT', 1, 3600000), true);
    assert.equal(await limiter.tryAcquire(), true);
    const node = await nodeOf(name);
    const value = name.includes('{') ? `${name}:value:${client.id}` : `{${name}}:value:${client.id}`;
    assert.equal(await node.get(value), '0', 'on the slot\'s primary');
    const waiting = limiter.acquire({ timeout: 10000 });
    await sleep(100);
    assert.equal(await limiter.release(1), 1, 'the permits before the parked waiter took its own');
    assert.equal(await waiting, true);
    assert.equal(await limiter.availablePermits(), 0);
    node.disconnect();
  }
  assert.equal(await stat('ratelimiter.acquire', 'rejected_calls'), 0, 'no MOVED');
});
