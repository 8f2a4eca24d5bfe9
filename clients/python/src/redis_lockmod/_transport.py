"""The sync transport: the library's own connections, never the application's.

Each request gets a connection of its own for as long as it waits (a parked ``BLOCK`` must
not hold up anything queued behind it), made from the application client's settings (host,
auth, TLS, database) with the socket timeout the request needs and redis-py's command retry
off: redis-py 5+ retries a timed-out command by default, which would re-send an acquire or an
unlock. Idle connections are kept per (node, timeout) for reuse.

With a ``RedisCluster`` client, each request goes to the primary serving its key's slot; an
error that says the request was not run there (``MOVED``, ``ASK``, ``READONLY``, ``TRYAGAIN``,
``CLUSTERDOWN``, ``LOADING``, a parked client unblocked by a role change) refreshes the
topology and sends it again, which is safe because nothing was done.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, List, Optional, Sequence, Tuple

from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    MovedError,
    BusyLoadingError,
    ClusterDownError,
    ConnectionError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)
from redis.retry import Retry

from ._kinds import Args
from ._protocol import Barrier, Call, ReplyLost, TooLate

#: Sends of one request that the server refused without running it (redirects, loading).
MAX_REDIRECTS = 6
#: Idle connections kept per (node, timeout), and (node, timeout) pairs kept.
IDLE_PER_KEY = 32
IDLE_KEYS = 16


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def not_run(e: BaseException) -> bool:
    """True for an error reply that means the server did not run the request."""
    if isinstance(e, (AskError, ReadOnlyError, TryAgainError, ClusterDownError, BusyLoadingError)):
        return True
    return isinstance(e, ResponseError) and str(e).startswith(("UNBLOCKED", "MASTERDOWN", "LOADING"))


def connection_settings(kwargs: dict, timeout: Optional[float]) -> dict:
    """The application's connection settings with our timeout and no retry."""
    kw = dict(kwargs)
    kw["socket_timeout"] = timeout
    kw["retry"] = Retry(NoBackoff(), 0)
    kw["retry_on_error"] = []
    kw.pop("retry_on_timeout", None)
    return kw


def address_of(kwargs: dict) -> Tuple[Any, ...]:
    return (kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), kwargs.get("db", 0))


class Link:
    """One of our connections, with the server's id for it (``CLIENT ID``)."""

    def __init__(self, conn: Any, address: Tuple[Any, ...], timeout: Optional[float]) -> None:
        self.conn = conn
        self.address = address
        self.timeout = timeout
        self.client_id: Optional[int] = None


