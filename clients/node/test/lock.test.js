'use strict';
// The reentrant lock's API against the real module: reentrancy, queries, owner ids, errors,
// the caller's key prefix, and fencing tokens on every kind (one counter per name).

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { withServer, until, parked } = require('./support/server');
const { LockClient, Lock, FairLock, ReadWriteLock, LockNotHeldError, tokenKey, using, LockTimeoutError } = require('..');

let server;
let r;
let client;
withServer((env) => ({ server, r, client } = env));

test('owner ids are Redisson style under the client uuid: a new one per hold, one per object when reentrant', async () => {
  const a = client.lock('ids');
  const b = client.lock('ids');
  assert.match(a.owner, /^[0-9a-f-]{36}:\d+$/);
  assert.equal(a.owner.split(':')[0], client.id);
  assert.notEqual(a.owner, b.owner);
  const first = a.owner;
  assert.equal(await a.acquire(), true);
  assert.equal(a.owner, first, 'the owner read before the acquire is the one it took');
  await a.release();
  assert.equal(await a.acquire(), true);
  assert.notEqual(a.owner, first, 'the next hold is another holder');
  await a.release();
  const re = client.lock('ids', { reentrant: true });
  const fixed = re.owner;
  await re.acquire();
  await re.release();
  assert.equal(re.owner, fixed);
  assert.equal(client.lock('ids', { owner: 'app:7' }).owner, 'app:7');
  assert.throws(() => client.lock('ids', { owner: 'app:7', reentrant: false }), TypeError);
});

test('one lock object shared by concurrent callers excludes them: nothing is reentrant by default', async () => {
  const lock = client.lock('shared', { lease: 30000 });
  assert.equal(await lock.acquire(), true);
  const first = lock.owner;
  assert.equal(await lock.acquire({ timeout: 0 }), false, 'a second acquire through the same object is another holder');
  const waiting = lock.acquire({ timeout: 30000 });
  await until(async () => (await parked(r)) === 1, 'the second caller parked');
  assert.deepEqual(await r.hgetall('shared'), { [first]: '1' });
  assert.equal(await lock.holdCount(), 1);
  await lock.release(); // the first caller's hold
  assert.equal(await waiting, true);
  assert.notEqual(lock.owner, first);
  assert.deepEqual(await r.hgetall('shared'), { [lock.owner]: '1' });
  await lock.release();
  assert.equal(await r.exists('shared'), 0);
  await assert.rejects(lock.release(), LockNotHeldError);
  assert.equal(await lock.holdCount(), 0);
});

test('a reentrant lock object re-enters; the hash counts its holds and the last release deletes it', async () => {
  const lock = client.lock('re', { reentrant: true });
  assert.equal(await lock.acquire(), true);
  assert.equal(await lock.acquire({ timeout: 0 }), true);
  assert.deepEqual(await r.hgetall('re'), { [lock.owner]: '2' });
  assert.equal(await lock.holdCount(), 2);
  assert.equal(await lock.isHeld(), true);
  assert.equal(await lock.isLocked(), true);
  const pttl = await lock.remainingMs();
  assert.ok(pttl > 0 && pttl <= 30000, `watchdog lease: ${pttl}`);

  await lock.release();
  assert.deepEqual(await r.hgetall('re'), { [lock.owner]: '1' });
  await lock.release();
  assert.equal(await r.exists('re'), 0);
  assert.equal(await lock.isHeld(), false);
  assert.equal(await lock.isLocked(), false);
  assert.equal(await lock.remainingMs(), -2);
});

test('another lock object of the same name is refused while it is held', async () => {
  const a = client.lock('other');
  const b = client.lock('other');
  assert.equal(await a.acquire({ lease: 20000 }), true);
  assert.equal(await b.acquire({ timeout: 0 }), false);
  assert.equal(await b.acquire({ timeout: 50 }), false);
  assert.equal(await b.holdCount(), 0);
  assert.equal(await b.isLocked(), true);
  const pttl = await r.pttl('other');
  assert.ok(pttl > 0 && pttl <= 20000, `fixed lease: ${pttl}`);
  await a.release();
  assert.equal(await b.acquire({ timeout: 0 }), true);
  await b.release();
});

test('a waiting acquire is granted when the holder releases', async () => {
  const a = client.lock('handoff');
  const b = client.lock('handoff');
  await a.acquire();
  const waiting = b.acquire({ timeout: 30000 });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  await a.release();
  assert.equal(await waiting, true);
  assert.deepEqual(await r.hgetall('handoff'), { [b.owner]: '1' });
  await b.release();
});

test('release of a lock not held rejects with LockNotHeldError and changes nothing', async () => {
  const a = client.lock('notheld');
  const b = client.lock('notheld');
  await assert.rejects(a.release(), LockNotHeldError);
  await a.acquire();
  await assert.rejects(b.release(), (e) => e instanceof LockNotHeldError && e.code === 'ELOCKNOTHELD');
  assert.deepEqual(await r.hgetall('notheld'), { [a.owner]: '1' });
  await a.release();
});

test('bad arguments throw before anything is sent', async () => {
  const lock = client.lock('bad');
  await assert.rejects(lock.acquire({ timeout: -1 }), RangeError);
  await assert.rejects(lock.acquire({ lease: 0 }), RangeError);
  assert.throws(() => client.lock(''), TypeError);
  assert.equal(await r.exists('bad'), 0);
});

