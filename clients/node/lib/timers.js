'use strict';
// Times in ms, as callers give them, checked once; and timers that cannot overflow.
//
// Node's setTimeout takes at most 2^31 - 1 ms (24.8 days): a longer delay prints a warning and
// fires after 1 ms, so a lease of a month would be declared lost at once and a renewal would
// spin. Every timer of the library is a `longTimeout`, re-armed in steps; a per-command timer
// of ioredis past that limit is not armed at all (`commandTimer`), as for a wait without limit.
//
// The rules (also in docs/clients.md):
// - a `timeout` is an integer of ms >= 0: 0 tries once; undefined, Infinity and anything past
//   Number.MAX_SAFE_INTEGER wait without limit; NaN, a fraction, a negative number or a
//   non-number is a RangeError, and nothing is sent;
// - a lease or any other time is an integer of ms in [1, Number.MAX_SAFE_INTEGER] (a larger
//   one cannot be written exactly as a decimal integer): else a RangeError.

/** The longest delay Node's timers take (ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** `fn` after `ms` (any length, Infinity never), unref'd; stop it with `clearLong`. */
function longTimeout(fn, ms) {
  const handle = { timer: null };
  const due = performance.now() + Math.max(0, ms);
  const arm = () => {
    const left = due - performance.now();
    if (left === Infinity) return;
    handle.timer = setTimeout(left > MAX_TIMER_MS ? arm : fn, Math.max(0, Math.min(left, MAX_TIMER_MS)));
    handle.timer.unref();
  };
  arm();
  return handle;
}

function clearLong(handle) {
  if (handle) clearTimeout(handle.timer);
}

/** The per-command timer to arm for `ms`, or undefined when it is past what a timer takes. */
function commandTimer(ms) {
  return ms != null && ms <= MAX_TIMER_MS ? ms : undefined;
}

/** A time in ms: an integer in [min, Number.MAX_SAFE_INTEGER], else a RangeError. */
function checkMs(v, what, min = 1) {
  if (!Number.isSafeInteger(v) || v < min) {
    const range = min === 0 ? 'a non-negative' : 'a positive';
    throw new RangeError(`${what} must be ${range} integer (ms) up to Number.MAX_SAFE_INTEGER, not ${String(v)}`);
  }
  return v;
}

/** An optional time in ms: undefined/null stays undefined. */
function optionalMs(v, what) {
  return v === undefined || v === null ? undefined : checkMs(v, what);
}

/**
 * A wait's `timeout`: `{ waits: false }` (0: try once) or `{ waits: true, blockMs }` (BLOCK
 * blockMs; 0 waits without limit).
 */
function waitOf(timeout) {
  if (timeout === 0) return { waits: false, blockMs: 0 };
  if (timeout === undefined || timeout === Infinity) return { waits: true, blockMs: 0 };
  if (typeof timeout === 'number' && Number.isInteger(timeout) && timeout > Number.MAX_SAFE_INTEGER) {
    return { waits: true, blockMs: 0 };
  }
  if (!Number.isSafeInteger(timeout) || timeout < 0) {
    throw new RangeError(
      `timeout must be a non-negative integer (ms; 0 tries once; undefined or Infinity waits without limit), not ${String(timeout)}`,
    );
  }
  return { waits: true, blockMs: timeout };
}

module.exports = { MAX_TIMER_MS, longTimeout, clearLong, commandTimer, checkMs, optionalMs, waitOf };
