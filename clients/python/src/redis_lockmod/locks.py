"""The sync locks on redis-py: `Lock`, `ReadWriteLock` and `FairLock`.

Each is reentrant per thread and shaped like redis-py's ``Lock`` and Redisson's ``RLock``::

    lock = Lock(r, "orders")             # r: redis.Redis or redis.cluster.RedisCluster
    with lock:                           # waits in the server (BLOCK) until granted
        ...
    if lock.acquire(blocking=False):     # or timeout=2.5 (seconds)
        try: ...
        finally: lock.release()

Options (keyword arguments of every lock):

- ``lease_ms``: a fixed lease; without it a watchdog renews a ``watchdog_lease_ms`` lease
  (30 s) every ``watchdog_interval_ms`` (a third of it) while the lock is held.
- ``on_lost``: called with the lock when the watchdog finds the lock gone; `release` then
  raises `LockLostError`.
- ``fenced``: every grant takes a fencing token, ``lock.token`` (not for read locks).
- ``timeout``: seconds ``with lock:`` waits before raising `LockTimeoutError` (None: no limit;
  how every timeout is read: `redis_lockmod._timeouts`).
- ``command_timeout``: socket timeout (seconds) of each command; a ``BLOCK`` wait gets its
  wait on top. Default: the client's ``socket_timeout``, else 10 s.
- ``wait_ms`` (fair lock): Redisson's thread wait time of a queued waiter (5 minutes).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from . import _kinds
from ._base import LockBase
from ._driver import once, read, run
from ._owner import thread_id
from ._session import session_for
from .errors import LockLostError, LockTimeoutError, NoSyncedReplicasError

log = logging.getLogger("redis_lockmod")


class _SyncLock(LockBase):
    def __init__(self, client: Any, name: str, **options: Any) -> None:
        super().__init__(session_for(client), name, **options)
        #: The client this lock was given, held strongly (as redis-py's own ``Lock`` does), so
        #: that ``Lock(redis.Redis(), name)`` works: the library's registry of sessions holds
        #: clients weakly, and the lock keeps its client alive for as long as the lock lives.
        self.client = client

    def _tid(self) -> int:
        return thread_id()

    def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes the lock (again, if this thread holds it: a reentrant hold). ``blocking``
        waits in the server until granted, at most ``timeout`` seconds (None: no limit).
        Returns True when granted."""
        s = self._session
        pending = self._pending_flow()
        if pending is not None:
            flow, hold, key = pending
            if self._synced(hold, key, run(flow, s.transport)):
                s.watchdog.unwatch(hold)
        attempt = self._acquire_flow(blocking, timeout)
        try:
            granted, token = run(attempt.flow, s.transport)
        except BaseException as e:
            lost = getattr(e, "lockmod_lost", None)
            if lost is not None and not isinstance(e, Exception):
                try:
                    run(self._undo_flow(attempt, lost), s.transport)
                except Exception as undo_error:
                    log.warning("could not settle the interrupted acquire of %s: %s", self.name, undo_error)
            self._refused(attempt)
            raise
        if not granted:
            self._refused(attempt)
            return False
        if self._granted(attempt.hold, token):
            s.watchdog.watch(self, attempt.hold, attempt.key, attempt.owner)
        return True

    def release(self) -> None:
        """Gives back one hold of this thread. Raises `LockLostError` if the lock was lost
        (lease ran out, force unlock) and `LockNotOwnedError` if this thread holds nothing."""
        flow, hold, key = self._release_flow()
        try:
            reply = run(flow, self._session.transport)
        except NoSyncedReplicasError as unsynced:
            # Applied on the primary, not confirmed by a replica: recorded, then raised.
            self._record_release(hold, key, unsynced.reply)
            raise
        except BaseException as e:
            pending = hold.pending_unlock
            if pending is not None and not isinstance(e, Exception):
                # Interrupted (Ctrl-C): the reply may have been read, its latch deleted.
                pending.interrupted = True
                lost = getattr(e, "lockmod_lost", None)
                if lost is not None:
                    pending.lost.append(lost)
            raise
        self._record_release(hold, key, reply)

    def _record_release(self, hold: Any, key: Any, reply: Any) -> None:
        try:
            done = self._released(hold, key, reply)
        except LockLostError:
            self._session.watchdog.unwatch(hold)
            raise
        if done:
            self._session.watchdog.unwatch(hold)

    def locked(self) -> bool:
        """True if anyone holds the lock (a read or write lock: in its mode)."""
        reply = read(self._session.transport, self.name, self._kind.locked_args(self.name), self.command_timeout)
        return self._kind.parse_locked(reply)

    def hold_count(self) -> int:
        """This thread's hold count, as the server has it (``*.HOLDS``)."""
        args = self._kind.holds_args(self.name, self.owner)
        return self._kind.parse_holds(read(self._session.transport, self.name, args, self.command_timeout))

    def owned(self) -> bool:
        """True if this thread holds the lock."""
        return self.hold_count() > 0

    def remaining_ms(self) -> int:
        """The lock's remaining lease in ms (``PTTL``): -2 if free, -1 if it has no expiry."""
        return int(read(self._session.transport, self.name, ("PTTL", self.name), self.command_timeout))

    def force_unlock(self) -> bool:
        """Frees the lock whoever holds it (a read or write lock: if in its mode); True if it
        was held. Holders of this process are forgotten without a lost signal."""
        args = self._kind.force_unlock_args(self.name)
        try:
            reply = once(self._session.transport, self.name, args, self.command_timeout, self.sync_ms)
        except NoSyncedReplicasError:
            self._unwatch_forced()  # applied on the primary
            raise
        self._unwatch_forced()
        return int(reply) == 1

    def _unwatch_forced(self) -> None:
        for hold in self._forced():
            self._session.watchdog.unwatch(hold)

    def __enter__(self) -> "_SyncLock":
        if not self.acquire(blocking=True, timeout=self.timeout):
            raise LockTimeoutError(f"could not acquire lock {self.name!r} within {self.timeout} s")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Lock(_SyncLock):
    """Redisson's reentrant lock ``RLock`` (``LOCK.*``); ``fenced=True`` is ``RFencedLock``."""

    _kind = _kinds.REENTRANT


class FairLock(_SyncLock):
    """Redisson's fair lock ``RFairLock`` (``FAIRLOCK.*``): granted in arrival order."""

    _kind = _kinds.FAIR


class ReadLock(_SyncLock):
    """The read side of a `ReadWriteLock`: shared with other readers (and its own writer)."""

    _kind = _kinds.READ


class WriteLock(_SyncLock):
    """The write side of a `ReadWriteLock`: exclusive, reentrant; ``fenced=True`` allowed."""

    _kind = _kinds.WRITE


class ReadWriteLock:
    """Redisson's ``RReadWriteLock`` (``RWLOCK.*``): ``read_lock()`` and ``write_lock()`` share
    one name. Options as for `Lock`; ``fenced`` applies to the write lock."""

    def __init__(self, client: Any, name: str, **options: Any) -> None:
        fenced = options.pop("fenced", False)
        self.name = name
        self.client = client
        self._read = ReadLock(client, name, **options)
        self._write = WriteLock(client, name, fenced=fenced, **options)

    def read_lock(self) -> ReadLock:
        return self._read

    def write_lock(self) -> WriteLock:
        return self._write

    def __repr__(self) -> str:
        return f"<ReadWriteLock {self.name!r}>"
