"""The exceptions a lock raises, built on redis-py's own lock errors.

``LockNotOwnedError`` and ``LockError`` are redis-py's (``redis.exceptions``), so code written
for ``redis.lock.Lock`` catches these too.
"""

from __future__ import annotations

from redis.exceptions import LockError, LockNotOwnedError

__all__ = ["LockError", "LockNotOwnedError", "LockLostError", "LockTimeoutError", "NoSyncedReplicasError"]


class LockLostError(LockNotOwnedError):
    """The lock was held by this thread (or task) and is not any more: its lease ran out, or it
    was force-unlocked, before it was released. Whatever it protected may have been changed
    by another holder in the meantime."""


class LockTimeoutError(LockError):
    """``with lock:`` could not acquire the lock within the lock's ``timeout``."""


class NoSyncedReplicasError(LockError):
    """None of the primary's replicas acknowledged a write of a lock or a semaphore within the
    sync timeout (``WAIT``, or ``WAITAOF`` when the primary has an AOF): a failover now could
    lose it. Redisson's ``NoSyncedSlavesException``.

    A grant (an acquire, a reentry, a grant while waiting) is given back before this is raised,
    so the caller holds nothing more than before. A release, renewal or any other change was
    applied on the primary and stays applied; ``reply`` is the command's reply (what the call
    would have returned), ``replicas`` how many replicas the primary had, ``synced`` how many
    acknowledged (0)."""

    def __init__(self, message: str, *, reply: object = None, replicas: int = 0, synced: int = 0) -> None:
        super().__init__(message)
        self.reply = reply
        self.replicas = replicas
        self.synced = synced
