'use strict';
// The fair lock: first come, first served, with the queue in Redisson's keys.

const test = require('node:test');
const assert = require('node:assert/strict');
const { withServer, until } = require('./support/server');
const { FairLock } = require('..');

let r;
let client;
withServer((env) => ({ r, client } = env));

const queue = (name) => r.lrange(`redisson_lock_queue:{${name}}`, 0, -1);

test('waiters are granted the fair lock in the order they arrived', async () => {
  const holder = client.fairLock('fifo');
  assert.ok(holder instanceof FairLock);
  await holder.acquire();
  const order = [];
  const waiters = [];
  const done = [];
  for (let i = 0; i < 6; i++) {
    const w = client.fairLock('fifo');
    waiters.push(w);
    done.push(
      w.acquire({ timeout: 30000 }).then(async (ok) => {
        assert.equal(ok, true);
        order.push(i);
        await w.release();
      }),
    );
    await until(async () => (await queue('fifo')).length === i + 1, `waiter ${i} queued`);
  }
  assert.deepEqual(
    await queue('fifo'),
    waiters.map((w) => w.owner),
  );
  await holder.release();
  await Promise.all(done);
  assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(await queue('fifo'), []);
  assert.equal(await r.exists('fifo', 'redisson_lock_timeout:{fifo}'), 0);
});

test('a try without a wait does not join the queue', async () => {
  const holder = client.fairLock('try');
  await holder.acquire();
  const other = client.fairLock('try');
  assert.equal(await other.acquire({ timeout: 0 }), false);
  assert.deepEqual(await queue('try'), []);
  await holder.release();
});

test('a waiter whose wait runs out leaves the queue', async () => {
  const holder = client.fairLock('giveup');
  await holder.acquire();
  const other = client.fairLock('giveup');
  assert.equal(await other.acquire({ timeout: 100 }), false);
  assert.deepEqual(await queue('giveup'), []);
  assert.equal(await r.zcard('redisson_lock_timeout:{giveup}'), 0);
  assert.equal(await other.holdCount(), 0);
  await holder.release();
});

test('a reentrant fair lock re-enters and forceUnlock frees it', async () => {
  const lock = client.fairLock('fair:re', { lease: 10000, reentrant: true });
  await lock.acquire();
  await lock.acquire();
  assert.equal(await lock.holdCount(), 2);
  assert.deepEqual(await r.hgetall('fair:re'), { [lock.owner]: '2' });
  const pttl = await r.pttl('fair:re');
  assert.ok(pttl > 0 && pttl <= 10000);
  assert.equal(await client.fairLock('fair:re').forceUnlock(), true);
  assert.equal(await r.exists('fair:re'), 0);
  assert.equal(await lock.forceUnlock(), false);
});
