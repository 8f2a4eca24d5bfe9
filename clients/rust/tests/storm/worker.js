'use strict';
// The Node side of the storm (clients/rust/tests/storm.rs): STORM_WORKERS async workers share
// two lock objects of one LockClient (one fenced), as concurrent callers share a lock in
// application code, and take the lock over and over until the storm ends, through the
// repository's library (clients/node, at $LOCKMOD_NODE). Each acquire waits a random time
// (none, once, ms to s); a quarter are aborted at a random moment (an AbortSignal). Inside the
// critical section a worker runs STORM_ENTER (claims the holder key, checks the fencing token)
// and STORM_LEAVE. The storm's nemesis kills and unblocks the waits' connections (named
// STORM_CLIENT_NAME); the library settles those lost replies by asking what the owner holds,
// which is counted here. Prints one line `counts k=v ...`; an unexpected error exits 1.

const lib = process.env.LOCKMOD_NODE;
const Redis = require(require.resolve('ioredis', { paths: [lib] }));
const { LockClient } = require(lib);

const NAME = 'storm';
const KEYS = ['storm:holder', 'storm:fence', 'storm:violations', 'storm:log'];
const { STORM_ENTER: ENTER, STORM_LEAVE: LEAVE } = process.env;
// When the storm ends (wall clock, ms), the same for every side.
const END = Number(process.env.STORM_END_MS);
const WORKERS = Number(process.env.STORM_WORKERS);

const counts = {};
const count = (what, n = 1) => {
  counts[what] = (counts[what] || 0) + n;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const uniform = (lo, hi) => lo + Math.random() * (hi - lo);

/** Ms to wait: 0 tries once, undefined waits without limit. */
function pickTimeout() {
  const x = Math.random();
  if (x < 0.1) return 0;
  if (x < 0.2) return undefined;
  if (x < 0.6) return Math.round(uniform(5, 200));
  return Math.round(uniform(200, 1500));
}

/** Counts the library's settles of lost replies: each asks what the owner holds. */
function countSettles(lock) {
  const ask = lock.serverHolds.bind(lock);
  lock.serverHolds = async (...args) => {
    const held = await ask(...args);
    count('settles');
    count('settled_granted', Number(held > 0));
    return held;
  };
}

async function worker(i, redis, lock) {
  for (let n = 1; Date.now() < END; n++) {
    const timeout = pickTimeout();
    const signal = Math.random() < 0.25 ? AbortSignal.timeout(Math.round(uniform(1, 300))) : undefined;
    let ok;
    try {
      ok = await lock.acquire({ timeout, signal });
    } catch (err) {
      if (signal && err === signal.reason) {
        count('cancels');
        continue;
      }
      if (/^UNBLOCKED/.test(err.message)) {
        count('unblocked');
        continue;
      }
      throw err;
    }
    if (!ok) {
      count('timeouts');
      continue;
    }
    count('grants');
    const me = `node:${i}:${n}:${lock.owner}`;
    const token = lock.token;
    count('fenced', Number(token != null));
    await redis.eval(ENTER, KEYS.length, ...KEYS, me, token == null ? '' : String(token));
    await sleep(uniform(1, 4));
    await redis.eval(LEAVE, 1, KEYS[0], me);
    await lock.release();
  }
}

(async () => {
  const redis = new Redis({ port: Number(process.env.PORT), connectionName: process.env.STORM_CLIENT_NAME });
  const locks = new LockClient(redis);
  const shared = [locks.lock(NAME), locks.lock(NAME, { fenced: true, lease: 60000 })];
  shared.forEach(countSettles);
  const results = await Promise.allSettled(
    Array.from({ length: WORKERS }, (_, i) => worker(i, redis, shared[i % 2])),
  );
  await locks.quit({ client: true });
  const line = Object.keys(counts)
    .sort()
    .map((k) => `${k}=${counts[k]}`)
    .join(' ');
  console.log(`counts ${line}`);
  const failed = results.filter((r) => r.status === 'rejected');
  if (failed.length > 0) {
    for (const f of failed) console.error(f.reason);
    process.exit(1);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
