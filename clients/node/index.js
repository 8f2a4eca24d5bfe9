'use strict';
// redis-lockmod for Node: Redisson's locks, synchronizers and rate limiter on the redis-lockmod
// module, over ioredis.
// docs/clients.md in the repository is the guide; index.d.ts the reference. Every export is
// a plain name in the object below, so that ESM `import { ... }` finds them (cjs-module-lexer).

const { LockClient } = require('./lib/client');
const { Lock, FairLock, ReadWriteLock, ReadLock, WriteLock } = require('./lib/locks');
const { Semaphore, PermitExpirableSemaphore, CountDownLatch } = require('./lib/synchronizers');
const { RateLimiter, RateType } = require('./lib/ratelimiter');
const { using } = require('./lib/using');
const {
  LockError,
  LockNotHeldError,
  LockLostError,
  LockTimeoutError,
  LockStateUnknownError,
  NoSyncedReplicasError,
} = require('./lib/errors');
const { tokenKey } = require('./lib/names');
const { version } = require('./package.json');

module.exports = {
  LockClient,
  Lock,
  FairLock,
  ReadWriteLock,
  ReadLock,
  WriteLock,
  Semaphore,
  PermitExpirableSemaphore,
  CountDownLatch,
  RateLimiter,
  RateType,
  using,
  LockError,
  LockNotHeldError,
  LockLostError,
  LockTimeoutError,
  LockStateUnknownError,
  NoSyncedReplicasError,
  tokenKey,
  version,
};
