"""One lock session per asyncio redis client: its uuid, its connections, its watchdog."""

from __future__ import annotations

import weakref
from typing import Any

from .._base import Session
from ._transport import Transport
from ._watchdog import Watchdog


class AsyncSession(Session):
    def __init__(self, client: Any) -> None:
        super().__init__()
        self.transport = Transport(client)
        self.watchdog = Watchdog(self.transport)

    @property  # type: ignore[override]
    def client(self) -> Any:
        return self.transport.client


_sessions: "weakref.WeakKeyDictionary[Any, AsyncSession]" = weakref.WeakKeyDictionary()


def session_for(client: Any) -> AsyncSession:
    """The session of `client`, made on first use (one uuid per client, as Redisson)."""
    if isinstance(client, AsyncSession):
        return client
    s = _sessions.get(client)
    if s is None:
        s = AsyncSession(client)
        _sessions[client] = s
    return s


async def close(client: Any) -> None:
    """Closes the connections the library opened for `client` (a cancelled acquire settles
    before its cancellation goes on: nothing is left running)."""
    s = _sessions.pop(client, None)
    if s is not None:
        await s.transport.close()
