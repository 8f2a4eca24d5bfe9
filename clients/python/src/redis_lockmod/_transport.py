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

With a Sentinel-managed client (``Sentinel(...).master_for(name)``), requests go to the primary
the sentinels name, asked once and again after any failure; while they name none that answers
(a failover), a request that was not sent is held back for up to `FAILOVER_WAIT` seconds, and
one refused because its node is no longer the primary (``READONLY``, ``UNBLOCKED``) is sent again
to the new one.

A call with ``sync_ms`` is followed on its connection by a wait for the node's replicas
(`redis_lockmod._replicas`). A call's ``after`` commands (an unlock latch's ``DEL``) are sent
once its replies arrived, and their replies are read when the connection is next taken: they
cost no round trip of their own. Without the permission for them (``NOPERM``), they are no
longer sent for this client.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, List, Optional, Sequence, Tuple

from redis.exceptions import (
    AskError,
    MovedError,
    BusyLoadingError,
    ConnectionError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from ._connections import (
    FAILOVER_WAIT,
    MAX_REDIRECTS,
    IDLE_KEYS,
    IDLE_PER_KEY,
    Link,
    address_of,
    cleanup_denied,
    connection_settings,
    direct_settings,
    is_cluster,
    not_run,
    plain_class,
    sentinel_pool,
)
from ._kinds import Args
from ._protocol import Barrier, Call, ReplyLost, TooLate
from ._replicas import ReplicaCache, SyncPlan

log = logging.getLogger("redis_lockmod")

class Transport:
    """Runs calls and barriers for the locks of one application client."""

    def __init__(self, client: Any) -> None:
        # Weak: the session (and so this) lives as long as the application's client, not longer.
        self._client = weakref.ref(client)
        self.cluster = is_cluster(client)
        self.sentinel = not self.cluster and sentinel_pool(client) is not None
        self._mutex = threading.Lock()
        self._idle: "OrderedDict[Tuple[Any, ...], List[Link]]" = OrderedDict()
        #: The Sentinel-managed primary's (host, port), asked again after a failure.
        self._primary: Optional[Tuple[str, int]] = None
        self.replicas = ReplicaCache()
        #: Whether ``after`` commands are sent (False once the server refused one: ``NOPERM``).
        self.cleanup = True

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
        if self.sentinel:
            primary = self._primary
            if primary is None:
                primary = self._primary = pool.get_master_address()  # MasterNotFoundError while none
            return plain_class(pool.connection_class), direct_settings(pool, *primary)
        return pool.connection_class, pool.connection_kwargs

    def _take(self, cls: Any, kwargs: dict, timeout: Optional[float]) -> Link:
        address = address_of(kwargs)
        while True:
            with self._mutex:
                links = self._idle.get((address, timeout))
                link = links.pop() if links else None
            if link is None:
                break
            if self._settled(link) and self._usable(link):
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

    def _settled(self, link: Link) -> bool:
        """Reads the replies `link` owes (its last call's ``after`` commands); False (and the
        connection closed) if they do not come."""
        while link.owed:
            try:
                link.conn.read_response()
            except ResponseError as e:
                self._refused_cleanup(e)
            except Exception:
                link.conn.disconnect()
                return False
            link.owed -= 1
        return True

    def _refused_cleanup(self, e: ResponseError) -> None:
        if cleanup_denied(e) and self.cleanup:
            self.cleanup = False
            log.warning("the server refused the DEL of an unlock latch (%s): latches are left to expire", e)

    def _send_after(self, link: Link, after: Sequence[Args]) -> None:
        """Sends a call's ``after`` commands without waiting for their replies."""
        if not after or not self.cleanup or link.broken:
            return
        try:
            for c in after:
                link.conn.send_command(*c, check_health=False)
        except (ConnectionError, TimeoutError):
            link.conn.disconnect()
            link.broken = True
            return
        link.owed += len(after)

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
            return self.call(op.key, op.commands, op.timeout, op.send_by, op.sync_ms, op.after)
        if isinstance(op, Barrier):
            return self.barrier(op.lost, op.timeout)
        raise TypeError(f"unknown operation {op!r}")

    def call(
        self,
        key: str,
        commands: Sequence[Args],
        timeout: Optional[float],
        send_by: Optional[float] = None,
        sync_ms: Optional[int] = None,
        after: Sequence[Args] = (),
    ) -> List[Any]:
        """Sends `commands` pipelined to `key`'s node and returns their replies. Raises
        `ReplyLost` when the replies did not come; an error reply is raised as redis-py's
        exception (after the remaining replies are read, so the connection stays usable).
        With `sync_ms`, then waits up to that long for the node's replicas, on the same
        connection, and raises `NoSyncedReplicasError` (carrying the reply) if none acknowledged.
        Once the replies came without an error, `after` is sent on the same connection (see
        `Call`)."""
        ask: Optional[Tuple[str, int]] = None
        started = time.monotonic()
        for attempt in itertools.count():
            last = attempt + 1 >= MAX_REDIRECTS and not (self.sentinel and time.monotonic() - started < FAILOVER_WAIT)
            try:
                cls, kwargs = self._node(key)
                if ask is not None:
                    kwargs = dict(kwargs, host=ask[0], port=ask[1])
                link = self._take(cls, kwargs, timeout)
            except (ConnectionError, TimeoutError):
                if last:
                    raise
                self._refresh(attempt)
                continue
            if send_by is not None and time.monotonic() > send_by:
                self._put(link)
                raise TooLate()
            plan = SyncPlan(self.replicas, link.address, sync_ms) if sync_ms is not None else None
            pre, post = (plan.pre, plan.post) if plan is not None else ((), ())
            sent = False
            try:
                if ask is not None:
                    link.conn.send_command("ASKING")
                for c in (*pre, *commands, *post):
                    link.conn.send_command(*c)
                sent = True
                if ask is not None:
                    link.conn.read_response()
                info = self._read_info(link) if pre else None
                replies, error = self._read(link, len(commands))
            except (ConnectionError, TimeoutError) as e:
                link.conn.disconnect()
                self._lost_primary()
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
            waited = self._read_one(link, sync_ms) if post else None
            if error is None and plan is not None:
                try:
                    self._sync(link, plan, info, waited, replies)  # raises NoSyncedReplicasError
                except BaseException:
                    self._send_after(link, after)  # the replies came: the request ran
                    if not link.broken:
                        self._put(link)
                    raise
            if error is None:
                self._send_after(link, after)
            if not link.broken:
                self._put(link)
            if error is None:
                return replies
            ask = None
            if self.cluster and isinstance(error, AskError) and not isinstance(error, MovedError) and not last:
                ask = (error.host, error.port)
                continue
            retry = isinstance(error, (MovedError, TryAgainError)) or ((self.cluster or self.sentinel) and not_run(error))
            if not retry or last:
                raise error
            self._refresh(attempt)
        raise AssertionError("unreachable")

    def _sync(self, link: Link, plan: SyncPlan, info: Any, waited: Any, replies: List[Any]) -> None:
        """The wait's verdict (sending it now if ``INFO`` just found replicas)."""
        wait = plan.post[0] if plan.post else None
        if plan.pre:
            late = plan.learned(info)
            if late is not None and not link.broken:
                wait = late
                try:
                    link.conn.send_command(*late)
                except (ConnectionError, TimeoutError) as e:
                    link.conn.disconnect()
                    link.broken = True
                    waited = e
                else:
                    waited = self._read_one(link, plan.timeout_ms)
        if wait is not None:
            plan.check(wait, waited, replies[0] if len(replies) == 1 else replies)

    @staticmethod
    def _read_info(link: Link) -> Any:
        """The reply of the ``INFO`` in front of a call, or its error reply (a lost connection
        raises: the call's replies are lost with it)."""
        try:
            return link.conn.read_response()
        except ResponseError as e:
            return e

    @staticmethod
    def _read_one(link: Link, extra_ms: Optional[int]) -> Any:
        """One reply of what the library adds to a call (``INFO``, a wait): the reply, or the
        exception in its place (an error reply, or the connection lost, which is then closed:
        the call's own replies are kept). ``extra_ms`` lengthens the socket timeout for it."""
        try:
            if extra_ms is None or link.timeout is None:
                return link.conn.read_response()
            return link.conn.read_response(timeout=link.timeout + extra_ms / 1000)
        except ResponseError as e:
            return e
        except (ConnectionError, TimeoutError) as e:
            link.conn.disconnect()
            link.broken = True
            return e

    def _lost_primary(self) -> None:
        """A connection broke: a Sentinel-managed primary is asked for again before the next
        request (it may have failed over)."""
        if self.sentinel:
            self._primary = None

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
        self._primary = None  # a Sentinel-managed primary is asked for again
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