class Transport:
    """Runs calls and barriers for the locks of one application client."""

    def __init__(self, client: Any) -> None:
        # Weak: the session (and so this) lives as long as the application's client, not longer.
        self._client = weakref.ref(client)
        self.cluster = is_cluster(client)
        self._mutex = threading.Lock()
        self._idle: "OrderedDict[Tuple[Any, ...], List[Link]]" = OrderedDict()

    @property
    def client(self) -> Any:
        client = self._client()
        if client is None:
            raise ReferenceError("the redis client of this lock was garbage-collected")
        return client

    # -- connections ------------------------------------------------------------------------
    def _node(self, key: str) -> Tuple[Any, dict]:
        if self.cluster:
            node = self.client.get_node_from_key(key)
            pool = node.redis_connection.connection_pool
        else:
            pool = self.client.connection_pool
        return pool.connection_class, pool.connection_kwargs

    def _take(self, cls: Any, kwargs: dict, timeout: Optional[float]) -> Link:
        address = address_of(kwargs)
        with self._mutex:
            links = self._idle.get((address, timeout))
            while links:
                link = links.pop()
                if self._usable(link):
                    return link
        conn = cls(**connection_settings(kwargs, timeout))
        link = Link(conn, address, timeout)
        try:
            conn.connect()
            conn.send_command("CLIENT", "ID")
            link.client_id = int(conn.read_response())
        except ResponseError:
            link.client_id = None  # an ACL without CLIENT ID: no barrier, settle by asking only
        except BaseException:
            conn.disconnect()
            raise
        return link

    @staticmethod
    def _usable(link: Link) -> bool:
        # A connection the server closed (or that has stray data) shows as readable.
        try:
            if link.conn.can_read(timeout=0):
                link.conn.disconnect()
                return False
        except Exception:
            link.conn.disconnect()
            return False
        return True

    def _put(self, link: Link) -> None:
        """Keeps `link` for reuse (closing what the caps leave no room for)."""
        key = (link.address, link.timeout)
        extra: List[Link] = []
        with self._mutex:
            links = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(links) < IDLE_PER_KEY:
                links.append(link)
            else:
                extra.append(link)
            while len(self._idle) > IDLE_KEYS:
                extra += self._idle.popitem(last=False)[1]
        for old in extra:
            old.conn.disconnect()

    def close(self) -> None:
        """Closes every idle connection."""
        with self._mutex:
            links = [link for group in self._idle.values() for link in group]
            self._idle.clear()
        for link in links:
            link.conn.disconnect()

    # -- operations -------------------------------------------------------------------------
    def execute(self, op: Any) -> Any:
        if isinstance(op, Call):
            return self.call(op.key, op.commands, op.timeout, op.send_by)
        if isinstance(op, Barrier):
            return self.barrier(op.lost, op.timeout)
        raise TypeError(f"unknown operation {op!r}")

    def call(
        self, key: str, commands: Sequence[Args], timeout: Optional[float], send_by: Optional[float] = None
    ) -> List[Any]:
        """Sends `commands` pipelined to `key`'s node and returns their replies. Raises
        `ReplyLost` when the replies did not come; an error reply is raised as redis-py's
        exception (after the remaining replies are read, so the connection stays usable)."""
        ask: Optional[Tuple[str, int]] = None
        for attempt in range(MAX_REDIRECTS):
            last = attempt + 1 == MAX_REDIRECTS
            cls, kwargs = self._node(key)
            if ask is not None:
                kwargs = dict(kwargs, host=ask[0], port=ask[1])
            try:
                link = self._take(cls, kwargs, timeout)
            except (ConnectionError, TimeoutError):
                if last:
                    raise
                self._refresh(attempt)
                continue
            if send_by is not None and time.monotonic() > send_by:
                self._put(link)
                raise TooLate()
            sent = False
            try:
                if ask is not None:
                    link.conn.send_command("ASKING")
                for c in commands:
                    link.conn.send_command(*c)
                sent = True
                if ask is not None:
                    link.conn.read_response()
                replies, error = self._read(link, len(commands))
            except (ConnectionError, TimeoutError) as e:
                link.conn.disconnect()
                if (not sent or isinstance(e, BusyLoadingError)) and not last:
                    # Never fully sent, or refused while loading: nothing ran, send again.
                    self._refresh(attempt)
                    continue
                raise ReplyLost(e, (cls, kwargs), link.client_id) from e
            except BaseException as e:
                # Interrupted (Ctrl-C) while the request may be running: the caller may settle it.
                link.conn.disconnect()
                if sent:
                    e.lockmod_lost = ReplyLost(e, (cls, kwargs), link.client_id)  # type: ignore[attr-defined]
                raise
            self._put(link)
            if error is None:
                return replies
            ask = None
            if self.cluster and isinstance(error, AskError) and not isinstance(error, MovedError) and not last:
                ask = (error.host, error.port)
                continue
            retry = isinstance(error, (MovedError, TryAgainError)) or (self.cluster and not_run(error))
            if not retry or last:
                raise error
            self._refresh(attempt)
        raise ConnectionError(f"request for {key!r} was refused {MAX_REDIRECTS} times")

    @staticmethod
    def _read(link: Link, n: int) -> Tuple[List[Any], Optional[ResponseError]]:
        replies: List[Any] = []
        error: Optional[ResponseError] = None
        for _ in range(n):
            try:
                replies.append(link.conn.read_response())
            except ResponseError as e:
                error = error or e
                replies.append(e)
        return replies, error

    @staticmethod
    def _backoff(attempt: int) -> None:
        time.sleep(min(1.0, 0.05 * (2**attempt)))

    def _refresh(self, attempt: int) -> None:
        self._backoff(attempt)
        if self.cluster:
            try:
                self.client.nodes_manager.initialize()
            except (ConnectionError, TimeoutError):
                pass  # the next attempt finds out

    def barrier(self, lost: ReplyLost, timeout: Optional[float]) -> None:
        """``CLIENT KILL ID`` of the connection a lost request went out on, on the same node:
        once it answers, that request has either run or never will. Best effort: without the
        permission (or the id) the settling read relies on the server having read that
        connection first, as it does unless clients are paused."""
        if lost.client_id is None:
            return
        cls, kwargs = lost.address
        for attempt in range(3):
            try:
                link = self._take(cls, kwargs, timeout)
            except (ConnectionError, TimeoutError, ResponseError):
                self._backoff(attempt)
                continue
            try:
                link.conn.send_command("CLIENT", "KILL", "ID", lost.client_id)
                link.conn.read_response()
            except ResponseError:
                pass  # no such client any more, or no permission: nothing more to do
            except (ConnectionError, TimeoutError):
                link.conn.disconnect()
                self._backoff(attempt)
                continue
            except BaseException:
                link.conn.disconnect()
                raise
            self._put(link)
            return
