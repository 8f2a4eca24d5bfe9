"""Runs a flow of `redis_lockmod._protocol` on the asyncio transport."""

from __future__ import annotations

from typing import Any, Optional

from .._protocol import Call, Flow, ReplyLost
from ._cancel import Parked
from ._transport import Transport


async def run(flow: Flow, transport: Transport, parked: Optional[Parked] = None) -> Any:
    """As the sync `redis_lockmod._driver.run`; a wait the flow sends (a `Call` that parks) is
    recorded in `parked`."""
    try:
        op = next(flow)
        while True:
            try:
                result = await transport.execute(op, parked)
            except Exception as e:
                op = flow.throw(e)
            else:
                op = flow.send(result)
    except StopIteration as stop:
        return stop.value


async def read(
    transport: Transport, key: str, args: tuple, timeout: float, attempts: int = 3, sync_ms: Optional[int] = None
) -> Any:
    """As the sync `redis_lockmod._driver.read`."""
    for attempt in range(attempts):
        try:
            return (await transport.call(key, (args,), timeout, None, sync_ms=sync_ms))[0]
        except ReplyLost as lost:
            if attempt + 1 == attempts:
                raise lost.cause
    raise AssertionError("unreachable")


async def once(transport: Transport, key: str, args: tuple, timeout: float, sync_ms: Optional[int] = None) -> Any:
    """One command that must not be sent twice: a lost reply is an error."""
    try:
        return (await transport.execute(Call(key, (args,), timeout, sync_ms=sync_ms)))[0]
    except ReplyLost as lost:
        raise lost.cause
