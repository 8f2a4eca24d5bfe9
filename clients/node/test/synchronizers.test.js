'use strict';
// Redisson's synchronizers (issue 26) against the real module: Semaphore,
// PermitExpirableSemaphore and CountDownLatch on Redisson's layout; waits in the server
// (BLOCK) in arrival order, timeouts, using(), and aborted waits that keep no permit.

const test = require('node:test');
const assert = require('node:assert/strict');
const { setTimeout: sleep } = require('node:timers/promises');
const { withServer, until, parked } = require('./support/server');
const {
  LockClient,
  Semaphore,
  PermitExpirableSemaphore,
  CountDownLatch,
  LockNotHeldError,
  LockLostError,
  LockTimeoutError,
  using,
} = require('..');

let r;
let client;
withServer((env) => ({ r, client } = env));

const HEX_ID = /^[0-9a-f]{32}$/;

test('arguments are checked before anything is sent; constructors take a LockClient', async () => {
  const sem = client.semaphore('bad');
  for (const permits of [0, -1, 1.5, '2']) {
    await assert.rejects(sem.acquire({ permits }), RangeError);
    await assert.rejects(sem.release(permits), RangeError);
  }
  await assert.rejects(sem.acquire({ timeout: -1 }), RangeError);
  await assert.rejects(sem.trySetPermits(-1), RangeError);
  await assert.rejects(sem.trySetPermits(1, { lease: 0 }), RangeError);
  await assert.rejects(client.permitExpirableSemaphore('bad').acquire({ lease: -1 }), RangeError);
  await assert.rejects(client.permitExpirableSemaphore('bad', { lease: 10 }).release([]), TypeError);
  await assert.rejects(client.countDownLatch('bad').trySetCount(-1), RangeError);
  assert.throws(() => client.semaphore(''), TypeError);
  assert.throws(() => new Semaphore(r, 'x'), /^TypeError: Semaphore takes a LockClient, not an ioredis client: .*locks\.semaphore\(name\)/);
  assert.throws(() => new PermitExpirableSemaphore(r, 'x'), /locks\.permitExpirableSemaphore\(name\)/);
  assert.throws(() => new CountDownLatch(undefined, 'x'), /^TypeError: CountDownLatch takes a LockClient: /);
  assert.equal(await r.exists('bad'), 0);
});

test('a semaphore counts permits in Redisson\'s key', async () => {
  const sem = client.semaphore('pool');
  assert.equal(await sem.availablePermits(), 0);
  assert.equal(await sem.trySetPermits(3), true);
  assert.equal(await sem.trySetPermits(5), false);
  assert.equal(await r.get('pool'), '3');
  assert.equal(await sem.acquire({ permits: 2 }), true);
  assert.equal(await r.get('pool'), '1');
  assert.equal(await sem.acquire({ permits: 2, timeout: 0 }), false);
  assert.equal(await sem.release(2), 3);
  await sem.addPermits(2);
  assert.equal(await sem.availablePermits(), 5);
  await sem.addPermits(-4);
  assert.equal(await sem.drainPermits(), 1);
  assert.equal(await sem.availablePermits(), 0);
  assert.equal(await client.semaphore('leased').trySetPermits(1, { lease: 30000 }), true);
  const pttl = await r.pttl('leased');
  assert.ok(pttl > 29000 && pttl <= 30000, `lease: ${pttl}`);
});

test('waiters park in the server and are served in arrival order', async () => {
  const sem = client.semaphore('fifo');
  await sem.trySetPermits(0);
  const order = [];
  const three = client.semaphore('fifo').acquire({ permits: 3, timeout: 10000 }).then((ok) => order.push(['3', ok]));
  await until(async () => (await parked(r)) === 1, 'the waiter for 3 parked');
  const one = client.semaphore('fifo').acquire({ timeout: 10000 }).then((ok) => order.push(['1', ok]));
  await until(async () => (await parked(r)) === 2, 'the waiter for 1 parked');
  await sem.release(1);
  await sleep(100);
  assert.deepEqual(order, [], 'one permit does not let the later waiter for 1 overtake');
  await sem.release(2);
  await three;
  await sem.release(1);
  await one;
  assert.deepEqual(order, [['3', true], ['1', true]]);
  const start = Date.now();
  assert.equal(await sem.acquire({ timeout: 150 }), false);
  assert.ok(Date.now() - start >= 100, 'waited in the server');
  assert.equal(await parked(r), 0);
});

