'use strict';
// Redisson's names for the keys a lock derives from its name (the module uses the same rules,
// src/names.rs): a name with a hash tag keeps it, any other name is wrapped in braces, so
// every derived key lives in the lock's hash slot.

function tagged(name) {
  return name.includes('{');
}

function prefixName(prefix, name) {
  return tagged(name) ? `${prefix}:${name}` : `${prefix}:{${name}}`;
}

/** The fencing counter shared by every kind of lock of this name. */
function tokenKey(name) {
  return prefixName('redisson_lock_token', name);
}

/** The latch an unlock with `LATCH <requestId>` leaves for its re-sends. */
function latchKey(name, requestId) {
  return `${prefixName('redisson_unlock_latch', name)}:${requestId}`;
}

module.exports = { tokenKey, latchKey };
