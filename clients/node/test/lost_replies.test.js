'use strict';
// Replies that never arrive. The server is stalled with DEBUG SLEEP from another connection
// while the library's timer (commandTimeout 200 ms, or the wait plus a 100 ms grace) is
// shorter: the library must never send an acquire twice, must learn from the server what it
// holds, and must not let a re-sent unlock release a second hold.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { withServer, calls, until, parked } = require('./support/server');

let r;
let staller;
let client;
withServer(
  (env) => {
    ({ r, client } = env);
    staller = env.raw();
  },
  { commandTimeout: 200, blockGrace: 100 },
);

/**
 * Stalls the server for `seconds`, then runs `after` (pipelined: right after the sleep).
 * Resolves once the sleep has begun, with `{ done }`: the pipeline's replies.
 */
async function stall(seconds, after = []) {
  const done = staller.pipeline([['debug', 'sleep', String(seconds)], ...after]).exec();
  await sleep(100);
  return { done };
}

test('an acquire granted while its reply is lost is recognised as held, without re-sending it', async () => {
  const lock = client.lock('lost:grant');
  const acquires = await calls(r, 'LOCK.ACQUIRE');
  const holds = await calls(r, 'LOCK.HOLDS');
  const stalled = await stall(1);
  assert.equal(await lock.acquire({ timeout: 0 }), true);
  await stalled.done;
  assert.equal(await calls(r, 'LOCK.ACQUIRE'), acquires + 1, 'the acquire was sent once');
  assert.ok((await calls(r, 'LOCK.HOLDS')) > holds, 'settled by asking the server');
  assert.deepEqual(await r.hgetall('lost:grant'), { [lock.owner]: '1' });
  assert.equal(await lock.holdCount(), 1);
  await lock.release();
  assert.equal(await r.exists('lost:grant'), 0, 'one release frees it: no hidden second hold');
});

test('a fenced grant whose reply is lost still learns its token', async () => {
  const lock = client.fairLock('lost:token', { fenced: true });
  await r.set('redisson_lock_token:{lost:token}', 41);
  const stalled = await stall(1);
  assert.equal(await lock.acquire({ timeout: 0 }), true);
  await stalled.done;
  assert.equal(lock.token, 42);
  await lock.release();
});

test('an unlock whose reply is lost is re-sent with its latch and releases one hold, not two', async () => {
  const lock = client.lock('lost:unlock', { reentrant: true });
  await lock.acquire();
  await lock.acquire();
  const unlocks = await calls(r, 'LOCK.UNLOCK');
  const stalled = await stall(1);
  await lock.release();
  await stalled.done;
  assert.ok((await calls(r, 'LOCK.UNLOCK')) >= unlocks + 2, 'the unlock was re-sent');
  assert.deepEqual(await r.hgetall('lost:unlock'), { [lock.owner]: '1' });
  const latches = await r.keys('redisson_unlock_latch:{lost:unlock}:*');
  assert.equal(latches.length, 1);
  assert.equal(await r.get(latches[0]), '0');
  await lock.release();
  assert.equal(await r.exists('lost:unlock'), 0);
});

test('a read unlock whose reply is lost releases one read hold, not two', async () => {
  const rw = client.readWriteLock('lost:read', { reentrant: true });
  await rw.readLock().acquire();
  await rw.readLock().acquire();
  const stalled = await stall(1);
  await rw.readLock().release();
  await stalled.done;
  assert.deepEqual(await r.call('RWLOCK.HOLDS', 'lost:read', rw.owner), [1, 0]);
  await rw.readLock().release();
  assert.equal(await r.exists('lost:read'), 0);
});

test('a waiting acquire granted while its reply is lost is recognised as held', async () => {
  await r.call('LOCK.ACQUIRE', 'lost:wait', 'other:1', 30000);
  const lock = client.lock('lost:wait');
  const kills = await calls(r, 'CLIENT|KILL');
  const waiting = lock.acquire({ timeout: 300 });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  // The unlock runs right after the sleep and hands the lock to the parked waiter, whose
  // client-side timer (300 + 100 ms) has long fired.
  const stalled = await stall(1, [['call', 'LOCK.UNLOCK', 'lost:wait', 'other:1', '30000']]);
  assert.equal(await waiting, true);
  await stalled.done;
  assert.ok((await calls(r, 'CLIENT|KILL')) > kills, 'the lost wait was ended server-side');
  assert.deepEqual(await r.hgetall('lost:wait'), { [lock.owner]: '1' });
  await lock.release();
  assert.equal(await r.exists('lost:wait'), 0);
});

test('a waiting acquire that loses its reply without a grant leaves nothing parked or held', async () => {
  await r.call('LOCK.ACQUIRE', 'lost:nogrant', 'other:1', 30000);
  const lock = client.lock('lost:nogrant');
  const waiting = lock.acquire({ timeout: 300 });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  const stalled = await stall(1);
  assert.equal(await waiting, false);
  await stalled.done;
  assert.equal(await parked(r), 0);
  assert.deepEqual(await r.hgetall('lost:nogrant'), { 'other:1': '1' });
  assert.equal(await lock.holdCount(), 0);
});
