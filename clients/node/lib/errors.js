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

/** True for an error reply of the server: the command was refused, nothing changed. */
function isReplyError(err) {
  return err != null && err.name === 'ReplyError';
}

module.exports = {
  LockError,
  LockNotHeldError,
  LockLostError,
  LockTimeoutError,
  LockStateUnknownError,
  isReplyError,
};
