"""The exceptions a lock raises, built on redis-py's own lock errors.

``LockNotOwnedError`` and ``LockError`` are redis-py's (``redis.exceptions``), so code written
for ``redis.lock.Lock`` catches these too.
"""

from __future__ import annotations

from redis.exceptions import LockError, LockNotOwnedError

__all__ = ["LockError", "LockNotOwnedError", "LockLostError", "LockTimeoutError"]


class LockLostError(LockNotOwnedError):
    """The lock was held by this thread (or task) and is not any more: its lease ran out, or it
    was force-unlocked, before it was released. Whatever it protected may have been changed
    by another holder in the meantime."""


class LockTimeoutError(LockError):
    """``with lock:`` could not acquire the lock within the lock's ``timeout``."""
