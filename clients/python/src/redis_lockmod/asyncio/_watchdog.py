"""The asyncio watchdog: the sync watchdog's rules (`redis_lockmod._watchdog`) in one task
per client session, which ends when nothing is watched. ``on_lost`` may be a coroutine
function. A hold whose task has ended is no longer renewed."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any, List, Optional, Tuple

from .._base import Hold
from ..errors import NoSyncedReplicasError
from .._watchdog import Entry
from ._driver import read
from ._transport import Transport

log = logging.getLogger("redis_lockmod")


class Watchdog:
    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._entries: List[Entry] = []
        self._task: Optional["asyncio.Task[None]"] = None
        self._wake = asyncio.Event()

    def watch(self, lock: Any, hold: Hold, key: Tuple[str, str, str], owner: str) -> None:
        task = asyncio.current_task()
        entry = Entry(lock, hold, key, owner, lambda: task is not None and not task.done())
        hold.watch = entry
        self._entries.append(entry)
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name="redis-lockmod-watchdog")
        self._wake.set()

    def unwatch(self, hold: Hold) -> None:
        entry, hold.watch = hold.watch, None
        if entry in self._entries:
            self._entries.remove(entry)
        self._wake.set()

    async def _run(self) -> None:
        while self._entries:
            now = time.monotonic()
            due = [e for e in self._entries if e.due <= now]
            if not due:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), min(e.due for e in self._entries) - now)
                except asyncio.TimeoutError:
                    pass
                continue
            for e in due:
                e.due = now + e.lock.watchdog_interval_ms / 1000
            for e in due:
                await self._renew(e)
        self._task = None

    async def _renew(self, e: Entry) -> None:
        lock = e.lock
        if not e.alive():
            if e in self._entries:
                self._entries.remove(e)
            e.hold.watch = None
            log.warning("watchdog: %s holds %s but has ended; its lease is left to run out", e.owner, lock.name)
            return
        if e.hold.watch is not e:
            return  # released since it fell due
        args = lock._kind.renew_args(lock.name, e.owner, lock.watchdog_lease_ms)
        try:
            reply = await read(self._transport, lock.name, args, lock.command_timeout, sync_ms=lock.sync_ms)
        except NoSyncedReplicasError as exc:
            # Renewed on the primary only (Redisson logs it and renews again at the next interval).
            log.warning("watchdog: renewing %s for %s: %s", lock.name, e.owner, exc)
            reply = exc.reply
        except Exception as exc:
            log.warning("watchdog: renewing %s for %s failed: %s", lock.name, e.owner, exc)
            return
        if int(reply) == 1 or e.hold.watch is not e:
            return
        self._entries.remove(e)
        e.hold.watch = None
        e.hold.lost = True
        e.hold.count = 0
        e.hold.token = None
        log.warning("watchdog: lock %s is no longer held by %s (lease ran out or force-unlocked)", lock.name, e.owner)
        if lock.on_lost is not None:
            try:
                result = lock.on_lost(lock)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("watchdog: the on_lost callback of %s raised", lock.name)