test('using() holds permits for the callback and releases them, also when it throws', async () => {
  const sem = client.semaphore('using');
  await sem.trySetPermits(2);
  const out = await using(
    sem,
    async (signal) => {
      assert.equal(signal.aborted, false);
      assert.equal(await sem.availablePermits(), 0);
      return 7;
    },
    { permits: 2 },
  );
  assert.equal(out, 7);
  assert.equal(await sem.availablePermits(), 2);
  await assert.rejects(
    using(sem, async () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal(await sem.availablePermits(), 2);
  await assert.rejects(using(sem, async () => 1, { permits: 3, timeout: 20 }), LockTimeoutError);
});

test('expirable permits have ids and absolute leases in Redisson\'s zset', async () => {
  const psem = client.permitExpirableSemaphore('jobs', { lease: 30000 });
  assert.equal(await psem.trySetPermits(3), true);
  const ids = await psem.acquire({ permits: 2 });
  assert.equal(ids.length, 2);
  for (const id of ids) assert.match(id, HEX_ID);
  assert.equal(await r.get('jobs'), '1');
  const deadline = Number(await r.zscore('{jobs}:timeout', Buffer.from(ids[0], 'hex')));
  assert.ok(Math.abs(deadline - (Date.now() + 30000)) < 5000, `absolute expiry: ${deadline}`);
  assert.equal(await psem.availablePermits(), 1);
  assert.equal(await psem.acquiredPermits(), 2);
  assert.equal(await psem.acquire({ permits: 2, timeout: 0 }), null);
  assert.equal(await psem.updateLease(ids[0], 60000), true);
  assert.equal(await psem.tryRelease(ids[0]), true);
  assert.equal(await psem.tryRelease(ids[0]), false);
  await assert.rejects(psem.release(ids[0]), LockNotHeldError);
  assert.equal(await psem.updateLease(ids[0], 1000), false);
  await psem.release([ids[1]]);
  assert.equal(await psem.availablePermits(), 3);
  await psem.setPermits(5);
  assert.equal(await psem.availablePermits(), 5);
});

test('an expired permit comes back by itself; using() aborts its signal and its release rejects', async () => {
  const psem = client.permitExpirableSemaphore('short', { lease: 150 });
  await psem.trySetPermits(1);
  let reason;
  await assert.rejects(
    using(psem, async (signal, ids) => {
      assert.equal(ids.length, 1);
      await until(() => signal.aborted, 'the lease ran out');
      reason = signal.reason;
      await until(async () => (await r.get('short')) === '1', 'the permit back, nobody calling');
    }),
    LockLostError,
  );
  assert.ok(reason instanceof LockLostError);
  const extended = await using(
    psem,
    async (signal, [id]) => {
      assert.equal(await psem.updateLease(id, 30000), true);
      await sleep(300);
      return signal.aborted;
    },
    { lease: 200 },
  );
  assert.equal(extended, false, 'updateLease moved the deadline');
  assert.equal(await psem.availablePermits(), 1);
});

test('a count-down latch opens at zero and wakes every waiter', async () => {
  const latch = client.countDownLatch('ready');
  assert.equal(await latch.await({ timeout: 0 }), true, 'an absent latch is open');
  assert.equal(await latch.trySetCount(2), true);
  assert.equal(await latch.trySetCount(5), false);
  assert.equal(await r.get('ready'), '2');
  assert.equal(await latch.count(), 2);
  assert.equal(await latch.await({ timeout: 50 }), false);
  const waiters = [1, 2, 3].map(() => client.countDownLatch('ready').await({ timeout: 10000 }));
  await until(async () => (await parked(r)) === 3, '3 waiters parked');
  assert.equal(await latch.countDown(), 1);
  assert.equal(await latch.countDown(), 0);
  assert.deepEqual(await Promise.all(waiters), [true, true, true]);
  assert.equal(await r.exists('ready'), 0);
  assert.equal(await latch.countDown(), 0);
  assert.equal(await r.exists('ready'), 0, 'nothing written on an absent latch');
});

test('an aborted wait leaves the server queue, rejects with the reason and keeps no permit', async () => {
  const sem = client.semaphore('abort');
  const psem = client.permitExpirableSemaphore('pabort', { lease: 30000 });
  const latch = client.countDownLatch('labort');
  await latch.trySetCount(1);
  const waits = [
    (signal) => sem.acquire({ signal }),
    (signal) => psem.acquire({ signal, timeout: 10000 }),
    (signal) => latch.await({ signal }),
  ];
  for (const wait of waits) {
    const controller = new AbortController();
    const pending = wait(controller.signal);
    await until(async () => (await parked(r)) === 1, 'the waiter parked');
    controller.abort(new Error('stop'));
    await assert.rejects(pending, /stop/);
    assert.equal(await parked(r), 0);
  }
  await assert.rejects(sem.acquire({ signal: AbortSignal.timeout(50) }), { name: 'TimeoutError' });
  await assert.rejects(sem.acquire({ signal: AbortSignal.abort() }), { name: 'AbortError' });
  assert.equal(await sem.release(1), 1, 'no aborted waiter took a permit');
  assert.equal(await psem.acquiredPermits(), 0);
});

/**
 * Makes the race certain: the grant `grant()` runs after the abort and before its
 * CLIENT UNBLOCK, which then finds the waiter no longer parked; the grant comes as its reply.
 */
async function abortRacingAGrant(acquire, grant) {
  const controller = new AbortController();
  const pending = acquire(controller.signal);
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  const conn = client.conn;
  const original = conn.client;
  conn.client = async (...args) => {
    if (args[0] === 'UNBLOCK') await grant();
    return original.apply(conn, args);
  };
  try {
    controller.abort(new Error('late'));
    await assert.rejects(pending, /late/);
  } finally {
    conn.client = original;
  }
}

test('a grant that raced the abort is given back', async () => {
  const sem = client.semaphore('race');
  await abortRacingAGrant(
    (signal) => sem.acquire({ permits: 2, signal }),
    () => r.call('SEMAPHORE.RELEASE', 'race', '2'),
  );
  assert.equal(await sem.availablePermits(), 2);

  const psem = client.permitExpirableSemaphore('prace', { lease: 30000 });
  await psem.trySetPermits(0);
  await abortRacingAGrant(
    (signal) => psem.acquire({ signal }),
    () => r.call('PSEMAPHORE.SETPERMITS', 'prace', '1'),
  );
  assert.equal(await psem.availablePermits(), 1);
  assert.equal(await psem.acquiredPermits(), 0);
});

test('an abort whose unblock meets the grant in the same server iteration gives it back in bounded time', async () => {
  // A grant and the CLIENT UNBLOCK in one event-loop iteration of the server (both pipelined on
  // the shared connection): the module answers the unblock with the grant (Redis 7.0 alone
  // would drop that reply), so the aborted wait gives it back, and does not hang.
  const quick = new LockClient(r, { blockGrace: 200 });
  const conn = quick.conn;
  const original = conn.client;
  try {
    const sem = quick.semaphore('sameloop');
    const controller = new AbortController();
    const pending = sem.acquire({ signal: controller.signal });
    await until(async () => (await parked(r)) === 1, 'the waiter parked');
    // The release and the library's CLIENT UNBLOCK in one write: one server iteration.
    conn.client = async (...args) => {
      if (args[0] !== 'UNBLOCK') return original.apply(conn, args);
      const replies = await conn.pipeline().call('SEMAPHORE.RELEASE', 'sameloop', '1').client(...args).exec();
      return replies[1][1];
    };
    controller.abort(new Error('same loop'));
    const start = Date.now();
    await assert.rejects(pending, /same loop/);
    assert.ok(Date.now() - start < 5000);
    assert.equal(await parked(r), 0);
    assert.equal(await sem.availablePermits(), 1, 'the grant that met the unblock was given back');
  } finally {
    conn.client = original;
    await quick.quit();
  }
});
