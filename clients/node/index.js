'use strict';
// redis-lockmod for Node: Redisson's locks on the redis-lockmod module, over ioredis.
// docs/clients.md in the repository is the guide; index.d.ts the reference.

const { LockClient } = require('./lib/client');
const { Lock, FairLock, ReadWriteLock, ReadLock, WriteLock } = require('./lib/locks');
const { using } = require('./lib/using');
const errors = require('./lib/errors');
const names = require('./lib/names');

module.exports = {
  LockClient,
  Lock,
  FairLock,
  ReadWriteLock,
  ReadLock,
  WriteLock,
  using,
  LockError: errors.LockError,
  LockNotHeldError: errors.LockNotHeldError,
  LockLostError: errors.LockLostError,
  LockTimeoutError: errors.LockTimeoutError,
  LockStateUnknownError: errors.LockStateUnknownError,
  tokenKey: names.tokenKey,
  version: require('./package.json').version,
};
