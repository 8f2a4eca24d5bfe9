"""What the sync and asyncio transports share about connections and nodes: the settings of the
library's own connections (the application's, with our socket timeout and redis-py's retry
off), how a Cluster, a Sentinel-managed client and a node's address are recognised, and which
error replies mean a request did not run. No I/O here."""

from __future__ import annotations

from typing import Any, Optional, Tuple

from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    NoPermissionError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.retry import Retry


#: Sends of one request that the server refused without running it (redirects, loading).
MAX_REDIRECTS = 6
#: Idle connections kept per (node, timeout), and (node, timeout) pairs kept.
IDLE_PER_KEY = 32
IDLE_KEYS = 16
#: How long (seconds) a request to a Sentinel-managed primary that could not be sent is held
#: back while the sentinels name no reachable primary (a failover in progress).
FAILOVER_WAIT = 30.0


def is_cluster(client: Any) -> bool:
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def sentinel_pool(client: Any) -> Any:
    """The client's ``SentinelConnectionPool`` (sync or asyncio), or None."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None and hasattr(pool, "get_master_address") and hasattr(pool, "service_name"):
        return pool
    return None


def direct_settings(pool: Any, host: str, port: int) -> dict:
    """A Sentinel pool's connection settings aimed at one address, for a plain connection: the
    library keeps to the primary it resolved, so that a barrier or a settling read reaches the
    very node a request went to."""
    kw = {k: v for k, v in pool.connection_kwargs.items() if k != "connection_pool"}
    kw.update(host=host, port=port)
    return kw


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


def plain_class(cls: Any) -> Any:
    """The plain connection class under a Sentinel-managed one (TLS or not)."""
    for base in cls.__mro__[1:]:
        if "Sentinel" not in base.__name__:
            return base
    return cls


def address_of(kwargs: dict) -> Tuple[Any, ...]:
    return (kwargs.get("host"), kwargs.get("port"), kwargs.get("path"), kwargs.get("db", 0))


class Link:
    """One of our connections, with the server's id for it (``CLIENT ID``)."""

    def __init__(self, conn: Any, address: Tuple[Any, ...], timeout: Optional[float]) -> None:
        self.conn = conn
        self.address = address
        self.timeout = timeout
        self.client_id: Optional[int] = None
        #: Closed after the call's replies were read (a wait that failed): not reused.
        self.broken = False
        #: Replies of ``after`` commands sent and not read yet (read when next taken).
        self.owed = 0


def cleanup_denied(e: BaseException) -> bool:
    """True for the error reply of an ``after`` command the user may not run."""
    return isinstance(e, NoPermissionError) or (isinstance(e, ResponseError) and str(e).startswith("NOPERM"))
