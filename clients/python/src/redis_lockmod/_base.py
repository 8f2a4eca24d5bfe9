"""What the sync and asyncio locks share: options, owner names, the local record of holds,
and the bookkeeping around an acquire or a release. No I/O here: the subclasses run the flows
of ``_protocol`` on their transport.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import _kinds, _names, _protocol, _timeouts
from ._kinds import Args, Kind
from ._replicas import DEFAULT_SYNC_TIMEOUT_MS
from .errors import LockLostError, LockNotOwnedError

#: Redisson's watchdog: a 30 s lease, renewed every third of it while the lock is held.
WATCHDOG_LEASE_MS = 30_000
#: Redisson's fair-lock wait: how long a queued waiter may go without retrying (5 minutes).
FAIR_WAIT_MS = 300_000
#: Socket timeout of a command when the redis client sets none (seconds).
DEFAULT_COMMAND_TIMEOUT = 10.0


@dataclass
class Hold:
    """This process's record of one owner's holds on one side of one lock."""

    count: int = 0
    token: Optional[int] = None
    #: Set when the watchdog found the lock gone; `release` then raises `LockLostError`.
    lost: bool = False
    #: The watchdog's entry while it renews this hold.
    watch: Any = None
    #: An unlock whose outcome never came back: the next release sends this same request
    #: (same latch id), so a caller that retries a failed release cannot release twice; an
    #: acquire first reads the hold count back from the server instead.
    pending_unlock: Optional[_protocol.PendingUnlock] = None


class Session:
    """One redis client's lock identity, as a Redisson client instance: the uuid in every owner
    name, and the holds its threads (or tasks) have. Subclasses give `client` and `transport`."""

    client: Any

    def __init__(self) -> None:
        self.uuid = str(uuid.uuid4())
        self.mutex = threading.Lock()
        self.holds: Dict[Tuple[str, str, str], Hold] = {}

    def hold(self, key: Tuple[str, str, str]) -> Hold:
        with self.mutex:
            return self.holds.setdefault(key, Hold())

    def find(self, key: Tuple[str, str, str]) -> Optional[Hold]:
        with self.mutex:
            return self.holds.get(key)

    def forget(self, key: Tuple[str, str, str], hold: Hold) -> None:
        with self.mutex:
            if self.holds.get(key) is hold:
                del self.holds[key]

    def forget_lock(self, kind: str, name: str) -> list:
        """Drops every owner's record of one lock (after a force unlock); returns them."""
        with self.mutex:
            keys = [k for k in self.holds if k[0] == kind and k[1] == name]
            return [self.holds.pop(k) for k in keys]


def command_timeout_of(client: Any, given: Optional[float]) -> float:
    """The socket timeout of a lock command: the one given, else the client's, else 10 s."""
    if given is not None:
        return _timeouts.command_seconds(given)
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:
        # RedisCluster: the nodes' connection settings (asyncio: on the client itself).
        kwargs = getattr(client, "connection_kwargs", None)
    if kwargs is None:
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", None) or {}
    t = kwargs.get("socket_timeout")
    return min(float(t), _timeouts.NO_LIMIT_S) if t else DEFAULT_COMMAND_TIMEOUT


def sync_timeout_of(sync_replicas: bool, sync_timeout_ms: int) -> Optional[int]:
    """The checked ``sync_timeout_ms``, or None when ``sync_replicas`` is off."""
    if isinstance(sync_timeout_ms, bool) or not isinstance(sync_timeout_ms, int) or sync_timeout_ms <= 0:
        raise ValueError("sync_timeout_ms must be a positive int (milliseconds)")
    return sync_timeout_ms if sync_replicas else None


@dataclass
class Attempt:
    """One acquire in progress."""

    flow: _protocol.Flow
    hold: Hold
    key: Tuple[str, str, str]
    owner: str
    before: int


