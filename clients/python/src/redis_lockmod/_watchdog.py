"""The sync watchdog: Redisson's lease renewal for locks acquired without a lease.

One daemon thread per client session renews every watched hold each interval (a third of the
lease by default) with ``*.RENEW``, and ends when nothing is watched. A renewal that finds the
owner no longer holding the lock (lease ran out during a stall, force unlock) marks the hold
lost and calls the lock's ``on_lost`` callback; the owner's `release` then raises
`LockLostError`. A renewal that fails (connection) is tried again at the next interval: the
lease still has two intervals to run. A hold whose thread (or task) has ended is no longer
renewed: nobody is left to release it, so its lease is left to run out, and the lock frees
itself (Redisson renews such a lock until the client shuts down).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from ._base import Hold
from .errors import NoSyncedReplicasError
from ._driver import read
from ._transport import Transport

log = logging.getLogger("redis_lockmod")

#: The longest the watchdog thread sleeps at once (seconds); a renewal due later is looked at
#: again then. A wait past ``threading.TIMEOUT_MAX`` (292 years) would raise in the thread.
MAX_SLEEP_S = 3600.0


class Entry:
    """One watched hold: whose, and when it is renewed next (monotonic seconds)."""

    __slots__ = ("lock", "hold", "key", "owner", "due", "alive")

    def __init__(
        self, lock: Any, hold: Hold, key: Tuple[str, str, str], owner: str, alive: Callable[[], bool]
    ) -> None:
        self.lock = lock
        self.hold = hold
        self.key = key
        self.owner = owner
        self.due = time.monotonic() + lock.watchdog_interval_ms / 1000
        #: Whether the owning thread (or task) still runs.
        self.alive = alive


class Watchdog:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._cond = threading.Condition()
        self._entries: List[Entry] = []
        self._thread: Optional[threading.Thread] = None

    def watch(self, lock: Any, hold: Hold, key: Tuple[str, str, str], owner: str) -> None:
        """Starts renewing `hold` (the owner's first hold was just granted, in this thread)."""
        entry = Entry(lock, hold, key, owner, threading.current_thread().is_alive)
        with self._cond:
            hold.watch = entry
            self._entries.append(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="redis-lockmod-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def unwatch(self, hold: Hold) -> None:
        """Stops renewing `hold` (released, or force-unlocked)."""
        with self._cond:
            entry, hold.watch = hold.watch, None
            if entry in self._entries:
                self._entries.remove(entry)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._entries:
                    self._thread = None
                    return
                now = time.monotonic()
                due = [e for e in self._entries if e.due <= now]
                if not due:
                    self._cond.wait(min(min(e.due for e in self._entries) - now, MAX_SLEEP_S))
                    continue
                for e in due:
                    e.due = now + e.lock.watchdog_interval_ms / 1000
            for e in due:
                self._renew(e)

    def _renew(self, e: Entry) -> None:
        lock = e.lock
        if not e.alive():
            with self._cond:
                if e in self._entries:
                    self._entries.remove(e)
                e.hold.watch = None
            log.warning("watchdog: %s holds %s but has ended; its lease is left to run out", e.owner, lock.name)
            return
        if e.hold.watch is not e:
            return  # released since it fell due
        args = lock._kind.renew_args(lock.name, e.owner, lock.watchdog_lease_ms)
        try:
            reply = read(self._transport, lock.name, args, lock.command_timeout, sync_ms=lock.sync_ms)
        except NoSyncedReplicasError as exc:
            # Renewed on the primary only (Redisson logs it and renews again at the next interval).
            log.warning("watchdog: renewing %s for %s: %s", lock.name, e.owner, exc)
            reply = exc.reply
        except Exception as exc:  # the lease has two more intervals: try again then
            log.warning("watchdog: renewing %s for %s failed: %s", lock.name, e.owner, exc)
            return
        if int(reply) == 1:
            return
        with self._cond:
            if e.hold.watch is not e:
                return  # released while the renewal was on its way
            self._entries.remove(e)
            e.hold.watch = None
            e.hold.lost = True
            e.hold.count = 0
            e.hold.token = None
        log.warning("watchdog: lock %s is no longer held by %s (lease ran out or force-unlocked)", lock.name, e.owner)
        if lock.on_lost is not None:
            try:
                lock.on_lost(lock)
            except Exception:
                log.exception("watchdog: the on_lost callback of %s raised", lock.name)
