"""The asyncio transport: the same rules as the sync one (`redis_lockmod._transport`: Cluster,
Sentinel, replicas synced, an unlock latch's ``DEL`` sent after its reply and its own reply read
at the next use) on ``redis.asyncio`` connections. A request interrupted by cancellation closes
its connection; a caller that must learn what its cancelled wait was granted runs the request in
a task of its own and ends the wait with ``CLIENT UNBLOCK`` (`redis_lockmod.asyncio._cancel`)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import weakref
from collections import OrderedDict
from typing import Any, List, Optional, Sequence, Tuple

from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ConnectionError,
    MovedError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from .._kinds import Args
from .._protocol import Barrier, Call, ReplyLost, TooLate
from .._replicas import ReplicaCache, SyncPlan
from ._cancel import Parked
from .._connections import (
    FAILOVER_WAIT,
    IDLE_KEYS,
    IDLE_PER_KEY,
    MAX_REDIRECTS,
    address_of,
    cleanup_denied,
    direct_settings,
    is_cluster,
    not_run,
    plain_class,
    sentinel_pool,
)

log = logging.getLogger("redis_lockmod")


def connection_settings(kwargs: dict, timeout: Optional[float]) -> dict:
    kw = dict(kwargs)
    kw["socket_timeout"] = timeout
    kw["retry"] = Retry(NoBackoff(), 0)
    kw["retry_on_error"] = []
    kw.pop("retry_on_timeout", None)
    return kw


class Link:
    def __init__(self, conn: Any, address: Tuple[Any, ...], timeout: Optional[float]) -> None:
        self.conn = conn
        self.address = address
        self.timeout = timeout
        self.client_id: Optional[int] = None
        #: Closed after the call's replies were read (a wait that failed): not reused.
        self.broken = False
        #: Set when another connection may still act on this one (``CLIENT UNBLOCK`` of its id
        #: after a cancelled wait): it is closed after its reply instead of being reused.
        self.discard = False
        #: Replies of ``after`` commands sent and not read yet (read when next taken).
        self.owed = 0


class Transport:
    """Runs calls and barriers for the locks of one asyncio client."""

    def __init__(self, client: Any) -> None:
        self._client = weakref.ref(client)
        self.cluster = is_cluster(client)
        self.sentinel = not self.cluster and sentinel_pool(client) is not None
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

    async def _node(self, key: str) -> Tuple[Any, dict]:
        if self.cluster:
            client = await self.client.initialize()  # a no-op once the topology is known
            node = client.get_node_from_key(key)
            return node.connection_class, node.connection_kwargs
        pool = self.client.connection_pool
        if self.sentinel:
            primary = self._primary
            if primary is None:
                primary = self._primary = await pool.get_master_address()
            return plain_class(pool.connection_class), direct_settings(pool, *primary)
        return pool.connection_class, pool.connection_kwargs

    async def _take(self, cls: Any, kwargs: dict, timeout: Optional[float]) -> Link:
        address = address_of(kwargs)
        links = self._idle.get((address, timeout))
        while links:
            link = links.pop()
            if not await self._settled(link):
                continue
            # A connection the server closed (or with stray data) shows as readable. redis-py 8
            # renamed the check; older releases only have the old name.
            check = getattr(link.conn, "can_read", None) or link.conn.can_read_destructive
            try:
                stale = await check()
            except Exception:
                stale = True
            if not stale:
                return link
            await link.conn.disconnect(nowait=True)
        conn = cls(**connection_settings(kwargs, timeout))
        link = Link(conn, address, timeout)
        try:
            await conn.connect()
            await conn.send_command("CLIENT", "ID")
            link.client_id = int(await conn.read_response())
        except ResponseError:
            link.client_id = None
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        return link

    async def _settled(self, link: Link) -> bool:
        """As the sync `Transport._settled`."""
        while link.owed:
            try:
                await link.conn.read_response()
            except ResponseError as e:
                if cleanup_denied(e) and self.cleanup:
                    self.cleanup = False
                    log.warning("the server refused the DEL of an unlock latch (%s): latches are left to expire", e)
            except BaseException:
                await link.conn.disconnect(nowait=True)
                return False
            link.owed -= 1
        return True

    async def _send_after(self, link: Link, after: Sequence[Args]) -> None:
        """Sends a call's ``after`` commands without waiting for their replies. Written to the
        connection's stream at once: redis-py's own send wraps each write of a connection with
        a socket timeout in ``asyncio.wait_for`` (a task per command before Python 3.12), which
        would cost a cleanup more than the unlock it follows."""
        if not after or not self.cleanup or link.broken or link.discard:
            return
        packed = link.conn.pack_commands(after)
        writer = getattr(link.conn, "_writer", None)
        try:
            if writer is not None and not writer.is_closing():
                writer.writelines(packed)
            else:
                await link.conn.send_packed_command(packed, check_health=False)
        except (ConnectionError, TimeoutError, OSError):
            await link.conn.disconnect(nowait=True)
            link.broken = True
            return
        link.owed += len(after)

    async def _put(self, link: Link) -> None:
        if link.discard or link.broken:
            await link.conn.disconnect(nowait=True)
            return
        key = (link.address, link.timeout)
        links = self._idle.setdefault(key, [])
        self._idle.move_to_end(key)
        extra: List[Link] = []
        if len(links) < IDLE_PER_KEY:
            links.append(link)
        else:
            extra.append(link)
        while len(self._idle) > IDLE_KEYS:
            extra += self._idle.popitem(last=False)[1]
        for old in extra:
            await old.conn.disconnect(nowait=True)

    async def close(self) -> None:
        links = [link for group in self._idle.values() for link in group]
        self._idle.clear()
        for link in links:
            await link.conn.disconnect()

    async def execute(self, op: Any, parked: Optional[Parked] = None) -> Any:
        if isinstance(op, Call):
            parked = parked if op.parks else None
            return await self.call(op.key, op.commands, op.timeout, op.send_by, parked, op.sync_ms, op.after)
        if isinstance(op, Barrier):
            return await self.barrier(op.lost, op.timeout)
        raise TypeError(f"unknown operation {op!r}")

    async def call(
        self,
        key: str,
        commands: Sequence[Args],
        timeout: Optional[float],
        send_by: Optional[float] = None,
        parked: Optional[Parked] = None,
        sync_ms: Optional[int] = None,
        after: Sequence[Args] = (),
    ) -> List[Any]:
        """As the sync `Transport.call`. With `parked` (a command that may wait in the server),
        the connection is recorded there from the send until the commands' replies are read,
        so that a cancelled caller can end the wait (`redis_lockmod.asyncio._cancel`); once
        `parked` has ended, nothing is sent (`TooLate`)."""
        ask: Optional[Tuple[str, int]] = None
        started = time.monotonic()
        for attempt in itertools.count():
            last = attempt + 1 >= MAX_REDIRECTS and not (self.sentinel and time.monotonic() - started < FAILOVER_WAIT)
            try:
                cls, kwargs = await self._node(key)
                if ask is not None:
                    kwargs = dict(kwargs, host=ask[0], port=ask[1])
                link = await self._take(cls, kwargs, timeout)
            except (ConnectionError, TimeoutError, OSError):
                if last:
                    raise
                await self._refresh(attempt)
                continue
            if (send_by is not None and time.monotonic() > send_by) or (parked is not None and parked.ended):
                await self._put(link)
                raise TooLate()
            plan = SyncPlan(self.replicas, link.address, sync_ms) if sync_ms is not None else None
            pre, post = (plan.pre, plan.post) if plan is not None else ((), ())
            sent = False
            try:
                if ask is not None:
                    await link.conn.send_command("ASKING")
                for c in (*pre, *commands, *post):
                    await link.conn.send_command(*c)
                sent = True
                if parked is not None:
                    parked.sent(link, (cls, kwargs))
                if ask is not None:
                    await link.conn.read_response()
                info = await self._read_info(link) if pre else None
                replies, error = await self._read(link, len(commands))
            except (ConnectionError, TimeoutError, OSError) as e:
                if parked is not None:
                    parked.answered(link)
                await link.conn.disconnect(nowait=True)
                self._lost_primary()
                if (not sent or isinstance(e, BusyLoadingError)) and not last:
                    await self._refresh(attempt)
                    continue
                raise ReplyLost(e, (cls, kwargs), link.client_id) from e
            except BaseException as e:
                # Cancelled while the request may be running: the caller may settle it.
                if parked is not None:
                    parked.answered(link)
                await link.conn.disconnect(nowait=True)
                if sent:
                    e.lockmod_lost = ReplyLost(e, (cls, kwargs), link.client_id)  # type: ignore[attr-defined]
                raise
            if parked is not None:
                parked.answered(link)
            waited = await self._read_one(link, sync_ms) if post else None
            if error is None and plan is not None:
                try:
                    await self._sync(link, plan, info, waited, replies)
                except BaseException:
                    await self._send_after(link, after)  # the replies came: the request ran
                    await self._put(link)
                    raise
            if error is None:
                await self._send_after(link, after)
            await self._put(link)
            if error is None:
                return replies
            ask = None
            if self.cluster and isinstance(error, AskError) and not isinstance(error, MovedError) and not last:
                ask = (error.host, error.port)
                continue
            retry = isinstance(error, (MovedError, TryAgainError)) or ((self.cluster or self.sentinel) and not_run(error))
            if not retry or last:
                raise error
            await self._refresh(attempt)
        raise AssertionError("unreachable")

    async def _sync(self, link: Link, plan: SyncPlan, info: Any, waited: Any, replies: List[Any]) -> None:
        """As the sync `Transport._sync`."""
        wait = plan.post[0] if plan.post else None
        if plan.pre:
            late = plan.learned(info)
            if late is not None and not link.broken:
                wait = late
                try:
                    await link.conn.send_command(*late)
                except (ConnectionError, TimeoutError, OSError) as e:
                    await link.conn.disconnect(nowait=True)
                    link.broken = True
                    waited = e
                else:
                    waited = await self._read_one(link, plan.timeout_ms)
        if wait is not None:
            plan.check(wait, waited, replies[0] if len(replies) == 1 else replies)

    @staticmethod
    async def _read_info(link: Link) -> Any:
        try:
            return await link.conn.read_response()
        except ResponseError as e:
            return e

    @staticmethod
    async def _read_one(link: Link, extra_ms: Optional[int]) -> Any:
        """As the sync `Transport._read_one`."""
        try:
            if extra_ms is None or link.timeout is None:
                return await link.conn.read_response()
            return await link.conn.read_response(timeout=link.timeout + extra_ms / 1000)
        except ResponseError as e:
            return e
        except (ConnectionError, TimeoutError, OSError) as e:
            await link.conn.disconnect(nowait=True)
            link.broken = True
            return e

    def _lost_primary(self) -> None:
        if self.sentinel:
            self._primary = None

    @staticmethod
    async def _read(link: Link, n: int) -> Tuple[List[Any], Optional[ResponseError]]:
        replies: List[Any] = []
        error: Optional[ResponseError] = None
        for _ in range(n):
            try:
                replies.append(await link.conn.read_response())
            except ResponseError as e:
                error = error or e
                replies.append(e)
        return replies, error

    async def _refresh(self, attempt: int) -> None:
        self._primary = None
        await asyncio.sleep(min(1.0, 0.05 * (2**attempt)))
        if self.cluster:
            try:
                await self.client.nodes_manager.initialize()
            except (ConnectionError, TimeoutError, OSError):
                pass

    async def barrier(self, lost: ReplyLost, timeout: Optional[float]) -> None:
        """As the sync `Transport.barrier`."""
        if lost.client_id is None:
            return
        cls, kwargs = lost.address
        for attempt in range(3):
            try:
                link = await self._take(cls, kwargs, timeout)
            except (ConnectionError, TimeoutError, ResponseError, OSError):
                await asyncio.sleep(min(1.0, 0.05 * (2**attempt)))
                continue
            try:
                await link.conn.send_command("CLIENT", "KILL", "ID", lost.client_id)
                await link.conn.read_response()
            except ResponseError:
                pass
            except (ConnectionError, TimeoutError, OSError):
                await link.conn.disconnect(nowait=True)
                await asyncio.sleep(min(1.0, 0.05 * (2**attempt)))
                continue
            except BaseException:
                await link.conn.disconnect(nowait=True)
                raise
            await self._put(link)
            return

    async def unblock(self, address: Any, client_id: int, timeout: Optional[float]) -> bool:
        """``CLIENT UNBLOCK <client_id> TIMEOUT`` on the node at ``address`` (another connection):
        a request parked there with ``BLOCK`` is answered at once as if its time ran out (or with
        its grant, if that came first). True if the server unblocked it."""
        cls, kwargs = address
        link = await self._take(cls, kwargs, timeout)
        try:
            await link.conn.send_command("CLIENT", "UNBLOCK", client_id, "TIMEOUT")
            reply = await link.conn.read_response()
        except ResponseError:
            await self._put(link)
            raise
        except BaseException:
            await link.conn.disconnect(nowait=True)
            raise
        await self._put(link)
        return int(reply) == 1
