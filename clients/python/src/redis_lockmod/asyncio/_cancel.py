"""Cancellation that is over when it is over: a task cancelled while it waits (``task.cancel()``,
``asyncio.timeout``, ``wait_for``) ends its wait in the server, learns whether a grant came
first and gives it back, all before the ``CancelledError`` reaches its caller. So whatever the
caller does next (an unlock that frees the lock for the next waiter, another acquire, a read of
the permits) comes after the cancelled wait is gone and its grant given back.

The request runs in a task of its own (`start`), which a cancellation never interrupts: an
interrupted read leaves its connection unusable and its reply unknown. On cancellation the
caller marks the wait `Parked.ended`, ends the wait with ``CLIENT UNBLOCK <id> TIMEOUT`` from
another connection (the server answers the parked request at once, with its grant if that
came first), lets the request read its reply, and settles it (`finish`), whatever further
cancellations it receives meanwhile; then the caller re-raises the ``CancelledError``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Optional, TypeVar

log = logging.getLogger("redis_lockmod")

T = TypeVar("T")

#: First and longest pause (seconds) between two ``CLIENT UNBLOCK``s of a wait the server had
#: not parked yet (its command still unread) or had just answered (its reply on its way).
UNBLOCK_PAUSE = (0.001, 0.05)


class Parked:
    """The wait (a command with ``BLOCK``) a request has in flight: the transport records the
    connection once the command is sent and forgets it once its reply is read. Once `ended`,
    the transport sends no new wait for the request (it raises ``TooLate``: nothing sent)."""

    __slots__ = ("link", "address", "ended", "_changed")

    def __init__(self) -> None:
        self.link: Any = None
        self.address: Any = None
        self.ended = False
        self._changed: Optional[asyncio.Event] = None  # made on cancellation only: most never are

    @property
    def changed(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def sent(self, link: Any, address: Any) -> None:
        self.link, self.address = link, address
        if self.ended:
            link.discard = True
        if self._changed is not None:
            self._changed.set()

    def answered(self, link: Any) -> None:
        if self.link is link:
            self.link = None
            if self._changed is not None:
                self._changed.set()


def start(coro: Awaitable[T]) -> "asyncio.Future[T]":
    """Runs `coro` in a task of its own, so that cancelling the caller does not interrupt it."""
    return asyncio.ensure_future(coro)


async def finish(aw: Awaitable[T]) -> Optional[T]:
    """Runs `aw` to its end in a task of its own and returns its result (None if it raised:
    it logs its own failures), whatever cancellations the calling task receives meanwhile (it
    re-raises the ``CancelledError`` it is handling once this returns)."""
    fut = asyncio.ensure_future(aw)
    while not fut.done():
        try:
            await asyncio.wait({fut})
        except asyncio.CancelledError:
            continue
    if fut.cancelled() or fut.exception() is not None:
        return None
    return fut.result()


async def uninterrupted(aw: Awaitable[T]) -> T:
    """Runs `aw` to its end in a task of its own, even if the calling task is cancelled
    meanwhile; then returns its result, or raises ``CancelledError`` if the caller was
    cancelled (an unlock whose reply was read is recorded before the cancellation goes on)."""
    fut = asyncio.ensure_future(aw)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        await finish(fut)
        if not fut.cancelled():
            fut.exception()  # retrieved: the cancellation is what the caller reports
        raise


async def end_wait(transport: Any, parked: Parked, request: "asyncio.Future[Any]", timeout: float) -> None:
    """Ends the wait `parked` of `request` (the request of a cancelled caller) and returns once
    `request` is over. ``CLIENT UNBLOCK <id> TIMEOUT`` is sent until the server says it
    unblocked the wait or the request is over (a wait not parked yet, its command still unread,
    is unblocked again a moment later); then the request reads the wait's reply: the refusal,
    or a grant that came first. Without a client id or the permission for ``CLIENT UNBLOCK``,
    or if no reply follows within `timeout`, the connection is closed instead: the server drops
    the waiter, and the request settles a lost reply as it always does (by asking, for a lock)."""
    parked.ended = True
    pause = UNBLOCK_PAUSE[0]
    while not request.done():
        link = parked.link
        if link is None:  # between waits (connecting, settling): nothing parked to end
            parked.changed.clear()
            await _first(request, parked.changed.wait())
            continue
        link.discard = True  # an unblock must never reach a later user of the connection
        unblocked = False
        if link.client_id is not None:
            try:
                unblocked = await transport.unblock(parked.address, link.client_id, timeout)
            except Exception as e:  # no permission (NOPERM), or the node is gone
                log.warning("could not CLIENT UNBLOCK a cancelled wait: %s; closing its connection", e)
                await _close(parked, link)
                continue
        else:
            await _close(parked, link)
            continue
        if unblocked:
            # Its reply (the refusal, or a grant that came first) follows at once.
            if not await _first(request, _until_answered(parked, link), timeout):
                log.warning("a cancelled wait got no reply %.1f s after CLIENT UNBLOCK; closing its connection", timeout)
                await _close(parked, link)
            continue
        await _first(request, asyncio.sleep(pause))
        pause = min(pause * 2, UNBLOCK_PAUSE[1])


async def _close(parked: Parked, link: Any) -> None:
    await link.conn.disconnect(nowait=True)
    parked.answered(link)


async def _until_answered(parked: Parked, link: Any) -> None:
    while parked.link is link:
        parked.changed.clear()
        await parked.changed.wait()


async def _first(request: "asyncio.Future[Any]", aw: Awaitable[Any], timeout: Optional[float] = None) -> bool:
    """Waits until `request` is over or `aw` completes (at most `timeout` s); False if the time
    ran out first."""
    other = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({request, other}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        other.cancel()
    return bool(done)
