"""The sync synchronizers on redis-py: `Semaphore`, `PermitExpirableSemaphore`, `CountDownLatch`
(Redisson's ``RSemaphore``, ``RPermitExpirableSemaphore``, ``RCountDownLatch``, on their
layout, so a Redisson client shares them by name)::

    sem = Semaphore(r, "pool")
    sem.try_set_permits(3)
    with sem:                               # one permit, waiting in the server (BLOCK)
        ...
    with sem.hold(2, timeout=5):            # two permits, or LockTimeoutError after 5 s
        ...

    psem = PermitExpirableSemaphore(r, "jobs", lease_ms=60_000)
    with psem.hold() as ids:                # a permit that comes back by itself after 60 s
        psem.update_lease(ids[0], 120_000)

    latch = CountDownLatch(r, "ready")
    latch.try_set_count(2)
    latch.count_down()
    latch.wait(timeout=10)                  # True once the count is zero

Options (keyword arguments): ``timeout`` (seconds ``with`` waits, None: no limit),
``command_timeout`` (socket timeout of each command; a ``BLOCK`` wait gets its wait on top),
and for `PermitExpirableSemaphore` ``lease_ms`` (each permit's default lease; without one a
permit never expires, as Redisson's ``acquire()`` without a lease).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional

from . import _sync
from ._driver import once, read
from ._kinds import Args
from ._session import session_for
from ._sync import Ids, LatchArgs, PermitArgs, SemaphoreArgs
from .errors import LockLostError, LockNotOwnedError, LockTimeoutError, NoSyncedReplicasError

log = logging.getLogger("redis_lockmod")

_DEFAULT: Any = object()


class _SyncObject(_sync.SyncBase):
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

    def _once(self, args: Args, timeout: Optional[float] = _DEFAULT) -> Any:
        """A command that changes something, or waits: sent once (a lost reply raises), then the
        wait for the replicas (`NoSyncedReplicasError`). ``timeout``: the socket timeout (None:
        none, for a wait without limit)."""
        sock = self.command_timeout if timeout is _DEFAULT else timeout
        return once(self._session.transport, self.name, args, sock, self.sync_ms)  # type: ignore[arg-type]

    def _read(self, args: Args, sync: bool = False) -> Any:
        """A command whose effect twice is its effect once (a read; with `sync`, a lease
        update, followed by the wait for the replicas): sent again if lost."""
        sync_ms = self.sync_ms if sync else None
        return read(self._session.transport, self.name, args, self.command_timeout, sync_ms=sync_ms)

    def _acquired(self, args: Args, sock: Optional[float], give_back: Callable[[Any], Optional[Args]]) -> Any:
        """Sends the acquire `args` once; if no replica acknowledged its grant, gives it back
        with the command `give_back(reply)` (not waited for) and raises `NoSyncedReplicasError`
        (Redisson's ``handleNoSync``). A refusal (`give_back` gives None) is a refusal: nothing
        was taken."""
        try:
            return self._once(args, sock)
        except NoSyncedReplicasError as unsynced:
            undo = give_back(unsynced.reply)
            if undo is None:
                return unsynced.reply
            try:
                once(self._session.transport, self.name, undo, self.command_timeout)
            except Exception as e:
                log.warning("could not give back %s of %s granted to an acquire no replica acknowledged: %r", undo[2:], self.name, e)
            raise


class Semaphore(_SyncObject):
    """Redisson's ``RSemaphore`` (``SEMAPHORE.*``): a count of permits in the string ``name``.
    Permits have no owner: any caller may release them. Waiters are served in arrival order (a
    waiter for 3 permits is not overtaken by a later waiter for 1)."""

    _what = "semaphore"

    def try_set_permits(self, permits: int, lease_ms: Optional[int] = None) -> bool:
        """Sets the permits if the semaphore does not exist yet (``lease_ms``: the key then
        expires that long after). True if it was set."""
        return int(self._once(SemaphoreArgs.try_set(self.name, permits, lease_ms))) == 1

    def acquire(self, permits: int = 1, *, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes ``permits`` permits. ``blocking`` waits in the server until they are available,
        at most ``timeout`` seconds (None: no limit); ``blocking=False`` or ``timeout=0`` tries
        once. True when taken. A lost reply raises (the permits may have been taken)."""
        block_ms, sock = _sync.wait(blocking, timeout, self.command_timeout)
        args = SemaphoreArgs.acquire(self.name, permits, block_ms)
        give_back = SemaphoreArgs.release(self.name, permits)
        return int(self._acquired(args, sock, lambda r: give_back if int(r) == 1 else None)) == 1

    def release(self, permits: int = 1) -> int:
        """Gives ``permits`` permits back (whoever took them); returns the permits available."""
        return int(self._once(SemaphoreArgs.release(self.name, permits)))

    def add_permits(self, delta: int) -> None:
        """Adds ``delta`` permits (negative: removes them), as Redisson's ``addPermits``."""
        self._once(("SEMAPHORE.ADDPERMITS", self.name, _sync.integer(delta, "delta")))

    def drain_permits(self) -> int:
        """Takes every available permit; returns how many."""
        return int(self._once(("SEMAPHORE.DRAIN", self.name)))

    def available_permits(self) -> int:
        """The permits available now (0 when the semaphore does not exist)."""
        return int(self._read(("SEMAPHORE.AVAILABLE", self.name)))

    @contextmanager
    def hold(self, permits: int = 1, timeout: Optional[float] = _DEFAULT) -> Iterator["Semaphore"]:
        """``with sem.hold(n):`` takes ``n`` permits (waiting at most ``timeout`` seconds, by
        default the semaphore's, else `LockTimeoutError`) and releases them after the block."""
        timeout = self.timeout if timeout is _DEFAULT else timeout
        if not self.acquire(permits, timeout=timeout):
            raise LockTimeoutError(f"could not acquire {permits} permit(s) of semaphore {self.name!r} within {timeout} s")
        try:
            yield self
        finally:
            self.release(permits)

    def __enter__(self) -> "Semaphore":
        if not self.acquire(1, timeout=self.timeout):
            raise LockTimeoutError(f"could not acquire a permit of semaphore {self.name!r} within {self.timeout} s")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release(1)


class PermitExpirableSemaphore(_SyncObject):
    """Redisson's ``RPermitExpirableSemaphore`` (``PSEMAPHORE.*``): each permit taken has an id
    and a lease; one whose lease runs out comes back by itself, at its deadline, on the
    server's clock. ``lease_ms`` is the default lease of an acquire."""

    _what = "permit-expirable semaphore"

    def __init__(self, client: Any, name: str, *, lease_ms: Optional[int] = None, **options: Any) -> None:
        super().__init__(client, name, **options)
        self.lease_ms = None if lease_ms is None else _sync.positive(lease_ms, "lease_ms")

    def _lease(self, lease_ms: Optional[int]) -> int:
        """The lease of an acquire; 0 (never expires) when neither it nor the semaphore has one."""
        lease = self.lease_ms if lease_ms is None else lease_ms
        return 0 if lease is None else _sync.positive(lease, "lease_ms")

    def try_set_permits(self, permits: int) -> bool:
        """Sets the permits if the semaphore does not exist yet; True if it was set."""
        return int(self._once(("PSEMAPHORE.TRYSETPERMITS", self.name, _sync.non_negative(permits, "permits")))) == 1

    def set_permits(self, permits: int) -> None:
        """Sets the total (available plus taken) to ``permits``, as Redisson's ``setPermits``."""
        self._once(("PSEMAPHORE.SETPERMITS", self.name, _sync.non_negative(permits, "permits")))

    def acquire(
        self,
        permits: int = 1,
        *,
        lease_ms: Optional[int] = None,
        blocking: bool = True,
        timeout: Optional[float] = None,
    ) -> Optional[List[str]]:
        """Takes ``permits`` permits for ``lease_ms`` (default: the semaphore's; none: they never
        expire), waiting as `Semaphore.acquire`. Returns their ids (32 hex digits each), or None when not taken."""
        lease = self._lease(lease_ms)
        block_ms, sock = _sync.wait(blocking, timeout, self.command_timeout)
        args = PermitArgs.acquire(self.name, permits, lease, block_ms)
        return _sync.parse_ids(self._acquired(args, sock, lambda r: PermitArgs.give_back(self.name, r)))

    def try_release(self, ids: Ids) -> bool:
        """Gives back the permits of ``ids`` (one id or several): all of them, or none if one is
        unknown, already released or expired. True if they were released."""
        wanted = _sync.id_list(ids)
        return int(self._once(("PSEMAPHORE.RELEASE", self.name, *wanted))) == len(wanted)

    def release(self, ids: Ids) -> None:
        """As `try_release`, but raises `LockNotOwnedError` when nothing was released (an id
        unknown, already released or expired), as Redisson's ``release(id)`` throws."""
        if not self.try_release(ids):
            raise LockNotOwnedError(
                f"permit(s) {_sync.id_list(ids)} of {self.name!r} were not released: unknown, already released or expired"
            )

    def update_lease(self, permit_id: str, lease_ms: int) -> bool:
        """Sets the lease of a permit still held to ``lease_ms`` from now (0: never expires);
        False if it is gone."""
        args = ("PSEMAPHORE.UPDATELEASE", self.name, _sync.id_list(permit_id)[0], _sync.non_negative(lease_ms, "lease_ms"))
        return int(self._read(args, sync=True)) == 1

    def available_permits(self) -> int:
        """The permits available now (expired ones back)."""
        return int(self._read(("PSEMAPHORE.AVAILABLE", self.name)))

    def acquired_permits(self) -> int:
        """The permits taken and not expired."""
        return int(self._read(("PSEMAPHORE.ACQUIRED", self.name)))

    @contextmanager
    def hold(
        self, permits: int = 1, *, lease_ms: Optional[int] = None, timeout: Optional[float] = _DEFAULT
    ) -> Iterator[List[str]]:
        """``with psem.hold() as ids:`` takes permits (waiting at most ``timeout`` seconds, by
        default the semaphore's, else `LockTimeoutError`), gives their ids, and releases them
        after the block. Raises `LockLostError` at the end if their lease ran out meanwhile
        (the block was not protected all along)."""
        timeout = self.timeout if timeout is _DEFAULT else timeout
        ids = self.acquire(permits, lease_ms=lease_ms, timeout=timeout)
        if ids is None:
            raise LockTimeoutError(f"could not acquire {permits} permit(s) of {self.name!r} within {timeout} s")
        ok = False
        try:
            yield ids
            ok = True
        finally:
            released = self.try_release(ids)
            if ok and not released:
                raise LockLostError(f"permit(s) {ids} of {self.name!r} expired before release (lease ran out)")


class CountDownLatch(_SyncObject):
    """Redisson's ``RCountDownLatch`` (``COUNTDOWN.*``): a count in the string ``name``; waiters
    are all woken when it reaches zero (the key is then deleted). Its changes wait for no
    replica (as Redisson's)."""

    _what = "count-down latch"
    _syncs = False

    def try_set_count(self, count: int) -> bool:
        """Sets the count if the latch does not exist yet; True if it was set."""
        return int(self._once(("COUNTDOWN.TRYSETCOUNT", self.name, _sync.non_negative(count, "count")))) == 1

    def count_down(self) -> int:
        """Decrements the count; returns the count left (at zero the latch opens)."""
        return int(self._once(("COUNTDOWN.DECR", self.name)))

    def count(self) -> int:
        """The count now (0 when the latch does not exist)."""
        return int(self._read(("COUNTDOWN.COUNT", self.name)))

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Redisson's ``await``: waits in the server until the count is zero, at most ``timeout``
        seconds (None: no limit; 0: checks once). True once it is zero (or the latch does not
        exist), False when the time ran out."""
        block_ms, sock = _sync.wait(True, timeout, self.command_timeout)
        return int(self._once(LatchArgs.await_(self.name, block_ms), sock)) == 1
