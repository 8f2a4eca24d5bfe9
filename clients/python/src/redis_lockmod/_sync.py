"""What the sync and asyncio synchronizers share: argument checks, the commands and how to read
their replies. No I/O here.

The commands are the module's (issue 26, docs/commands.md): ``SEMAPHORE.*`` on Redisson's
``RSemaphore`` layout, ``PSEMAPHORE.*`` on ``RPermitExpirableSemaphore``'s, ``COUNTDOWN.*`` on
``RCountDownLatch``'s. A wait is the server's ``BLOCK`` (FIFO among the module's clients), on a
connection of the library's own, as for the locks.

Unlike a lock acquire, a semaphore acquire names no owner, so a lost reply (socket timeout,
broken connection) cannot be settled by asking the server: it is never sent again, and the error
(redis-py's ``ConnectionError`` or ``TimeoutError``) tells the caller the outcome is unknown.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple, Union

from . import _timeouts
from ._base import command_timeout_of, sync_timeout_of
from ._kinds import text
from ._replicas import DEFAULT_SYNC_TIMEOUT_MS

#: A permit id, or several (``release``, ``try_release``).
Ids = Union[str, Iterable[str]]


def positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive int, not {value!r}")
    return value


def non_negative(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} must be a non-negative int, not {value!r}")
    return value


def integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int, not {value!r}")
    return value


def check_name(name: Any, kind: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} name is a non-empty str")
    return name


def wait(blocking: bool, timeout: Optional[float], command_timeout: float) -> Tuple[Optional[int], Optional[float]]:
    """(BLOCK ms or None, socket timeout) of a wait, as the locks translate them (see
    `redis_lockmod._timeouts`): no limit (None, -1, infinity) is ``BLOCK 0`` without a socket
    timeout; a timeout in seconds waits that long in the server (the socket gets it on top of
    the command timeout); not blocking, or a timeout of 0, tries once."""
    return _timeouts.wait(blocking, timeout, command_timeout)


def with_block(args: Tuple[Any, ...], block_ms: Optional[int]) -> Tuple[Any, ...]:
    return args if block_ms is None else (*args, "BLOCK", block_ms)


def id_list(ids: Ids) -> List[str]:
    """One permit id or several, as a non-empty list of str."""
    out = [ids] if isinstance(ids, (str, bytes)) else list(ids)
    if not out:
        raise ValueError("no permit id given")
    got = [text(i) for i in out]
    for i in got:
        if not isinstance(i, str) or not i:
            raise ValueError(f"a permit id is a non-empty str, not {i!r}")
    return got  # type: ignore[return-value]


def parse_ids(reply: Any) -> Optional[List[str]]:
    """``PSEMAPHORE.ACQUIRE``'s reply: the permit ids, or None when not granted."""
    if reply is None:
        return None
    return [text(i) for i in reply]  # type: ignore[misc]


class SyncBase:
    """Options every synchronizer has: its name, the client (kept alive, as a lock keeps its
    client), the socket timeout of a command, the ``timeout`` of ``with``, and the wait for the
    replicas after each change (``sync_replicas``, ``sync_timeout_ms``: the semaphores', as
    Redisson's; Redisson's count-down latch waits for none, and neither does this one)."""

    _what = "synchronizer"
    #: Whether the changes wait for the replicas (Redisson: its semaphores do, its latch not).
    _syncs = True

    def __init__(
        self,
        session: Any,
        client: Any,
        name: str,
        timeout: Optional[float],
        command_timeout: Optional[float],
        sync_replicas: bool = True,
        sync_timeout_ms: int = DEFAULT_SYNC_TIMEOUT_MS,
    ) -> None:
        self.name = check_name(name, self._what)
        self._session = session
        #: The client this object was given, held strongly (see ``Lock.client``).
        self.client = client
        self.timeout = _timeouts.seconds(timeout)
        self.command_timeout = command_timeout_of(session.client, command_timeout)
        sync_ms = sync_timeout_of(sync_replicas, sync_timeout_ms)
        #: The ms a change waits for the replicas, or None.
        self.sync_ms = sync_ms if self._syncs else None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class SemaphoreArgs:
    """``SEMAPHORE.*`` (Redisson's ``RSemaphore``)."""

    @staticmethod
    def try_set(name: str, permits: int, lease_ms: Optional[int]) -> Tuple[Any, ...]:
        non_negative(permits, "permits")
        if lease_ms is None:
            return ("SEMAPHORE.TRYSETPERMITS", name, permits)
        return ("SEMAPHORE.TRYSETPERMITS", name, permits, "LEASE", positive(lease_ms, "lease_ms"))

    @staticmethod
    def acquire(name: str, permits: int, block_ms: Optional[int]) -> Tuple[Any, ...]:
        return with_block(("SEMAPHORE.ACQUIRE", name, positive(permits, "permits")), block_ms)

    @staticmethod
    def release(name: str, permits: int) -> Tuple[Any, ...]:
        return ("SEMAPHORE.RELEASE", name, positive(permits, "permits"))


class PermitArgs:
    """``PSEMAPHORE.*`` (Redisson's ``RPermitExpirableSemaphore``)."""

    @staticmethod
    def acquire(name: str, permits: int, lease_ms: int, block_ms: Optional[int]) -> Tuple[Any, ...]:
        # A lease of 0: the permit never expires (Redisson's acquire() without a lease).
        args = ("PSEMAPHORE.ACQUIRE", name, positive(permits, "permits"), non_negative(lease_ms, "lease_ms"))
        return with_block(args, block_ms)

    @staticmethod
    def give_back(name: str, reply: Any) -> Optional[Tuple[Any, ...]]:
        """The release of what an acquire replied (None when it was refused)."""
        ids = parse_ids(reply)
        return ("PSEMAPHORE.RELEASE", name, *ids) if ids else None


class LatchArgs:
    """``COUNTDOWN.*`` (Redisson's ``RCountDownLatch``)."""

    @staticmethod
    def await_(name: str, block_ms: Optional[int]) -> Tuple[Any, ...]:
        return with_block(("COUNTDOWN.AWAIT", name), block_ms)
