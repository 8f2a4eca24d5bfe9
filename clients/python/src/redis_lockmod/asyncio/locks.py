"""The asyncio locks on ``redis.asyncio``: `Lock`, `ReadWriteLock` and `FairLock`, with the
sync locks' options (see `redis_lockmod.locks`). Reentrant per task::

    lock = Lock(r, "orders")            # r: redis.asyncio.Redis or redis.asyncio.RedisCluster
    async with lock:
        ...

A task cancelled while it waits for the lock (``asyncio.timeout``, ``wait_for``,
``task.cancel()``) ends its wait in the server (``CLIENT UNBLOCK``), and gives back a grant that
raced the cancellation, before the ``CancelledError`` reaches its caller: an unlock the caller
sends next never hands the lock to the cancelled wait, and its next acquire starts from nothing
held (`redis_lockmod.asyncio._cancel`). A release, once sent, is finished (its reply read and
recorded) before a cancellation goes on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from .. import _kinds, _protocol
from .._base import Attempt, LockBase
from .._connections import not_run
from .._owner import task_id
from .._protocol import TooLate
from ..errors import LockLostError, LockTimeoutError, NoSyncedReplicasError
from ._cancel import Parked, end_wait, finish, start, uninterrupted
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
        _refuse_own_task(self)
        s = self._session
        pending = self._pending_flow()
        if pending is not None:
            flow, hold, key = pending
            if self._synced(hold, key, await run(flow, s.transport)):
                s.watchdog.unwatch(hold)
        attempt = self._acquire_flow(blocking, timeout)
        parked = Parked()
        request = start(run(attempt.flow, s.transport, parked))
        try:
            granted, token = await asyncio.shield(request)
        except asyncio.CancelledError:
            await finish(self._cancelled(attempt, request, parked))
            self._refused(attempt)
            raise
        except BaseException:
            self._refused(attempt)
            raise
        if not granted:
            self._refused(attempt)
            return False
        if self._granted(attempt.hold, token):
            s.watchdog.watch(self, attempt.hold, attempt.key, attempt.owner)
        return True

    async def _cancelled(self, attempt: Attempt, request: "asyncio.Future[Any]", parked: Parked) -> None:
        """A cancelled acquire: ends its wait, lets it finish, and gives back what it was
        granted (one hold, with an unlock of its own)."""
        transport = self._session.transport
        await end_wait(transport, parked, request, self.command_timeout)
        try:
            granted, _ = request.result()
        except TooLate:
            return  # the wait was never sent
        except BaseException as e:
            if not_run(e):
                # `UNBLOCKED` from another client's `CLIENT UNBLOCK ... ERROR` (or a failover):
                # the server ran nothing, and gave back any grant before that error was sent.
                log.info("the cancelled acquire of %s for %s was not granted: %r", self.name, attempt.owner, e)
                return
            log.warning("the cancelled acquire of %s for %s ended without an outcome: %r", self.name, attempt.owner, e)
            return
        if not granted:
            return
        pending = self._new_unlock(attempt.owner)
        flow = _protocol.release_flow(
            self._kind,
            self.name,
            attempt.owner,
            pending,
            lambda: self._new_unlock(attempt.owner),
            attempt.before + 1,
            self.settle_timeout,
            self.settle_timeout,
        )
        try:
            reply = await run(flow, transport)
        except Exception as e:
            log.warning("could not give back the grant of a cancelled acquire of %s: %r", self.name, e)
            return
        log.info("gave back the grant of a cancelled acquire of %s for %s (%r)", self.name, attempt.owner, reply)

    async def release(self) -> None:
        """As the sync `Lock.release`, for the current task. Once sent, the unlock is finished
        and recorded even if the task is cancelled meanwhile (then ``CancelledError`` is
        raised)."""
        flow, hold, key = self._release_flow()
        await uninterrupted(self._release(flow, hold, key))

    async def _release(self, flow: Any, hold: Any, key: Any) -> None:
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


#: The coroutines whose running as a task of their own would make that task the owner.
_OWNED_CODES = (_AsyncLock.acquire.__code__, _AsyncLock.__aenter__.__code__)


def _refuse_own_task(lock: _AsyncLock) -> None:
    """Raises RuntimeError when the acquire is the whole of the current task: the hold would
    belong to a task that ends with it (``asyncio.wait_for`` before Python 3.12, ``create_task``,
    ``gather``), so no task could release it; nothing is sent."""
    task = asyncio.current_task()
    code = getattr(task.get_coro() if task is not None else None, "cr_code", None)
    if code in _OWNED_CODES:
        raise RuntimeError(
            f"{type(lock).__name__}({lock.name!r}).acquire() runs as a task of its own "
            "(asyncio.wait_for before Python 3.12, create_task, gather): the hold would belong to "
            "that task, which ends with it, and no other task could release it. Await it in the "
            "task that releases it, with acquire(timeout=...) or inside asyncio.timeout(...)."
        )


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
