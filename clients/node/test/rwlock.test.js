'use strict';
// The read-write lock: shared reads, exclusive writes, a writer that reads and downgrades.

const test = require('node:test');
const assert = require('node:assert/strict');
const { withServer, until, parked } = require('./support/server');
const { ReadLock, WriteLock } = require('..');

let r;
let client;
withServer((env) => ({ r, client } = env));

test('readers share the lock and exclude a writer until the last one leaves', async () => {
  const a = client.readWriteLock('rw:share');
  const b = client.readWriteLock('rw:share');
  const w = client.readWriteLock('rw:share');
  assert.ok(a.readLock() instanceof ReadLock);
  assert.ok(w.writeLock() instanceof WriteLock);
  assert.equal(a.readLock(), a.readLock());
  assert.equal(await a.readLock().acquire(), true);
  assert.equal(await b.readLock().acquire({ timeout: 0 }), true);
  assert.deepEqual(await r.hgetall('rw:share'), { mode: 'read', [a.readLock().owner]: '1', [b.readLock().owner]: '1' });
  assert.equal(await a.readLock().isLocked(), true);
  assert.equal(await a.writeLock().isLocked(), false);
  assert.equal(await w.writeLock().acquire({ timeout: 0 }), false);

  const writing = w.writeLock().acquire({ timeout: 30000 });
  await until(async () => (await parked(r)) === 1, 'the writer parked');
  await a.readLock().release();
  assert.equal(await parked(r), 1, 'one reader left: the writer still waits');
  await b.readLock().release();
  assert.equal(await writing, true);
  assert.deepEqual(await r.hgetall('rw:share'), { mode: 'write', [`${w.writeLock().owner}:write`]: '1' });
  assert.equal(await w.writeLock().isLocked(), true);
  await w.writeLock().release();
  assert.equal(await r.exists('rw:share'), 0);
});

test('a reentrant writer may also read, and its last write release downgrades to a read lock', async () => {
  const rw = client.readWriteLock('rw:down', { reentrant: true });
  await rw.writeLock().acquire();
  await rw.writeLock().acquire();
  await rw.readLock().acquire();
  assert.equal(await rw.writeLock().holdCount(), 2);
  assert.equal(await rw.readLock().holdCount(), 1);
  assert.deepEqual(await r.call('RWLOCK.HOLDS', 'rw:down', rw.owner), [1, 2]);
  const other = client.readWriteLock('rw:down');
  assert.equal(await other.readLock().acquire({ timeout: 0 }), false);

  await rw.writeLock().release();
  await rw.writeLock().release();
  assert.equal(await r.hget('rw:down', 'mode'), 'read');
  assert.equal(await rw.writeLock().isHeld(), false);
  assert.equal(await rw.readLock().isHeld(), true);
  assert.equal(await other.readLock().acquire({ timeout: 0 }), true);
  await other.readLock().release();
  await rw.readLock().release();
  assert.equal(await r.exists('rw:down'), 0);
});

test('forceUnlock frees a read-write lock only in the mode it is in', async () => {
  const rw = client.readWriteLock('rw:force');
  await rw.readLock().acquire();
  assert.equal(await client.readWriteLock('rw:force').writeLock().forceUnlock(), false, 'not in write mode');
  assert.equal(await client.readWriteLock('rw:force').readLock().forceUnlock(), true);
  assert.equal(await r.exists('rw:force'), 0);
});

test('releasing the side not held rejects and keeps the other side', async () => {
  const rw = client.readWriteLock('rw:side', { reentrant: true });
  await rw.readLock().acquire();
  await assert.rejects(rw.writeLock().release(), { code: 'ELOCKNOTHELD' });
  assert.deepEqual(await r.call('RWLOCK.HOLDS', 'rw:side', rw.owner), [1, 0]);
  await rw.readLock().release();
});

test('without reentrant, each side acquire is a holder of its own: a writer cannot take a read hold', async () => {
  const rw = client.readWriteLock('rw:own', { lease: 30000 });
  assert.equal(rw.owner, null);
  assert.equal(await rw.writeLock().acquire(), true);
  assert.equal(await rw.readLock().acquire({ timeout: 0 }), false, 'another holder: refused while written');
  assert.equal(await rw.writeLock().acquire({ timeout: 0 }), false, 'not a reentry');
  await rw.writeLock().release();
  assert.equal(await rw.readLock().acquire(), true);
  assert.equal(await rw.readLock().acquire(), true, 'reads are shared, one holder each');
  const [first, second] = rw.readLock().holders.map((h) => h.owner);
  assert.notEqual(first, second);
  assert.deepEqual(await r.hgetall('rw:own'), { mode: 'read', [first]: '1', [second]: '1' });
  await rw.readLock().release();
  assert.deepEqual(await r.hgetall('rw:own'), { mode: 'read', [second]: '1' }, 'the oldest hold goes first');
  await rw.readLock().release();
  assert.equal(await r.exists('rw:own'), 0);
});
