'use strict';
// Redisson's rate limiter (issue 30) against the real module: RateLimiter on Redisson's
// RRateLimiter layout; a window shared with Redisson's own tryAcquire body by client id; waits
// in the server (BLOCK) in arrival order, timeouts, aborted waits that keep no permit, and a
// lost reply that is never sent again.

const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { withServer, until, parked, calls, ROOT } = require('./support/server');
const { LockClient, RateLimiter, RateType, LockStateUnknownError } = require('..');

let r;
let client;
let raw;
withServer((env) => ({ r, client, raw } = env));

/** Redisson's tryAcquire body of 3.38.0 to HEAD (test data, read at run time, never copied). */
const TRY_ACQUIRE = '861d9229367b5aa9889ee26c5c31be7baeba2153';

function redissonBody(sha) {
  const dir =
    process.env.LOCKMOD_REDISSON_RATELIMITER_SCRIPTS || path.join(ROOT, '..', 'shared', 'redisson-ratelimiter-scripts');
  const file = path.join(dir, 'scripts', `${sha}.lua`);
  if (!fs.existsSync(file)) throw new Error(`Redisson's rate-limiter scripts are missing at ${file}: set LOCKMOD_REDISSON_RATELIMITER_SCRIPTS`);
  return fs.readFileSync(file, 'utf8');
}

