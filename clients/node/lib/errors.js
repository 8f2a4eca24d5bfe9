'use strict';
// The errors the library throws. Each has a stable `code` so callers can branch without
// instanceof across duplicated installs of the package.

/** Base class of every error this library throws. */
class LockError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }

  get code() {
    return 'ELOCK';
  }
}

/** `release()` of a lock this owner does not hold (Redisson's IllegalMonitorStateException). */
class LockNotHeldError extends LockError {
  get code() {
    return 'ELOCKNOTHELD';
  }
}

/**
 * The lock was lost while held: a watchdog renewal found it gone (force-unlocked, deleted,
 * expired), or its lease ran out before it could be renewed. The lock's AbortSignal is aborted
 * with this error, and the `release()` of each hold taken before the loss rejects with it.
 */
class LockLostError extends LockError {
  get code() {
    return 'ELOCKLOST';
  }
}

/** `using()` could not acquire the lock within its `timeout`. */
class LockTimeoutError extends LockError {
  get code() {
    return 'ELOCKTIMEOUT';
  }
}

/**
 * A reply was lost (timeout, connection closed) and the server could not be asked what this
 * owner holds within the client's `resolveTimeout`. A grant it may have made expires with its
 * lease (no watchdog renews it).
 */
class LockStateUnknownError extends LockError {
  get code() {
    return 'ELOCKUNKNOWN';
  }
}

/**
 * None of the primary's replicas acknowledged a write of a lock or a semaphore within
 * `syncTimeout` (WAIT, or WAITAOF with an AOF): a failover now could lose it. Redisson's
 * NoSyncedSlavesException. A grant (acquire, reentry, a grant while waiting) was given back
 * before this is thrown; any other change (release, renewal, force unlock, a semaphore's
 * release...) stays applied on the primary. `reply` is the write's reply, `replicas` how many
 * replicas the primary had, `synced` how many acknowledged (0).
 */
class NoSyncedReplicasError extends LockError {
  constructor(message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reply = options.reply;
    this.replicas = options.replicas ?? 0;
    this.synced = 0;
  }

  get code() {
    return 'ELOCKNOSYNC';
  }
}

/** True for an error reply of the server: the command was refused, nothing changed. */
function isReplyError(err) {
  return err != null && err.name === 'ReplyError';
}

/**
 * True for an error reply that says the command did not run because its node is not (or no
 * longer) a writable primary: READONLY, a parked client UNBLOCKED by a role change, MASTERDOWN,
 * LOADING. Safe to send again once the client follows the new primary.
 */
function notRun(err) {
  return isReplyError(err) && /^(READONLY|UNBLOCKED|MASTERDOWN|LOADING)\b/.test(err.message);
}

module.exports = {
  LockError,
  LockNotHeldError,
  LockLostError,
  LockTimeoutError,
  LockStateUnknownError,
  NoSyncedReplicasError,
  isReplyError,
  notRun,
};
