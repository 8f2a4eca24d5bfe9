"""One lock session per sync redis client: its uuid, its connections, its watchdog."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict

from ._base import Session
from ._transport import Transport
from ._watchdog import Watchdog


class SyncSession(Session):
    def __init__(self, client: Any) -> None:
        super().__init__()
        self.transport = Transport(client)
        self.watchdog = Watchdog(self.transport)

    @property  # type: ignore[override]
    def client(self) -> Any:
        """The application's client (held weakly by the transport)."""
        return self.transport.client


_mutex = threading.Lock()
_sessions: "weakref.WeakKeyDictionary[Any, SyncSession]" = weakref.WeakKeyDictionary()
_pinned: Dict[int, SyncSession] = {}


def session_for(client: Any) -> SyncSession:
    """The session of `client`, made on first use: every lock on one client shares its uuid,
    as every lock of one Redisson client does."""
    if isinstance(client, SyncSession):
        return client
    with _mutex:
        try:
            s = _sessions.get(client)
        except TypeError:  # not weakly referenceable: kept for the process's life
            s = _pinned.get(id(client))
        if s is None:
            s = SyncSession(client)
            try:
                _sessions[client] = s
            except TypeError:
                _pinned[id(client)] = s
        return s


def close(client: Any) -> None:
    """Closes the connections the library opened for `client` (the client's own are the
    application's to close). Locks still held stay held until released or expired."""
    with _mutex:
        try:
            s = _sessions.pop(client, None)
        except TypeError:
            s = _pinned.pop(id(client), None)
    if s is not None:
        s.transport.close()
