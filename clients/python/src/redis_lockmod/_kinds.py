"""The commands of each lock kind, and how to read their replies.

Pure data and parsing, shared by the sync and asyncio libraries. The commands and replies are
the module's (docs/commands.md): an acquire replies nil when granted and an integer when not;
with ``TOKEN``, ``[-1, token]`` when granted and ``[n, -1]`` when not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

Args = Tuple[Any, ...]


def text(v: Any) -> Optional[str]:
    """A reply string as ``str`` whether or not the client decodes responses."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


@dataclass(frozen=True)
class Kind:
    """One lock kind: its commands and how its hold count and ``locked()`` are read."""

    id: str
    acquire: str
    prefix: str
    side: Optional[str] = None
    holds_index: Optional[int] = None
    fenceable: bool = True
    fair: bool = False

    def acquire_args(
        self,
        name: str,
        owner: str,
        lease_ms: int,
        *,
        wait_ms: int,
        block_ms: Optional[int],
        token: bool,
    ) -> Args:
        """The acquire command: ``BLOCK ms`` to wait in the server, else the immediate form
        (for the fair lock ``NOQUEUE``, Redisson's ``tryLock()``, which queues nothing)."""
        args: list = [self.acquire, name, owner, lease_ms]
        if self.fair:
            args.append(wait_ms)
        if block_ms is not None:
            args += ["BLOCK", block_ms]
        elif self.fair:
            args.append("NOQUEUE")
        if token:
            args.append("TOKEN")
        return tuple(args)

    def unlock_args(self, name: str, owner: str, lease_ms: int, request_id: str, latch_ms: int) -> Args:
        """The unlock, always with a ``LATCH`` so that a re-sent unlock is answered, not
        applied twice."""
        side = (self.side,) if self.side else ()
        return (f"{self.prefix}.UNLOCK", name, owner, *side, lease_ms, "LATCH", request_id, latch_ms)

    def holds_args(self, name: str, owner: str) -> Args:
        return (f"{self.prefix}.HOLDS", name, owner)

    def parse_holds(self, reply: Any) -> int:
        """The owner's hold count on this side of the lock."""
        if self.holds_index is None:
            return int(reply)
        return int(reply[self.holds_index])

    def renew_args(self, name: str, owner: str, lease_ms: int) -> Args:
        return (f"{self.prefix}.RENEW", name, owner, lease_ms)

    def force_unlock_args(self, name: str) -> Args:
        side = (self.side,) if self.side else ()
        return (f"{self.prefix}.FORCEUNLOCK", name, *side)

    def locked_args(self, name: str) -> Args:
        """Redisson's ``isLocked()``: the key exists (read-write: it is in this side's mode)."""
        return ("HGET", name, "mode") if self.side else ("EXISTS", name)

    def parse_locked(self, reply: Any) -> bool:
        if self.side:
            return text(reply) == self.side.lower()
        return int(reply) == 1


def parse_acquire(reply: Any, token: bool) -> Tuple[bool, Optional[int]]:
    """(granted, fencing token) from an acquire's reply."""
    if token:
        first, second = int(reply[0]), int(reply[1])
        return (True, second) if first == -1 else (False, None)
    return reply is None, None


REENTRANT = Kind("lock", "LOCK.ACQUIRE", "LOCK")
READ = Kind("read", "RWLOCK.RLOCK", "RWLOCK", side="READ", holds_index=0, fenceable=False)
WRITE = Kind("write", "RWLOCK.WLOCK", "RWLOCK", side="WRITE", holds_index=1)
FAIR = Kind("fair", "FAIRLOCK.ACQUIRE", "FAIRLOCK", fair=True)