test('a lock given an ioredis client instead of a LockClient throws a TypeError naming the right call', () => {
  const cases = [
    [() => new Lock(r, 'x'), /^Lock takes a LockClient, not an ioredis client: new Lock\(new LockClient\(redis\), name\), or locks\.lock\(name\)/],
    [() => new FairLock(r, 'x'), /^FairLock takes a LockClient, not an ioredis client: new FairLock\(new LockClient\(redis\), name\), or locks\.fairLock\(name\)/],
    [() => new ReadWriteLock(r, 'x'), /^ReadWriteLock takes a LockClient, not an ioredis client: .*locks\.readWriteLock\(name\)/],
    [() => new Lock(undefined, 'x'), /^Lock takes a LockClient: new Lock\(new LockClient\(redis\), name\)/],
    [() => new Lock({}, 'x'), /^Lock takes a LockClient: /],
    [() => new LockClient({ host: 'localhost' }), /^LockClient takes an ioredis Redis or Cluster instance: new LockClient\(new Redis\(\)\)/],
  ];
  for (const [fn, message] of cases) assert.throws(fn, (err) => err instanceof TypeError && message.test(err.message));
  assert.ok(new Lock(client, 'x') instanceof Lock, 'a LockClient is accepted');
});

test('using() throws a TypeError when given something other than a lock', async () => {
  await assert.rejects(using(r, async () => {}), /^TypeError: using takes a lock: using\(locks\.lock\(name\), /);
  await assert.rejects(using(client.lock('u'), undefined), TypeError);
  assert.equal(await r.exists('u'), 0);
});

test('quit({ client: true }) also quits the ioredis client the LockClient was made from', async () => {
  const mine = new Redis({ port: server.port, lazyConnect: false });
  const locks = new LockClient(mine);
  assert.equal(locks.redis, mine);
  await using(locks.lock('quits'), async () => {});
  await locks.quit();
  assert.equal(await mine.ping(), 'PONG', 'quit() leaves the caller client alone');
  const again = new LockClient(mine);
  await using(again.lock('quits'), async () => {});
  await again.quit({ client: true });
  await until(() => mine.status === 'end', 'the caller client to close');
  const other = new Redis({ port: server.port });
  const hard = new LockClient(other);
  await using(hard.lock('quits'), async () => {});
  hard.disconnect({ client: true });
  await until(() => other.status === 'end', 'the caller client to close');
  // Quitting a caller client that is already closed is not an error.
  await again.quit({ client: true });
});

test('using() releases after the callback, also when it throws, and times out cleanly', async () => {
  const lock = client.lock('using');
  const out = await using(lock, async (signal) => {
    assert.equal(signal.aborted, false);
    assert.deepEqual(await r.hgetall('using'), { [lock.owner]: '1' });
    return 42;
  });
  assert.equal(out, 42);
  assert.equal(await r.exists('using'), 0);
  await assert.rejects(
    using(lock, async () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal(await r.exists('using'), 0);
  const holder = client.lock('using');
  await holder.acquire();
  await assert.rejects(using(lock, async () => 1, { timeout: 20 }), LockTimeoutError);
  await holder.release();
});

test('the caller client key prefix applies to lock names, for the module and plain commands alike', async () => {
  const prefixed = new Redis({ port: server.port, host: '127.0.0.1', keyPrefix: 'app:' });
  const c = new LockClient(prefixed);
  try {
    const lock = c.lock('pfx', { fenced: true });
    assert.equal(await lock.acquire(), true);
    assert.equal(await r.exists('app:pfx'), 1);
    assert.equal(await lock.isLocked(), true);
    assert.equal(await r.get('redisson_lock_token:{app:pfx}'), String(lock.token));
    await lock.release();
    assert.equal(await r.exists('app:pfx'), 0);
  } finally {
    await c.quit();
    prefixed.disconnect();
  }
});

test('an ACL user without CLIENT ID and CLIENT KILL can still wait for a lock', async () => {
  await r.call('ACL', 'SETUSER', 'app', 'on', '>pw', '~*', '&*', '+@all', '-client|id', '-client|kill');
  const app = new Redis({ port: server.port, host: '127.0.0.1', username: 'app', password: 'pw' });
  const c = new LockClient(app);
  try {
    await assert.rejects(app.client('ID'), /NOPERM/);
    const holder = c.lock('acl');
    const waiter = c.lock('acl');
    await holder.acquire();
    const waiting = waiter.acquire({ timeout: 30000 });
    await until(async () => (await parked(r)) === 1, 'the waiter parked');
    await holder.release();
    assert.equal(await waiting, true);
    assert.deepEqual(await r.hgetall('acl'), { [waiter.owner]: '1' });
    await waiter.release();
  } finally {
    await c.quit();
    app.disconnect();
  }
});

test('fencing tokens grow with every grant, shared by every kind of lock on one name', async () => {
  const name = 'fenced';
  const seen = [];
  const lock = client.lock(name, { fenced: true, reentrant: true });
  await lock.acquire();
  seen.push(lock.token);
  await lock.acquire(); // re-entry is a grant too
  seen.push(lock.token);
  await lock.release();
  await lock.release();

  const rw = client.readWriteLock(name, { fenced: true, reentrant: true });
  await rw.writeLock().acquire({ timeout: 0 });
  seen.push(rw.writeLock().token);
  assert.equal(await rw.readLock().acquire(), true); // reads carry no token
  assert.equal(rw.readLock().token, null);
  await rw.readLock().release();
  await rw.writeLock().release();

  const fair = client.fairLock(name, { fenced: true });
  await fair.acquire();
  seen.push(fair.token);
  await fair.release();

  const other = client.lock(name, { fenced: true });
  await other.acquire({ timeout: 0 });
  seen.push(other.token);
  const refused = client.lock(name, { fenced: true });
  assert.equal(await refused.acquire({ timeout: 0 }), false);
  assert.equal(refused.token, null);
  await other.release();

  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.equal(await r.get(tokenKey(name)), '5');
});
