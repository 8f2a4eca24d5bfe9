"""Replicas synced, as Redisson's ``checkLockSyncedSlaves``: what the transports send after a
write of a lock or a semaphore, and how they read it. No I/O here.

A write whose call asks for it (``Call.sync_ms``) is followed, on the same connection and in the
same pipeline, by ``WAIT <replicas> <ms>``, or ``WAITAOF 1 <replicas> <ms>`` when the primary
has an AOF and the command (Redis 7.2 and later, every Valkey). The replica count is the number
of replicas the primary lists as ``online`` in ``INFO replication``, learned per node and kept
for `INFO_TTL` seconds: when it is stale, ``INFO`` goes in front of the command in the same
pipeline, so no call pays a round trip of its own for it. With no replicas nothing is sent (as
Redisson: not even ``WAITAOF`` for the local AOF alone).

``WAIT`` on the caller's connection covers what its own commands wrote, and also the grant of a
request that was parked with ``BLOCK`` and granted by someone else's command: the server moves
the connection's wait offset when it unblocks it (tests/grants/replica_sync.rs checks both servers).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from ._kinds import Args, text
from .errors import NoSyncedReplicasError

log = logging.getLogger("redis_lockmod")

#: How long a node's replica count is trusted (seconds).
INFO_TTL = 1.0
#: The ``INFO`` sections read: the version (``WAITAOF``), the replicas, the AOF.
INFO_ARGS: Args = ("INFO", "server", "replication", "persistence")
#: Redisson's ``slavesSyncTimeout``.
DEFAULT_SYNC_TIMEOUT_MS = 1000


@dataclass(frozen=True)
class Replicas:
    """What a primary told about its replicas and its AOF."""

    online: int
    aof: bool
    waitaof: bool
    until: float

    def command(self, timeout_ms: int) -> Optional[Args]:
        """The sync command, or None when there is no replica to wait for."""
        if self.online == 0:
            return None
        if self.aof and self.waitaof:
            return ("WAITAOF", 1, self.online, timeout_ms)
        return ("WAIT", self.online, timeout_ms)


def parse_info(reply: Any, now: float) -> Replicas:
    """`Replicas` from ``INFO server replication persistence``; a replica counts once its state
    is ``online`` (one still loading its first copy acknowledges nothing yet)."""
    fields: Dict[str, str] = {}
    online = 0
    for line in (text(reply) or "").splitlines():
        key, _, value = line.partition(":")
        if key.startswith("slave") and key[5:].isdigit():
            online += "state=online" in value
        else:
            fields[key] = value.strip()
    return Replicas(online, fields.get("aof_enabled") == "1", has_waitaof(fields), now + INFO_TTL)


def has_waitaof(fields: Dict[str, str]) -> bool:
    """``WAITAOF`` came with Redis 7.2; Valkey forked from 7.2.4 and reports that as its
    ``redis_version``."""
    try:
        major, minor = (int(p) for p in fields.get("redis_version", "0.0").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (7, 2)


def synced(command: Args, reply: Any) -> int:
    """How many replicas acknowledged, from the reply of `command` (``WAITAOF`` replies
    ``[local, replicas]``)."""
    if command[0] == "WAITAOF":
        return int(reply[1])
    return int(reply)


class ReplicaCache:
    """The replica counts of the nodes a transport talks to, by node address. The transports
    guard it (the sync one with its mutex)."""

    def __init__(self) -> None:
        self._nodes: Dict[Tuple[Any, ...], Replicas] = {}

    def get(self, address: Tuple[Any, ...], now: Optional[float] = None) -> Optional[Replicas]:
        """The node's entry while fresh, else None."""
        entry = self._nodes.get(address)
        if entry is None or entry.until <= (time.monotonic() if now is None else now):
            return None
        return entry

    def put(self, address: Tuple[Any, ...], entry: Replicas) -> None:
        if len(self._nodes) > 64:
            self._nodes.clear()  # a bound; nodes are few, and an entry is one INFO away
        self._nodes[address] = entry

    def drop(self, address: Tuple[Any, ...]) -> None:
        """Forgets a node (its replicas answered otherwise than counted): ``INFO`` again next time."""
        self._nodes.pop(address, None)


class SyncPlan:
    """The sync of one call on one connection to the node at ``address``: `pre` goes in front of
    the call's commands (``INFO`` when the count is stale), `post` after them (the wait). Once
    the replies are read, `late` says whether a wait must still be sent (the count just learned
    is not zero) and `check` raises `NoSyncedReplicasError` when no replica acknowledged."""

    def __init__(self, cache: ReplicaCache, address: Tuple[Any, ...], timeout_ms: int) -> None:
        self.cache = cache
        self.address = address
        self.timeout_ms = timeout_ms
        self.entry = cache.get(address)
        self.pre: Tuple[Args, ...] = (INFO_ARGS,) if self.entry is None else ()
        wait = self.entry.command(timeout_ms) if self.entry is not None else None
        self.post: Tuple[Args, ...] = (wait,) if wait is not None else ()

    def learned(self, info: Any) -> Optional[Args]:
        """Records the reply of `pre`'s ``INFO`` (an exception when refused); returns the wait to
        send now if there are replicas and none was sent."""
        if isinstance(info, Exception):
            # No INFO in the caller's ACL: the replicas cannot be counted, so nothing is waited
            # for (the warning says so, once per node and INFO_TTL).
            log.warning("cannot count the replicas of %s (INFO refused: %s): grants are not synced", self.address, info)
            self.entry = Replicas(0, False, False, time.monotonic() + INFO_TTL)
        else:
            self.entry = parse_info(info, time.monotonic())
        self.cache.put(self.address, self.entry)
        if self.post:
            return None
        return self.entry.command(self.timeout_ms)

    def check(self, wait: Args, reply: Any, result: Any) -> None:
        """The wait `wait` was answered `reply` (an exception: refused or lost): raises
        `NoSyncedReplicasError` carrying `result` (the call's reply) if no replica acknowledged."""
        expected = int(wait[-2])
        if isinstance(reply, Exception):
            self.cache.drop(self.address)
            raise NoSyncedReplicasError(
                f"{wait[0]} after the write failed ({reply}); its replicas are unknown",
                reply=result,
                replicas=expected,
            )
        n = synced(wait, reply)
        if n != expected:
            # A replica came or went (or lags): count them again next time, as Redisson does.
            self.cache.drop(self.address)
        if n == 0:
            raise NoSyncedReplicasError(
                f"none of the {expected} replica(s) acknowledged the write within {self.timeout_ms} ms "
                "(raise sync_timeout_ms, or sync_replicas=False to not wait)",
                reply=result,
                replicas=expected,
            )
