'use strict';
// A Node client and a Redisson-style client share one lock: the Redisson side runs the
// repository's Lua reference of Redisson's scripts (bench/lua/lock_*.lua) with EVAL and waits
// the Redisson way (subscribe to the unlock channel, retry on a message or after the TTL); the
// Node side waits with BLOCK in the module. Neither may ever be inside with the other.

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { randomUUID } = require('node:crypto');
const { withServer, raw, ROOT } = require('./support/server');

const lua = (name) => fs.readFileSync(path.join(ROOT, 'bench/lua', name), 'utf8');
const ACQUIRE = lua('lock_acquire.lua');
const UNLOCK = lua('lock_unlock.lua');

let server;
let r;
let client;
withServer((env) => ({ server, r, client } = env));

/** A Redisson-style client: its own connections, owner `<uuid>:<thread>`, Lua scripts. */
function redissonStyle(name, thread) {
  const owner = `${randomUUID()}:${thread}`;
  const conn = raw(server.port);
  const sub = raw(server.port);
  const channel = `redisson_lock__channel:{${name}}`;
  let wake = null;
  sub.on('message', () => wake && wake());
  const ready = sub.subscribe(channel);
  return {
    owner,
    async lock() {
      await ready;
      for (;;) {
        const ttl = await conn.eval(ACQUIRE, 1, name, owner, 30000);
        if (ttl === null) return;
        // Redisson: wait for the unlock message, at most the lock's TTL.
        await new Promise((resolve) => {
          const t = setTimeout(resolve, Math.min(Number(ttl), 200));
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        wake = null;
      }
    },
    async unlock() {
      const latch = `redisson_unlock_latch:{${name}}:${randomUUID()}`;
      const reply = await conn.eval(UNLOCK, 3, name, channel, latch, owner, 30000, 5000);
      assert.equal(reply, 1);
    },
    close() {
      conn.disconnect();
      sub.disconnect();
    },
  };
}

test('a Node lock and a Redisson-style Lua client exclude each other on one name', async () => {
  const name = 'shared';
  let inside = 0;
  let maxInside = 0;
  const critical = async () => {
    inside += 1;
    maxInside = Math.max(maxInside, inside);
    await r.incr('shared:n');
    inside -= 1;
  };
  const nodeTask = async () => {
    const lock = client.lock(name);
    for (let i = 0; i < 50; i++) {
      assert.equal(await lock.acquire({ timeout: 60000 }), true);
      await critical();
      await lock.release();
    }
  };
  const luaClients = [1, 2, 3, 4].map((t) => redissonStyle(name, t));
  const luaTask = async (c) => {
    for (let i = 0; i < 50; i++) {
      await c.lock();
      await critical();
      await c.unlock();
    }
  };
  try {
    await Promise.all([...[1, 2, 3, 4].map(nodeTask), ...luaClients.map(luaTask)]);
  } finally {
    luaClients.forEach((c) => c.close());
  }
  assert.equal(maxInside, 1);
  assert.equal(await r.get('shared:n'), '400');
  assert.equal(await r.exists(name), 0);
});

test('each side sees the other as the holder, in the same hash', async () => {
  const lua1 = redissonStyle('seen', 9);
  try {
    await lua1.lock();
    const lock = client.lock('seen');
    assert.equal(await lock.isLocked(), true);
    assert.equal(await lock.isHeld(), false);
    assert.equal(await lock.acquire({ timeout: 0 }), false);
    const waiting = lock.acquire({ timeout: 30000 });
    await lua1.unlock(); // the Lua unlock wakes the parked Node waiter
    assert.equal(await waiting, true);
    assert.deepEqual(await r.hgetall('seen'), { [lock.owner]: '1' });
    assert.notEqual(await r.eval(ACQUIRE, 1, 'seen', lua1.owner, 30000), null, 'the Lua client is refused');
    await lock.release();
  } finally {
    lua1.close();
  }
});
