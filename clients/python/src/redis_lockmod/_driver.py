"""Runs a flow of `_protocol` on the sync transport."""

from __future__ import annotations

from typing import Any, Optional

from ._protocol import Call, Flow, ReplyLost
from ._transport import Transport


def run(flow: Flow, transport: Transport) -> Any:
    """Performs each operation the flow yields and hands it the result (or throws in the
    error); returns what the flow returns."""
    try:
        op = next(flow)
        while True:
            try:
                result = transport.execute(op)
            except Exception as e:
                op = flow.throw(e)
            else:
                op = flow.send(result)
    except StopIteration as stop:
        return stop.value


def read(
    transport: Transport, key: str, args: tuple, timeout: float, attempts: int = 3, sync_ms: Optional[int] = None
) -> Any:
    """One command that may be sent again if its reply is lost (a read, a renewal: the same
    effect twice is the effect once). With `sync_ms`, a wait for the replicas follows it."""
    for attempt in range(attempts):
        try:
            return transport.call(key, (args,), timeout, None, sync_ms)[0]
        except ReplyLost as lost:
            if attempt + 1 == attempts:
                raise lost.cause
    raise AssertionError("unreachable")


def once(transport: Transport, key: str, args: tuple, timeout: float, sync_ms: Optional[int] = None) -> Any:
    """One command that must not be sent twice (a force unlock): a lost reply is an error.
    With `sync_ms`, a wait for the replicas follows it."""
    try:
        return transport.execute(Call(key, (args,), timeout, sync_ms=sync_ms))[0]
    except ReplyLost as lost:
        raise lost.cause
