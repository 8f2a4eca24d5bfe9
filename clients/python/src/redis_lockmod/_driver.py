"""Runs a flow of `_protocol` on the sync transport."""

from __future__ import annotations

from typing import Any

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


def read(transport: Transport, key: str, args: tuple, timeout: float, attempts: int = 3) -> Any:
    """One read-only command, sent again if its reply is lost (a read changes nothing)."""
    for attempt in range(attempts):
        try:
            return transport.call(key, (args,), timeout)[0]
        except ReplyLost as lost:
            if attempt + 1 == attempts:
                raise lost.cause
    raise AssertionError("unreachable")


def once(transport: Transport, key: str, args: tuple, timeout: float) -> Any:
    """One command that must not be sent twice (a force unlock): a lost reply is an error."""
    try:
        return transport.execute(Call(key, (args,), timeout))[0]
    except ReplyLost as lost:
        raise lost.cause
