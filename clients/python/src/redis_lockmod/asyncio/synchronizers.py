"""The asyncio synchronizers on ``redis.asyncio``: `Semaphore`, `PermitExpirableSemaphore`,
`CountDownLatch`, with the sync ones' names and options (see `redis_lockmod.synchronizers`)::

    sem = Semaphore(r, "pool")
    async with sem:                         # one permit, waiting in the server (BLOCK)
        ...
    async with psem.hold(lease_ms=60_000) as ids:
        ...
    await latch.wait(timeout=10)

A task cancelled while it waits (``asyncio.timeout``, ``wait_for``, ``task.cancel()``) leaves
nothing behind, before the ``CancelledError`` reaches its caller: its parked request is answered
at once with ``CLIENT UNBLOCK <id> TIMEOUT`` from another connection, and permits granted
before the unblock got there are given back. Without the permission to run ``CLIENT UNBLOCK``
the connection is closed instead, which takes the waiter out of the server's queue; a grant
that raced it is then logged and cannot be given back.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, List, Optional

from .. import _sync
from .._kinds import Args
from .._protocol import ReplyLost, TooLate
from .._sync import Ids, LatchArgs, PermitArgs, SemaphoreArgs
from ..errors import LockLostError, LockNotOwnedError, LockTimeoutError, NoSyncedReplicasError
from ._cancel import Parked, finish, end_wait, start
from ._driver import once, read
from ._session import AsyncSession, session_for

log = logging.getLogger("redis_lockmod")

_DEFAULT: Any = object()

#: The command that gives back what a wait was granted (given its reply; None: nothing was),
#: when the grant raced a cancellation or no replica acknowledged it.
GiveBack = Optional[Callable[[Any], Optional[Args]]]


class _AsyncObject(_sync.SyncBase):
    _session: AsyncSession

    def __init__(
        self,
        client: Any,
        name: str,
        *,
        timeout: Optional[float] = None,
        command_timeout: Optional[float] = None,
        **sync: Any,
    ) -> None:
        super().__init__(session_for(client), client, name, timeout, command_timeout, **sync)

    async def _once(self, args: Args, timeout: Optional[float] = _DEFAULT) -> Any:
        sock = self.command_timeout if timeout is _DEFAULT else timeout
        return await once(self._session.transport, self.name, args, sock, self.sync_ms)  # type: ignore[arg-type]

    async def _read(self, args: Args, sync: bool = False) -> Any:
        sync_ms = self.sync_ms if sync else None
        return await read(self._session.transport, self.name, args, self.command_timeout, sync_ms=sync_ms)

    async def _give_back(self, undo: Args, to: str) -> None:
        """Sends `undo` (not waited for by the replicas) for what was granted `to` whom; a
        failure is logged."""
        try:
            await once(self._session.transport, self.name, undo, self.command_timeout)
        except Exception as e:
            log.warning("could not give back %s of %s granted to %s: %r", undo[2:], self.name, to, e)
            return
        log.info("gave back %s of %s granted to %s", undo[2:], self.name, to)

    async def _wait(self, args: Args, sock: Optional[float], give_back: GiveBack) -> Any:
        """Sends a command that may park (``BLOCK``) once. If the calling task is cancelled
        meanwhile, the wait is ended in the server and whatever it was granted is given back
        (`give_back`) before the cancellation goes on (`redis_lockmod.asyncio._cancel`). A grant
        that no replica acknowledged is given back too, then `NoSyncedReplicasError` is raised."""
        parked = Parked()
        call = self._session.transport.call(self.name, (args,), sock, parked=parked, sync_ms=self.sync_ms)
        request = start(call)
        try:
            replies = await asyncio.shield(request)
        except asyncio.CancelledError:
            await finish(self._cancelled(request, parked, give_back))
            raise
        except ReplyLost as lost:
            raise lost.cause
        except NoSyncedReplicasError as unsynced:
            undo = give_back(unsynced.reply) if give_back is not None else None
            if undo is None:
                return unsynced.reply
            await self._give_back(undo, "an acquire no replica acknowledged")
            raise
        return replies[0]

    async def _cancelled(self, request: "asyncio.Future[Any]", parked: Parked, give_back: GiveBack) -> None:
        """A cancelled wait: ends it, lets its request read the reply, and gives back what it
        was granted."""
        await end_wait(self._session.transport, parked, request, self.command_timeout)
        try:
            reply = request.result()[0]
        except TooLate:
            return  # never sent
        except NoSyncedReplicasError as unsynced:
            reply = unsynced.reply
        except ReplyLost as lost:
            if give_back is not None:
                log.warning("a cancelled wait on %s was closed; a grant that raced it cannot be given back: %r", self.name, lost.cause)
            return
        except BaseException as e:
            log.warning("the cancelled wait on %s ended without a reply: %r", self.name, e)
            return
        undo = give_back(reply) if give_back is not None else None
        if undo is not None:
            await self._give_back(undo, "a cancelled acquire")


class Semaphore(_AsyncObject):
    """As the sync `redis_lockmod.Semaphore` (Redisson's ``RSemaphore``)."""

    _what = "semaphore"

    async def try_set_permits(self, permits: int, lease_ms: Optional[int] = None) -> bool:
        return int(await self._once(SemaphoreArgs.try_set(self.name, permits, lease_ms))) == 1

    async def acquire(self, permits: int = 1, *, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """As the sync `Semaphore.acquire`; cancelling the task gives back a racing grant."""
        block_ms, sock = _sync.wait(blocking, timeout, self.command_timeout)
        args = SemaphoreArgs.acquire(self.name, permits, block_ms)
        undo = SemaphoreArgs.release(self.name, permits)
        return int(await self._wait(args, sock, lambda r: undo if int(r) == 1 else None)) == 1

    async def release(self, permits: int = 1) -> int:
        return int(await self._once(SemaphoreArgs.release(self.name, permits)))

    async def add_permits(self, delta: int) -> None:
        await self._once(("SEMAPHORE.ADDPERMITS", self.name, _sync.integer(delta, "delta")))

    async def drain_permits(self) -> int:
        return int(await self._once(("SEMAPHORE.DRAIN", self.name)))

    async def available_permits(self) -> int:
        return int(await self._read(("SEMAPHORE.AVAILABLE", self.name)))

    @asynccontextmanager
    async def hold(self, permits: int = 1, timeout: Optional[float] = _DEFAULT) -> AsyncIterator["Semaphore"]:
        """``async with sem.hold(n):`` as the sync `Semaphore.hold`."""
        timeout = self.timeout if timeout is _DEFAULT else timeout
        if not await self.acquire(permits, timeout=timeout):
            raise LockTimeoutError(f"could not acquire {permits} permit(s) of semaphore {self.name!r} within {timeout} s")
        try:
            yield self
        finally:
            await self.release(permits)

    async def __aenter__(self) -> "Semaphore":
        if not await self.acquire(1, timeout=self.timeout):
            raise LockTimeoutError(f"could not acquire a permit of semaphore {self.name!r} within {self.timeout} s")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release(1)


class PermitExpirableSemaphore(_AsyncObject):
    """As the sync `redis_lockmod.PermitExpirableSemaphore` (``RPermitExpirableSemaphore``)."""

    _what = "permit-expirable semaphore"

    def __init__(self, client: Any, name: str, *, lease_ms: Optional[int] = None, **options: Any) -> None:
        super().__init__(client, name, **options)
        self.lease_ms = None if lease_ms is None else _sync.positive(lease_ms, "lease_ms")

    def _lease(self, lease_ms: Optional[int]) -> int:
        """The lease of an acquire; 0 (never expires) when neither it nor the semaphore has one."""
        lease = self.lease_ms if lease_ms is None else lease_ms
        return 0 if lease is None else _sync.positive(lease, "lease_ms")

    async def try_set_permits(self, permits: int) -> bool:
        return int(await self._once(("PSEMAPHORE.TRYSETPERMITS", self.name, _sync.non_negative(permits, "permits")))) == 1

    async def set_permits(self, permits: int) -> None:
        await self._once(("PSEMAPHORE.SETPERMITS", self.name, _sync.non_negative(permits, "permits")))

    async def acquire(
        self,
        permits: int = 1,
        *,
        lease_ms: Optional[int] = None,
        blocking: bool = True,
        timeout: Optional[float] = None,
    ) -> Optional[List[str]]:
        """As the sync `PermitExpirableSemaphore.acquire`; cancelling the task gives back a
        racing grant."""
        lease = self._lease(lease_ms)
        block_ms, sock = _sync.wait(blocking, timeout, self.command_timeout)
        args = PermitArgs.acquire(self.name, permits, lease, block_ms)
        return _sync.parse_ids(await self._wait(args, sock, lambda r: PermitArgs.give_back(self.name, r)))

    async def try_release(self, ids: Ids) -> bool:
        wanted = _sync.id_list(ids)
        return int(await self._once(("PSEMAPHORE.RELEASE", self.name, *wanted))) == len(wanted)

    async def release(self, ids: Ids) -> None:
        if not await self.try_release(ids):
            raise LockNotOwnedError(
                f"permit(s) {_sync.id_list(ids)} of {self.name!r} were not released: unknown, already released or expired"
            )

    async def update_lease(self, permit_id: str, lease_ms: int) -> bool:
        args = ("PSEMAPHORE.UPDATELEASE", self.name, _sync.id_list(permit_id)[0], _sync.non_negative(lease_ms, "lease_ms"))
        return int(await self._read(args, sync=True)) == 1

    async def available_permits(self) -> int:
        return int(await self._read(("PSEMAPHORE.AVAILABLE", self.name)))

    async def acquired_permits(self) -> int:
        return int(await self._read(("PSEMAPHORE.ACQUIRED", self.name)))

    @asynccontextmanager
    async def hold(
        self, permits: int = 1, *, lease_ms: Optional[int] = None, timeout: Optional[float] = _DEFAULT
    ) -> AsyncIterator[List[str]]:
        """``async with psem.hold() as ids:`` as the sync `PermitExpirableSemaphore.hold`."""
        timeout = self.timeout if timeout is _DEFAULT else timeout
        ids = await self.acquire(permits, lease_ms=lease_ms, timeout=timeout)
        if ids is None:
            raise LockTimeoutError(f"could not acquire {permits} permit(s) of {self.name!r} within {timeout} s")
        ok = False
        try:
            yield ids
            ok = True
        finally:
            released = await self.try_release(ids)
            if ok and not released:
                raise LockLostError(f"permit(s) {ids} of {self.name!r} expired before release (lease ran out)")


class CountDownLatch(_AsyncObject):
    """As the sync `redis_lockmod.CountDownLatch` (Redisson's ``RCountDownLatch``); its changes
    wait for no replica."""

    _what = "count-down latch"
    _syncs = False

    async def try_set_count(self, count: int) -> bool:
        return int(await self._once(("COUNTDOWN.TRYSETCOUNT", self.name, _sync.non_negative(count, "count")))) == 1

    async def count_down(self) -> int:
        return int(await self._once(("COUNTDOWN.DECR", self.name)))

    async def count(self) -> int:
        return int(await self._read(("COUNTDOWN.COUNT", self.name)))

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """As the sync `CountDownLatch.wait`; a cancelled wait closes its connection."""
        block_ms, sock = _sync.wait(True, timeout, self.command_timeout)
        return int(await self._wait(LatchArgs.await_(self.name, block_ms), sock, None)) == 1
