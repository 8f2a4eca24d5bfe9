'use strict';
// No garbage per unlock (issue 34): every unlock carries LATCH <id> <ms>, and the latch key it
// leaves (`redisson_unlock_latch:{name}:<id>`, 60 s by default) is deleted once the unlock's
// reply arrived, as Redisson deletes its own. 10,000 lock/unlock cycles of every kind that
// unlocks with a latch leave the key count flat; an unlock whose reply was lost keeps its latch
// (the re-send must find it: lost_replies.test.js); a user without DEL leaves latches to
// expire, and the library stops sending the DEL.

const test = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { withServer, until, parked, calls } = require('./support/server');
const { LockClient } = require('..');

let server;
let r;
let client;
withServer((env) => ({ server, r, client } = env));

const CYCLES = 10000;
const EVERY = 1000;

const latches = async () => (await r.keys('redisson_unlock_latch:*')).length;

for (const [kind, make] of [
  ['reentrant', () => client.lock('flat:lock', { lease: 30000 })],
  ['fair', () => client.fairLock('flat:fair', { lease: 30000 })],
  ['read', () => client.readWriteLock('flat:read', { lease: 30000 }).readLock()],
  ['write', () => client.readWriteLock('flat:write', { lease: 30000 }).writeLock()],
]) {
  test(`10,000 ${kind} lock/unlock cycles leave the key count flat`, async () => {
    const lock = make();
    const expired = Number((await r.info('stats')).match(/expired_keys:(\d+)/)[1]);
    let most = 0;
    for (let i = 1; i <= CYCLES; i++) {
      assert.equal(await lock.acquire({ timeout: 0 }), true);
      await lock.release();
      if (i % EVERY === 0) {
        // The last unlock's DEL may still be on its way; nothing older is left.
        most = Math.max(most, await r.dbsize());
        assert.ok((await latches()) <= 1, `after ${i} cycles`);
      }
    }
    assert.ok(most <= 1, `at most one key at a time, saw ${most}`);
    await until(async () => (await r.dbsize()) === 0, 'every key gone');
    const after = Number((await r.info('stats')).match(/expired_keys:(\d+)/)[1]);
    assert.equal(after, expired, 'deleted, not left to expire');
  });
}

test('a partial unlock, a hand-over to a parked waiter and a give-back delete their latches too', async () => {
  const lock = client.lock('flat:more', { reentrant: true, lease: 30000 });
  for (let i = 0; i < 50; i++) {
    await lock.acquire();
    await lock.acquire();
    await lock.release(); // latch value 0: holds left
    await lock.release();
  }
  const other = client.lock('flat:more', { lease: 30000 });
  for (let i = 0; i < 20; i++) {
    await lock.acquire();
    const waiting = other.acquire({ timeout: 30000 });
    await until(async () => (await parked(r)) === 1, 'the waiter parked');
    await lock.release();
    assert.equal(await waiting, true);
    await other.release();
  }
  // A grant given back (an aborted wait the grant raced): an unlock of its own.
  await lock.acquire();
  const controller = new AbortController();
  const aborted = other.acquire({ timeout: 30000, signal: controller.signal });
  await until(async () => (await parked(r)) === 1, 'the waiter parked');
  const unblock = client.conn.client;
  client.conn.client = async (...args) => {
    // The grant comes first: the holder's unlock runs before the abort's CLIENT UNBLOCK.
    client.conn.client = unblock;
    await r.call('LOCK.UNLOCK', 'flat:more', lock.owner, '30000');
    return unblock.apply(client.conn, args);
  };
  controller.abort();
  await assert.rejects(aborted, { name: 'AbortError' });
  await lock.release().catch(() => {}); // its hold was taken by the raw unlock
  await until(async () => (await r.dbsize()) === 0, 'nothing left');
});

test('a user without DEL leaves latches to expire, and DEL is not sent again', async () => {
  await r.call('ACL', 'SETUSER', 'nodel', 'on', '>pw', '~*', '&*', '+@all', '-del');
  const mine = new Redis({ port: server.port, host: '127.0.0.1', username: 'nodel', password: 'pw' });
  const c = new LockClient(mine);
  try {
    const dels = await calls(r, 'DEL');
    const lock = c.lock('flat:nodel', { lease: 30000 });
    for (let i = 0; i < 5; i++) {
      assert.equal(await lock.acquire({ timeout: 0 }), true);
      await lock.release();
    }
    assert.equal(await r.exists('flat:nodel'), 0, 'released');
    await until(() => c.latchCleanup === false, 'the refusal noticed');
    assert.equal(await latches(), 5, 'latches kept, to expire');
    for (const k of await r.keys('redisson_unlock_latch:*')) {
      const pttl = await r.pttl(k);
      assert.ok(pttl > 50000 && pttl <= 60000, `latch ttl ${pttl}`);
    }
    let refused = 0;
    for (const entry of await r.call('ACL', 'LOG')) {
      const fields = {};
      for (let i = 0; i + 1 < entry.length; i += 2) fields[entry[i]] = entry[i + 1];
      if (fields.object === 'del') refused += Number(fields.count);
    }
    assert.equal(refused, 1, 'one DEL refused, then none sent');
    assert.equal(await calls(r, 'DEL'), dels);
  } finally {
    await c.quit({ client: true });
    await r.call('ACL', 'DELUSER', 'nodel');
    await r.call('ACL', 'LOG', 'RESET');
  }
});
