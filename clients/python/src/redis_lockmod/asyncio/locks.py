"""The asyncio locks on ``redis.asyncio``: `Lock`, `ReadWriteLock` and `FairLock`, with the
sync locks' options (see `redis_lockmod.locks`). Reentrant per task::

    lock = Lock(r, "orders")            # r: redis.asyncio.Redis or redis.asyncio.RedisCluster
    async with lock:
        ...

A task cancelled while it waits for the lock (``asyncio.timeout``, ``wait_for``) closes its
connection, which takes it out of the server's queue; if the grant raced the cancellation, a
background task gives the hold back, so no grant is left that nobody knows of.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from .. import _kinds
from .._base import Attempt, LockBase
from .._owner import task_id
from .._protocol import ReplyLost
from ..errors import LockLostError, LockTimeoutError, NoSyncedReplicasError
from ._driver import once, read, run
from ._session import AsyncSession, session_for

log = logging.getLogger("redis_lockmod")


class _AsyncLock(LockBase):
    _session: AsyncSession

    def __init__(self, client: Any, name: str, **options: Any) -> None:
        super().__init__(session_for(client), name, **options)
        #: Held strongly, as in the sync locks: the lock keeps the client it was given alive.
        self.client = client

    def _tid(self) -> int:
        return task_id()

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """As the sync `Lock.acquire`, for the current task."""
        s = self._session
        pending = self._pending_flow()
        if pending is not None:
            flow, hold, key = pending
            if self._synced(hold, key, await run(flow, s.transport)):
                s.watchdog.unwatch(hold)
        attempt = self._acquire_flow(blocking, timeout)
        try:
            granted, token = await run(attempt.flow, s.transport)
        except BaseException as e:
            lost = getattr(e, "lockmod_lost", None)
            if lost is not None and not isinstance(e, Exception):
                self._settle_later(attempt, lost)
            self._refused(attempt)
            raise
        if not granted:
            self._refused(attempt)
            return False
        if self._granted(attempt.hold, token):
            s.watchdog.watch(self, attempt.hold, attempt.key, attempt.owner)
        return True

    def _settle_later(self, attempt: Attempt, lost: ReplyLost) -> None:
        async def settle() -> None:
            try:
                await run(self._undo_flow(attempt, lost), self._session.transport)
            except Exception as e:
                log.warning("could not settle the cancelled acquire of %s: %s", self.name, e)

        task = asyncio.get_running_loop().create_task(settle())
        self._session.background.add(task)
        task.add_done_callback(self._session.background.discard)

    async def release(self) -> None:
        """As the sync `Lock.release`, for the current task."""
        flow, hold, key = self._release_flow()
        try:
            reply = await run(flow, self._session.transport)
        except NoSyncedReplicasError as unsynced:
            self._record_release(hold, key, unsynced.reply)
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

    async def locked(self) -> bool:
        reply = await read(self._session.transport, self.name, self._kind.locked_args(self.name), self.command_timeout)
        return self._kind.parse_locked(reply)

    async def hold_count(self) -> int:
        args = self._kind.holds_args(self.name, self.owner)
        return self._kind.parse_holds(await read(self._session.transport, self.name, args, self.command_timeout))

    async def owned(self) -> bool:
        return await self.hold_count() > 0

    async def remaining_ms(self) -> int:
        return int(await read(self._session.transport, self.name, ("PTTL", self.name), self.command_timeout))

    async def force_unlock(self) -> bool:
        args = self._kind.force_unlock_args(self.name)
        try:
            reply = await once(self._session.transport, self.name, args, self.command_timeout, self.sync_ms)
        except NoSyncedReplicasError:
            self._unwatch_forced()  # applied on the primary
            raise
        self._unwatch_forced()
        return int(reply) == 1

    def _unwatch_forced(self) -> None:
        for hold in self._forced():
            self._session.watchdog.unwatch(hold)

    async def __aenter__(self) -> "_AsyncLock":
        if not await self.acquire(blocking=True, timeout=self.timeout):
            raise LockTimeoutError(f"could not acquire lock {self.name!r} within {self.timeout} s")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class Lock(_AsyncLock):
    """Redisson's reentrant lock ``RLock`` (``LOCK.*``); ``fenced=True`` is ``RFencedLock``."""

    _kind = _kinds.REENTRANT


class FairLock(_AsyncLock):
    """Redisson's fair lock ``RFairLock`` (``FAIRLOCK.*``): granted in arrival order."""

    _kind = _kinds.FAIR


class ReadLock(_AsyncLock):
    """The read side of a `ReadWriteLock`."""

    _kind = _kinds.READ


class WriteLock(_AsyncLock):
    """The write side of a `ReadWriteLock`."""

    _kind = _kinds.WRITE


class ReadWriteLock:
    """Redisson's ``RReadWriteLock`` (``RWLOCK.*``); ``fenced`` applies to the write lock."""

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
