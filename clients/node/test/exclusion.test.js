'use strict';
// Mutual exclusion under contention: 16 async tasks x 100 acquisitions per kind, each task with
// its own lock object (its own owner), waiting with BLOCK. Inside the critical section a task
// yields to the event loop (a round trip to the server) so that a broken lock would let others
// in; the checks count who is inside at every moment and the total work done.

const test = require('node:test');
const assert = require('node:assert/strict');
const { withServer } = require('./support/server');
const { using } = require('..');

const TASKS = 16;
const ROUNDS = 100;

let r;
let client;
withServer((env) => ({ r, client } = env));

async function hammer(makeLock, counterKey) {
  let inside = 0;
  let maxInside = 0;
  const task = async () => {
    const lock = makeLock();
    for (let i = 0; i < ROUNDS; i++) {
      assert.equal(await lock.acquire({ timeout: 60000 }), true);
      inside += 1;
      maxInside = Math.max(maxInside, inside);
      await r.incr(counterKey);
      inside -= 1;
      await lock.release();
    }
  };
  await Promise.all(Array.from({ length: TASKS }, task));
  return maxInside;
}

test('the reentrant lock lets one of 16 tasks in at a time over 1600 acquisitions', async () => {
  const max = await hammer(() => client.lock('ex:lock'), 'ex:lock:n');
  assert.equal(max, 1);
  assert.equal(await r.get('ex:lock:n'), String(TASKS * ROUNDS));
  assert.equal(await r.exists('ex:lock'), 0);
});

test('the fair lock lets one of 16 tasks in at a time and leaves no waiter queued', async () => {
  const max = await hammer(() => client.fairLock('ex:fair'), 'ex:fair:n');
  assert.equal(max, 1);
  assert.equal(await r.get('ex:fair:n'), String(TASKS * ROUNDS));
  assert.equal(await r.exists('ex:fair'), 0);
  assert.deepEqual(await r.lrange('redisson_lock_queue:{ex:fair}', 0, -1), []);
  assert.deepEqual(await r.zrange('redisson_lock_timeout:{ex:fair}', 0, -1), []);
});

test('the write lock excludes 16 tasks from each other, readers are never inside with a writer', async () => {
  let writers = 0;
  let readers = 0;
  let maxWriters = 0;
  let maxReaders = 0;
  let mixed = 0;
  const task = async (_, n) => {
    const rw = client.readWriteLock('ex:rw');
    for (let i = 0; i < ROUNDS; i++) {
      const write = (n + i) % 2 === 0;
      const lock = write ? rw.writeLock() : rw.readLock();
      assert.equal(await lock.acquire({ timeout: 60000 }), true);
      if (write) writers += 1;
      else readers += 1;
      maxWriters = Math.max(maxWriters, writers);
      maxReaders = Math.max(maxReaders, readers);
      if (writers > 0 && readers > 0) mixed += 1;
      await r.incr('ex:rw:n');
      if (write) writers -= 1;
      else readers -= 1;
      await lock.release();
    }
  };
  await Promise.all(Array.from({ length: TASKS }, task));
  assert.equal(maxWriters, 1);
  assert.equal(mixed, 0);
  assert.ok(maxReaders >= 1);
  assert.equal(await r.get('ex:rw:n'), String(TASKS * ROUNDS));
  assert.equal(await r.exists('ex:rw'), 0);
});

// Issue 34: one lock object shared by every task, as natural code shares a mutex. Each acquire
// is a holder of its own, so the tasks exclude each other (before, they all re-entered the
// object's one owner and were inside at once).
for (const [kind, make] of [
  ['reentrant lock', () => client.lock('ex:shared:lock')],
  ['fair lock', () => client.fairLock('ex:shared:fair')],
  ['write lock', () => client.readWriteLock('ex:shared:rw').writeLock()],
]) {
  test(`16 tasks sharing one ${kind} object exclude each other, with acquire/release and with using()`, async () => {
    const lock = make();
    let inside = 0;
    let maxInside = 0;
    const body = async () => {
      inside += 1;
      maxInside = Math.max(maxInside, inside);
      await r.incr(`${lock.key}:n`);
      inside -= 1;
    };
    const task = async (_, n) => {
      for (let i = 0; i < ROUNDS / 4; i++) {
        if ((n + i) % 2 === 0) {
          await using(lock, body, { timeout: 60000 });
        } else {
          assert.equal(await lock.acquire({ timeout: 60000 }), true);
          await body();
          await lock.release();
        }
      }
    };
    await Promise.all(Array.from({ length: TASKS }, task));
    assert.equal(maxInside, 1);
    assert.equal(await r.get(`${lock.key}:n`), String((TASKS * ROUNDS) / 4));
    assert.equal(await r.exists(lock.key), 0);
    assert.equal(lock.holders.length, 0, 'every hold released');
  });
}

test('reentrant: true is Redisson\'s choice: tasks sharing the object re-enter its one holder', async () => {
  const lock = client.lock('ex:reentrant', { reentrant: true, lease: 30000 });
  const granted = await Promise.all(Array.from({ length: 4 }, () => lock.acquire({ timeout: 0 })));
  assert.deepEqual(granted, [true, true, true, true]);
  assert.deepEqual(await r.hgetall('ex:reentrant'), { [lock.owner]: '4' });
  for (let i = 0; i < 4; i++) await lock.release();
  assert.equal(await r.exists('ex:reentrant'), 0);
});