class LockBase:
    """The lock's options and the bookkeeping of its acquire and release."""

    _kind: Kind = _kinds.REENTRANT

    def __init__(
        self,
        session: Session,
        name: str,
        *,
        lease_ms: Optional[int] = None,
        fenced: bool = False,
        timeout: Optional[float] = None,
        on_lost: Optional[Callable[[Any], Any]] = None,
        watchdog_lease_ms: int = WATCHDOG_LEASE_MS,
        watchdog_interval_ms: Optional[int] = None,
        command_timeout: Optional[float] = None,
        wait_ms: int = FAIR_WAIT_MS,
        sync_replicas: bool = True,
        sync_timeout_ms: int = DEFAULT_SYNC_TIMEOUT_MS,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a lock name is a non-empty str")
        for what, v in (("lease_ms", lease_ms), ("watchdog_lease_ms", watchdog_lease_ms), ("wait_ms", wait_ms)):
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ValueError(f"{what} must be a positive int (milliseconds)")
        if watchdog_interval_ms is not None and (
            isinstance(watchdog_interval_ms, bool)
            or not isinstance(watchdog_interval_ms, int)
            or not 0 < watchdog_interval_ms < watchdog_lease_ms
        ):
            raise ValueError("watchdog_interval_ms must be a positive int (milliseconds) below watchdog_lease_ms")
        if fenced and not self._kind.fenceable:
            raise ValueError(f"a {self._kind.id} lock takes no fencing token")
        self._session = session
        self.name = name
        self.lease_ms = lease_ms
        self.fenced = fenced
        self.timeout = _timeouts.seconds(timeout)
        self.on_lost = on_lost
        self.watchdog_lease_ms = watchdog_lease_ms
        self.watchdog_interval_ms = watchdog_interval_ms or max(1, watchdog_lease_ms // 3)
        self.command_timeout = command_timeout_of(session.client, command_timeout)
        #: The socket timeout of the reads (and re-sent unlocks) that settle a lost reply:
        #: longer, since the server that lost a reply may still be busy.
        self.settle_timeout = max(1.0, 2 * self.command_timeout)
        self.wait_ms = wait_ms
        #: Redisson's ``checkLockSyncedSlaves`` and ``slavesSyncTimeout``: the ms each grant,
        #: renewal and unlock waits for the primary's replicas, or None (``sync_replicas=False``).
        self.sync_ms = sync_timeout_of(sync_replicas, sync_timeout_ms)

    # -- names ------------------------------------------------------------------------------
    def _tid(self) -> int:
        raise NotImplementedError

    @property
    def owner(self) -> str:
        """The current thread's (or task's) owner name: ``<client uuid>:<thread id>``."""
        return f"{self._session.uuid}:{self._tid()}"

    def _key(self, owner: str) -> Tuple[str, str, str]:
        return (self._kind.id, self.name, owner)

    @property
    def watchdog(self) -> bool:
        """True when no lease was given: a watchdog keeps renewing the lease while held."""
        return self.lease_ms is None

    def _lease(self) -> int:
        return self.lease_ms if self.lease_ms is not None else self.watchdog_lease_ms

    @property
    def token(self) -> Optional[int]:
        """The fencing token of the current thread's last grant (None if it holds nothing)."""
        hold = self._session.find(self._key(self.owner))
        return hold.token if hold is not None and hold.count > 0 else None

    @property
    def lost(self) -> bool:
        """True when the watchdog found this thread's lock gone and it was not released yet."""
        hold = self._session.find(self._key(self.owner))
        return hold is not None and hold.lost

    # -- acquire ----------------------------------------------------------------------------
    def _acquire_flow(self, blocking: bool, timeout: Optional[float]) -> "Attempt":
        """One acquire: its flow, and what is needed to record or undo it."""
        block_ms, sock_timeout = _timeouts.wait(blocking, timeout, self.command_timeout)
        owner = self.owner
        key = self._key(owner)
        hold = self._session.hold(key)
        args = self._kind.acquire_args(
            self.name, owner, self._lease(), wait_ms=self.wait_ms, block_ms=block_ms, token=self.fenced
        )
        flow = _protocol.acquire_flow(
            self._kind,
            self.name,
            owner,
            args,
            fenced=self.fenced,
            held_before=hold.count,
            timeout=sock_timeout,
            settle_timeout=self.settle_timeout,
            sync_ms=self.sync_ms,
            again=self._wait_again(owner, block_ms, _timeouts.seconds(timeout) if blocking else None),
            fresh=lambda: self._new_unlock(owner),
            parks=block_ms is not None,
        )
        return Attempt(flow, hold, key, owner, hold.count)

    def _wait_again(
        self, owner: str, block_ms: Optional[int], timeout: Optional[float]
    ) -> Callable[[], Optional[Tuple[Args, Optional[float]]]]:
        """For a wait lost to a failover (or a broken connection) and settled as not granted:
        the acquire for the time left, with its socket timeout, or None when none is left (or it
        was not a wait)."""
        deadline = None if not block_ms else time.monotonic() + (timeout or 0)

        def again() -> Optional[Tuple[Args, Optional[float]]]:
            if block_ms is None:
                return None
            left_ms: int = 0
            sock: Optional[float] = None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                left_ms = max(1, math.ceil(left * 1000))
                sock = left + self.command_timeout
            args = self._kind.acquire_args(
                self.name, owner, self._lease(), wait_ms=self.wait_ms, block_ms=left_ms, token=self.fenced
            )
            return args, sock

        return again

    def _undo_flow(self, attempt: "Attempt", lost: _protocol.ReplyLost) -> _protocol.Flow:
        """The flow that gives back a grant an interrupted acquire may have left."""
        return _protocol.undo_flow(
            self._kind,
            self.name,
            attempt.owner,
            lost,
            attempt.before,
            lambda: self._new_unlock(attempt.owner),
            self.settle_timeout,
        )

    def _pending_flow(self) -> Optional[Tuple[_protocol.Flow, Hold, Tuple[str, str, str]]]:
        """If an earlier release of this owner failed without an outcome: the flow that reads
        its hold count back (run before an acquire, which must know where it starts from)."""
        owner = self.owner
        key = self._key(owner)
        hold = self._session.find(key)
        if hold is None or hold.pending_unlock is None:
            return None
        flow = _protocol.sync_holds_flow(self._kind, self.name, owner, hold.pending_unlock, self.settle_timeout)
        return flow, hold, key

    def _synced(self, hold: Hold, key: Tuple[str, str, str], holds: int) -> bool:
        """Records the hold count read back; True when nothing is held (the watchdog stops)."""
        hold.pending_unlock = None
        hold.count = holds
        if holds == 0:
            hold.token = None
            self._session.forget(key, hold)
            return True
        return False

    def _refused(self, attempt: "Attempt") -> None:
        """Drops the record an acquire created if it holds nothing."""
        if attempt.hold.count == 0 and not attempt.hold.lost:
            self._session.forget(attempt.key, attempt.hold)

    def _granted(self, hold: Hold, token: Optional[int]) -> bool:
        """Records a grant; True if it is the owner's first hold (the watchdog starts)."""
        hold.count += 1
        hold.lost = False
        hold.token = token
        return hold.count == 1 and self.watchdog

    # -- release ----------------------------------------------------------------------------
    def _new_unlock(self, owner: str) -> _protocol.PendingUnlock:
        """A new unlock request: its own latch id, a latch that outlives its re-sends."""
        latch = _protocol.latch_ms(self.settle_timeout)
        request_id = uuid.uuid4().hex
        args = self._kind.unlock_args(self.name, owner, self._lease(), request_id, latch)
        return _protocol.PendingUnlock(args, latch, _names.latch_key(self.name, request_id))

    def _release_flow(self) -> Tuple[_protocol.Flow, Hold, Tuple[str, str, str]]:
        owner = self.owner
        key = self._key(owner)
        hold = self._session.find(key)
        if hold is None or hold.count == 0:
            if hold is not None and hold.lost:
                self._session.forget(key, hold)
                raise LockLostError(f"lock {self.name!r} was lost before release (lease ran out or force-unlocked)")
            raise LockNotOwnedError(f"cannot release lock {self.name!r}: not held by this owner ({owner})")

        def fresh() -> _protocol.PendingUnlock:
            hold.pending_unlock = self._new_unlock(owner)
            return hold.pending_unlock

        pending = hold.pending_unlock or fresh()
        flow = _protocol.release_flow(
            self._kind,
            self.name,
            owner,
            pending,
            fresh,
            hold.count,
            self.command_timeout,
            self.settle_timeout,
            self.sync_ms,
        )
        return flow, hold, key

    def _released(self, hold: Hold, key: Tuple[str, str, str], reply: Any) -> bool:
        """Records an unlock's reply; True when the owner holds nothing any more (the watchdog
        stops). Raises `LockLostError` if the server says the owner held nothing."""
        hold.pending_unlock = None
        if reply is None:
            hold.count = 0
            self._session.forget(key, hold)
            raise LockLostError(
                f"lock {self.name!r} was not held by {key[2]} any more (lease ran out or force-unlocked)"
            )
        hold.count = 0 if int(reply) == 1 else max(0, hold.count - 1)
        if hold.count == 0:
            hold.token = None
            self._session.forget(key, hold)
            return True
        return False

    def _forced(self) -> list:
        """After a force unlock: every owner's record of this lock is dropped, no lost signal."""
        return self._session.forget_lock(self._kind.id, self.name)

    def __repr__(self) -> str:
        lease = f"lease_ms={self.lease_ms}" if self.lease_ms else f"watchdog={self.watchdog_lease_ms}ms"
        return f"<{type(self).__name__} {self.name!r} {lease}{' fenced' if self.fenced else ''}>"
