"""The acquire and release protocols, written once for the sync and asyncio libraries.

A flow is a generator: it yields an operation (:class:`Call`, :class:`Barrier`), the driver
(``_driver.run`` or ``asyncio._driver.run``) performs it on the transport and sends back the
result, or throws in the error. The rules it implements:

- An acquire or unlock is sent once. No client-side retry: a retried acquire can take a second
  hold the caller never learns of, a retried unlock can release a lock held twice.
- A reply that is lost (socket timeout, broken connection: :class:`ReplyLost`) is settled by
  asking. First a barrier: ``CLIENT KILL ID`` of the connection that carried the request, so
  that it has either run or never will (a server paused or asleep may still hold it unread);
  then ``*.HOLDS``: a hold count above what the caller held before means the acquire was
  granted. Only reads are re-sent.
- Every unlock carries ``LATCH <request id> <ms>``: a lost unlock reply is settled by sending
  the same request again, which the latch answers with the first outcome instead of applying it
  twice. A request is re-sent only within half the latch's life after it was first sent; later
  (a long outage, or a caller retrying a failed release much later) the unlock is settled like
  an acquire, by a barrier on every connection it went out on and ``*.HOLDS``.
- The latch is needed only while a copy of its request may still be sent or be on its way: once
  the reply of the first and only copy arrived, nothing can run it again, and the latch key is
  deleted (``DEL`` on the same connection, its reply read when that connection is next used),
  as Redisson deletes its own. A request that lost a reply keeps its latch for its life.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, List, Optional, Sequence, Tuple

from . import _names
from ._kinds import Args, Kind, parse_acquire
from .errors import NoSyncedReplicasError

log = logging.getLogger("redis_lockmod")

#: How many times a read that settles a lost reply is sent.
SETTLE_ATTEMPTS = 5
#: How many times a latched unlock is sent in all (the latch must outlive them).
UNLOCK_ATTEMPTS = 3
#: The shortest unlock latch (ms); longer when the timeouts make re-sends span more.
MIN_LATCH_MS = 60_000
#: How many times one acquire waits again after its wait was lost and settled as not granted.
MAX_REWAITS = 20


class ReplyLost(Exception):
    """The reply to a request did not come: its connection timed out or broke, and was closed.

    ``client_id`` is the server's id of that connection (``CLIENT ID``), for the barrier."""

    def __init__(self, cause: BaseException, address: Any, client_id: Optional[int]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.address = address
        self.client_id = client_id


class TooLate(Exception):
    """A `Call` with ``send_by`` could not be sent by then (connecting took too long); nothing
    was sent."""


@dataclass(frozen=True)
class Call:
    """Send ``commands`` pipelined on one connection to the node of ``key``; the result is the
    list of replies. ``timeout`` is the socket timeout (None: wait without limit); past
    ``send_by`` (monotonic seconds) nothing is sent any more (`TooLate`). With ``sync_ms``, a
    wait for the node's replicas follows on the same connection (`NoSyncedReplicasError` when
    none acknowledged within that many ms). ``after``: commands sent on that connection once
    the replies arrived without an error, whose own replies nobody waits for (they are read
    when the connection is next used): the cleanup of an unlock's latch. ``parks``: the
    command may wait in the server (``BLOCK``), so cancelling it must end that wait first."""

    key: str
    commands: Sequence[Args]
    timeout: Optional[float]
    send_by: Optional[float] = None
    sync_ms: Optional[int] = None
    after: Sequence[Args] = ()
    parks: bool = False


@dataclass
class PendingUnlock:
    """An unlock request in flight, kept until its outcome is known (across `release` calls)."""

    args: Args
    latch_ms: int
    #: The latch key the server writes for it (``redisson_unlock_latch:{name}:<request id>``).
    latch_key: str
    #: When it was first sent (monotonic seconds), None before.
    first_sent: Optional[float] = None
    #: The connections it was lost on, for the barrier if it must be settled by asking.
    lost: List[ReplyLost] = field(default_factory=list)
    #: A release that sent it was interrupted (Ctrl-C) with its outcome unknown: its reply may
    #: have been read and its latch deleted, so it is settled by asking, never sent again.
    interrupted: bool = False

    def resend_by(self) -> Optional[float]:
        """Re-sending is safe until half the latch's life has passed since the first send."""
        return None if self.first_sent is None else self.first_sent + self.latch_ms / 2000

    def cleanup(self) -> Tuple[Args, ...]:
        """What follows the request once its reply arrived: the latch's ``DEL``, unless a copy
        of the request was lost (it may still run, and must find the latch)."""
        return () if self.lost else (("DEL", self.latch_key),)


@dataclass(frozen=True)
class Barrier:
    """End the connection a lost request went out on (``CLIENT KILL ID``), best effort."""

    lost: ReplyLost
    timeout: Optional[float]


Flow = Generator[Any, Any, Any]


def latch_ms(timeout: Optional[float]) -> int:
    """A latch that outlasts every re-send of an unlock: all attempts with their timeouts,
    twice over, and never under a minute."""
    span = UNLOCK_ATTEMPTS * (timeout or 10.0) * 2
    return max(MIN_LATCH_MS, int(span * 1000))


def settle_holds(kind: Kind, name: str, owner: str, fenced: bool, timeout: Optional[float]) -> Flow:
    """Reads the owner's hold count (and, fenced, the token counter in the same transaction:
    while the owner holds the lock, the last token issued is its own). Returns
    (holds, token or None)."""
    commands: Tuple[Args, ...] = (kind.holds_args(name, owner),)
    if fenced:
        commands = (("MULTI",), kind.holds_args(name, owner), ("GET", _names.token_key(name)), ("EXEC",))
    last: Optional[ReplyLost] = None
    for _ in range(SETTLE_ATTEMPTS):
        try:
            replies = yield Call(name, commands, timeout)
        except ReplyLost as lost:
            last = lost
            continue
        if fenced:
            holds_reply, token = replies[-1]
            return kind.parse_holds(holds_reply), (int(token) if token is not None else None)
        return kind.parse_holds(replies[0]), None
    assert last is not None
    raise last.cause


def acquire_flow(
    kind: Kind,
    name: str,
    owner: str,
    args: Args,
    *,
    fenced: bool,
    held_before: int,
    timeout: Optional[float],
    settle_timeout: Optional[float],
    sync_ms: Optional[int] = None,
    again: Optional[Callable[[], Optional[Tuple[Args, Optional[float]]]]] = None,
    fresh: Optional[Callable[[], PendingUnlock]] = None,
    parks: bool = False,
) -> Flow:
    """Sends the acquire once (`parks`: it waits in the server, ``BLOCK``). Returns (granted,
    token).

    A wait (``BLOCK``) whose reply is lost and that was settled as not granted (its node failed
    over, or its connection broke) is a new wait for the time left: `again` gives the new
    acquire and socket timeout, or None when the time ran out. A grant that no replica
    acknowledged (`sync_ms`) is given back with an unlock made by `fresh` (Redisson's
    ``handleNoSync``), then `NoSyncedReplicasError` is raised; a refusal is returned as one."""
    rewaits = 0
    while True:
        try:
            replies = yield Call(name, (args,), timeout, sync_ms=sync_ms, parks=parks)
        except NoSyncedReplicasError as unsynced:
            granted, token = parse_acquire(unsynced.reply, fenced)
            if not granted:
                return False, None
            if fresh is not None:
                yield from give_back(kind, name, owner, fresh, held_before, settle_timeout)
            raise unsynced
        except ReplyLost as lost:
            granted, token = yield from settle_acquire(kind, name, owner, lost, fenced, held_before, settle_timeout)
            if granted:
                return True, token
            retry = again() if again is not None and rewaits < MAX_REWAITS else None
            if retry is None:
                raise lost.cause
            rewaits += 1
            args, timeout = retry
            parks = True
            log.warning("%s %s for %s: its wait was lost and not granted: waiting again", kind.acquire, name, owner)
            continue
        return parse_acquire(replies[0], fenced)


def give_back(
    kind: Kind, name: str, owner: str, fresh: Callable[[], PendingUnlock], held_before: int, timeout: Optional[float]
) -> Flow:
    """Unlocks the hold an acquire just took, because no replica acknowledged it. Best effort:
    a hold that cannot be given back is never renewed and frees itself at its lease's end."""
    try:
        reply = yield from release_flow(kind, name, owner, fresh(), fresh, held_before + 1, timeout, timeout)
    except Exception as e:
        log.warning("%s %s for %s: could not give back the unsynced grant: %r", kind.acquire, name, owner, e)
        return
    log.warning("%s %s for %s: no replica acknowledged the grant; given back (%r)", kind.acquire, name, owner, reply)


def settle_acquire(
    kind: Kind,
    name: str,
    owner: str,
    lost: ReplyLost,
    fenced: bool,
    held_before: int,
    timeout: Optional[float],
    why: str = "reply lost",
) -> Flow:
    """After a lost acquire reply: was it granted? Returns (granted, token)."""
    yield Barrier(lost, timeout)
    holds, token = yield from settle_holds(kind, name, owner, fenced, timeout)
    granted = holds > held_before
    log.warning(
        "%s %s for %s: %s (%r); settled with %s.HOLDS: %s",
        kind.acquire,
        name,
        owner,
        why,
        lost.cause,
        kind.prefix,
        "granted" if granted else "not granted",
    )
    return granted, (token if granted else None)


def release_flow(
    kind: Kind,
    name: str,
    owner: str,
    pending: PendingUnlock,
    fresh: Callable[[], PendingUnlock],
    held_before: int,
    timeout: Optional[float],
    resend_timeout: Optional[float],
    sync_ms: Optional[int] = None,
) -> Flow:
    """Sends the latched unlock `pending`; a lost reply re-sends the very same request (same
    latch id), which the server answers with the first outcome, whichever copy runs first: no
    barrier is needed. Past its re-send window the unlock is settled by asking (see
    `settle_unlock`). Returns the unlock's reply (nil, 0 or 1)."""
    last: Optional[ReplyLost] = None
    for attempt in range(UNLOCK_ATTEMPTS):
        send_by = pending.resend_by()
        if pending.interrupted or (send_by is not None and time.monotonic() > send_by):
            return (yield from settle_unlock(kind, name, owner, pending, fresh, held_before, resend_timeout, sync_ms))
        if pending.first_sent is None:
            pending.first_sent = time.monotonic()
        try:
            replies = yield Call(
                name,
                (pending.args,),
                timeout if attempt == 0 else resend_timeout,
                send_by,
                sync_ms,
                after=pending.cleanup(),
            )
        except TooLate:
            return (yield from settle_unlock(kind, name, owner, pending, fresh, held_before, resend_timeout, sync_ms))
        except ReplyLost as lost:
            last = lost
            pending.lost.append(lost)
            if attempt + 1 == UNLOCK_ATTEMPTS:
                break
            log.warning(
                "%s %s: reply lost (%r); re-sending the same LATCH request (attempt %d)",
                pending.args[0],
                name,
                lost.cause,
                attempt + 2,
            )
            continue
        return replies[0]
    assert last is not None
    raise last.cause


def settle_unlock(
    kind: Kind,
    name: str,
    owner: str,
    pending: PendingUnlock,
    fresh: Callable[[], PendingUnlock],
    held_before: int,
    timeout: Optional[float],
    sync_ms: Optional[int] = None,
) -> Flow:
    """An unlock whose latch may be gone: end every connection it went out on, then compare the
    owner's hold count with the one before. Lower: it was applied (reply 1 if nothing is left,
    else 0). Not lower: it never ran, and a new request is sent. Only the owner changes its own
    count, so the comparison holds however long ago the unlock was sent."""
    for lost in pending.lost:
        yield Barrier(lost, timeout)
    holds, _ = yield from settle_holds(kind, name, owner, False, timeout)
    applied = holds < held_before
    log.warning(
        "%s %s for %s: outcome unknown past its latch window; settled with %s.HOLDS: %s",
        pending.args[0],
        name,
        owner,
        kind.prefix,
        "applied" if applied else "not applied, sent again",
    )
    if applied:
        return 1 if holds == 0 else 0
    again = fresh()
    again.first_sent = time.monotonic()
    try:
        replies = yield Call(name, (again.args,), timeout, sync_ms=sync_ms, after=again.cleanup())
    except ReplyLost as lost:
        again.lost.append(lost)
        raise lost.cause
    return replies[0]


def sync_holds_flow(kind: Kind, name: str, owner: str, pending: PendingUnlock, timeout: Optional[float]) -> Flow:
    """Before an acquire, after a release that failed without an outcome: end every connection
    the unlock went out on, then read the owner's hold count, the new local count."""
    for lost in pending.lost:
        yield Barrier(lost, timeout)
    holds, _ = yield from settle_holds(kind, name, owner, False, timeout)
    return holds


def undo_flow(
    kind: Kind,
    name: str,
    owner: str,
    lost: ReplyLost,
    held_before: int,
    fresh: Callable[[], PendingUnlock],
    timeout: Optional[float],
) -> Flow:
    """An acquire interrupted while waiting for its reply (a cancelled task, Ctrl-C): if it was
    granted after all, give the hold back, so that no grant is left that nobody knows of."""
    granted, _ = yield from settle_acquire(kind, name, owner, lost, False, held_before, timeout, "interrupted")
    if granted:
        yield from release_flow(kind, name, owner, fresh(), fresh, held_before + 1, timeout, timeout)