async function serverMs() {
  const [sec, usec] = await r.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** The permits of each grant in a zset, from Redisson's member: length byte, random, permits (u32 LE). */
async function grants(key) {
  const members = await r.zrangeBuffer(key, 0, -1);
  return members.map((m) => {
    assert.equal(m.length, 1 + m[0] + 4, "struct.pack('Bc0I', #random, random, permits)");
    return m.readUInt32LE(m.length - 4);
  });
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);

test('arguments are checked before anything is sent; the constructor takes a LockClient', async () => {
  const limiter = client.rateLimiter('bad');
  for (const permits of [0, -1, 1.5, '2']) {
    await assert.rejects(limiter.acquire({ permits }), RangeError);
    await assert.rejects(limiter.tryAcquire(permits), RangeError);
    await assert.rejects(limiter.release(permits), RangeError);
    await assert.rejects(limiter.trySetRate('OVERALL', permits, 1000), RangeError);
    await assert.rejects(limiter.setRate('OVERALL', 10, permits), RangeError);
  }
  await assert.rejects(limiter.trySetRate('ALL', 10, 1000), TypeError);
  await assert.rejects(limiter.trySetRate('OVERALL', 10, 1000, { keepAlive: 999 }), /at least the interval/);
  await assert.rejects(limiter.acquire({ timeout: -1 }), RangeError);
  assert.throws(() => client.rateLimiter(''), TypeError);
  assert.throws(() => client.rateLimiter('x', { clientId: '' }), TypeError);
  assert.throws(() => new RateLimiter(r, 'x'), /^TypeError: RateLimiter takes a LockClient, not an ioredis client: .*locks\.rateLimiter\(name\)/);
  assert.equal(await r.exists('bad'), 0);
});

test('a limiter grants up to its rate in Redisson\'s keys', async () => {
  const limiter = client.rateLimiter('api');
  assert.equal(await limiter.getConfig(), null);
  await assert.rejects(limiter.tryAcquire(), /RateLimiter is not initialized/);
  assert.equal(await limiter.trySetRate(RateType.OVERALL, 3, 60000), true);
  assert.equal(await limiter.trySetRate('overall', 99, 1000), false, 'set once, by anyone');
  assert.deepEqual(await r.hgetall('api'), { rate: '3', interval: '60000', type: '0', keepAliveTime: '0' });
  assert.deepEqual(await limiter.getConfig(), { type: 'OVERALL', rate: 3, interval: 60000, keepAlive: 0 });
  const before = await serverMs();
  assert.equal(await limiter.tryAcquire(2), true);
  assert.equal(await limiter.tryAcquire(), true);
  assert.equal(await limiter.tryAcquire(), false);
  assert.equal(await limiter.acquire({ timeout: 0 }), false);
  assert.equal(await r.get('{api}:value'), '0');
  assert.equal(await limiter.availablePermits(), 0);
  assert.equal(sum(await grants('{api}:permits')), 3);
  const after = await serverMs();
  for (const s of await r.zrange('{api}:permits', 0, -1, 'WITHSCORES').then((a) => a.filter((_, i) => i % 2))) {
    assert.ok(Number(s) >= before - 1 && Number(s) <= after, `scored by the server's clock: ${s}`);
  }
  await assert.rejects(limiter.tryAcquire(4), /cannot exceed defined rate/);
  assert.equal(await limiter.release(2), 2, 'taken off the newest grants');
  assert.equal(sum(await grants('{api}:permits')), 1);
  assert.equal(await limiter.release(5), 3, 'never above the rate');
  assert.equal(await r.zcard('{api}:permits'), 0);
  const kept = client.rateLimiter('kept');
  assert.equal(await kept.trySetRate('OVERALL', 1, 1000, { keepAlive: 30000 }), true);
  assert.equal(await kept.tryAcquire(), true);
  for (const key of ['kept', '{kept}:value', '{kept}:permits']) {
    const pttl = await r.pttl(key);
    assert.ok(pttl > 29000 && pttl <= 30000, `${key} lives keepAliveTime after its last use: ${pttl}`);
  }
});

test('PER_CLIENT windows are per client id, and the id is the LockClient\'s', async () => {
  const mine = client.rateLimiter('pc');
  assert.equal(mine.clientId, client.id);
  assert.ok(client.lock('any').owner.startsWith(`${client.id}:`), 'one uuid per client, as Redisson\'s instance id');
  const other = new LockClient(raw());
  try {
    const theirs = other.rateLimiter('pc');
    assert.notEqual(theirs.clientId, mine.clientId);
    assert.equal(await mine.trySetRate(RateType.PER_CLIENT, 2, 60000), true);
    assert.equal(await mine.tryAcquire(2), true);
    assert.equal(await client.rateLimiter('pc').tryAcquire(), false, 'one window per client, not per object');
    assert.equal(await theirs.tryAcquire(2), true, 'another client id: another window');
    assert.equal(await r.get(`{pc}:value:${mine.clientId}`), '0');
    assert.equal(await r.get(`{pc}:value:${theirs.clientId}`), '0');
    assert.equal(await r.exists('{pc}:value', '{pc}:permits'), 0, 'no overall window');
    const java = client.rateLimiter('pc', { clientId: 'java-instance-id' });
    assert.equal(await java.availablePermits(), 2);
    assert.equal(await r.get('{pc}:value:java-instance-id'), '2');
  } finally {
    await other.quit();
  }
});

test('a window is shared with Redisson\'s own body by client id', async () => {
  const sha = await r.script('LOAD', redissonBody(TRY_ACQUIRE));
  assert.equal(sha, TRY_ACQUIRE);
  const limiter = client.rateLimiter('shared');
  await limiter.trySetRate('PER_CLIENT', 3, 60000);
  const keys = ['shared', '{shared}:value', `{shared}:value:${client.id}`, '{shared}:permits', `{shared}:permits:${client.id}`];
  const body = async (permits) => r.evalsha(sha, 5, ...keys, permits, await serverMs(), crypto.randomBytes(16));
  assert.equal(await body(2), null, 'a Java client with this id takes 2');
  assert.equal(await limiter.availablePermits(), 1);
  assert.equal(await limiter.tryAcquire(2), false);
  assert.equal(await limiter.tryAcquire(1), true);
  const wait = await body(1);
  assert.ok(wait > 59000 && wait <= 60003, `the Java client sees the library's grant: ${wait}`);
  // One zset (a grant in the body's millisecond joins its member).
  assert.equal(sum(await grants(`{shared}:permits:${client.id}`)), 3);
});

test('setRate starts afresh, keeps the window with keepState, and does nothing with xx on no limiter', async () => {
  const limiter = client.rateLimiter('reset');
  assert.equal(await limiter.setRate('OVERALL', 5, 1000, { xx: true }), false);
  assert.equal(await r.exists('reset'), 0, 'nothing written');
  assert.equal(await limiter.setRate('OVERALL', 10, 60000), true);
  assert.equal(await limiter.tryAcquire(4), true);
  assert.equal(await limiter.setRate('OVERALL', 6, 60000, { keepState: true, xx: true }), true);
  assert.equal(await r.hget('reset', 'rate'), '6');
  assert.equal(await limiter.availablePermits(), 2, 'the 4 granted still count');
  assert.equal(await limiter.setRate('OVERALL', 6, 60000, { keepAlive: 90000 }), true);
  assert.equal(await r.exists('{reset}:value', '{reset}:permits'), 0);
  assert.equal(await limiter.availablePermits(), 6);
  assert.equal((await limiter.getConfig()).keepAlive, 90000);
});

test('a waiting acquire parks until its permits fit in the window, or times out', async () => {
  const limiter = client.rateLimiter('wait');
  await limiter.trySetRate('OVERALL', 1, 400);
  assert.equal(await limiter.tryAcquire(), true);
  const start = Date.now();
  const pending = client.rateLimiter('wait').acquire({ timeout: 10000 });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  assert.equal(await pending, true);
  assert.ok(Date.now() - start >= 250, 'granted when the first grant left the window');
  const t = Date.now();
  assert.equal(await limiter.acquire({ timeout: 100 }), false, 'the window is full for 0.4 s');
  assert.ok(Date.now() - t >= 80);
  assert.equal(await parked(r), 0);
});

test('waiters are served in arrival order and a release wakes them', async () => {
  const limiter = client.rateLimiter('fifo');
  await limiter.trySetRate('OVERALL', 2, 3600000);
  assert.equal(await limiter.tryAcquire(2), true);
  const order = [];
  const two = client.rateLimiter('fifo').acquire({ permits: 2, timeout: 10000 }).then((ok) => order.push(['2', ok]));
  await until(async () => (await parked(r)) === 1, 'the waiter for 2 parked');
  const one = client.rateLimiter('fifo').acquire({ timeout: 10000 }).then((ok) => order.push(['1', ok]));
  await until(async () => (await parked(r)) === 2, 'the waiter for 1 parked');
  await limiter.release(1);
  await sleep(100);
  assert.deepEqual(order, [], 'one permit does not let the later waiter for 1 overtake');
  assert.equal(await limiter.tryAcquire(), false, 'nor a new caller while anyone waits');
  await limiter.release(1);
  await two;
  await limiter.release(1);
  await one;
  assert.deepEqual(order, [['2', true], ['1', true]]);
  assert.equal(await limiter.availablePermits(), 0);
});

test('an aborted wait leaves the queue and keeps no permit; a grant that raced the abort is given back', async () => {
  const limiter = client.rateLimiter('abort');
  await limiter.trySetRate('OVERALL', 2, 3600000);
  assert.equal(await limiter.tryAcquire(2), true);
  const controller = new AbortController();
  const pending = limiter.acquire({ signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  controller.abort(new Error('stop'));
  await assert.rejects(pending, /stop/);
  assert.equal(await parked(r), 0);
  await assert.rejects(limiter.acquire({ signal: AbortSignal.timeout(50) }), { name: 'TimeoutError' });
  await assert.rejects(limiter.acquire({ signal: AbortSignal.abort() }), { name: 'AbortError' });
  assert.equal(await limiter.release(2), 2, 'no aborted waiter took a permit');

  // The race made certain: the grant (a release serves the waiter) runs after the abort and
  // before its CLIENT UNBLOCK, which then finds the waiter no longer parked.
  assert.equal(await limiter.tryAcquire(2), true);
  const raced = new AbortController();
  const racing = limiter.acquire({ permits: 2, signal: raced.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  const conn = client.conn;
  const original = conn.client;
  conn.client = async (...args) => {
    if (args[0] === 'UNBLOCK') await r.call('RATELIMITER.RELEASE', 'abort', '2');
    return original.apply(conn, args);
  };
  try {
    raced.abort(new Error('late'));
    await assert.rejects(racing, /late/);
  } finally {
    conn.client = original;
  }
  assert.equal(await limiter.availablePermits(), 2, 'the raced grant was given back');
  assert.equal(await r.zcard('{abort}:permits'), 0);
});

test('a change whose reply is lost rejects with LockStateUnknownError and is never sent again', async () => {
  const quick = new LockClient(r, { commandTimeout: 200 });
  const staller = raw();
  try {
    const limiter = quick.rateLimiter('lost');
    await limiter.trySetRate('OVERALL', 10, 3600000); // the shared connection is open
    const before = await calls(r, 'RATELIMITER.ACQUIRE');
    const stalled = staller.pipeline([['debug', 'sleep', '1']]).exec();
    await sleep(100);
    await assert.rejects(limiter.tryAcquire(3), LockStateUnknownError);
    await stalled;
    await until(async () => (await r.ping()) === 'PONG', 'the server awake');
    assert.equal(await calls(r, 'RATELIMITER.ACQUIRE'), before + 1, 'sent once: the server ran it when it woke');
    assert.equal(await limiter.availablePermits(), 7);
  } finally {
    await quick.quit();
  }
});
