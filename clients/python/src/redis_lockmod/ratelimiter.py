"""The sync rate limiter on redis-py: `RateLimiter`, Redisson's ``RRateLimiter`` on its own
layout (``RATELIMITER.*``), so a Redisson client shares it by name::

    limiter = RateLimiter(r, "api")
    limiter.try_set_rate(RateType.OVERALL, 10, 1000)  # 10 permits per second, set once
    if limiter.try_acquire():                           # no wait
        ...
    limiter.acquire(2, timeout=5)                       # waits in the server (BLOCK), FIFO

A wait is the server's ``BLOCK`` on a connection of the library's own. Redisson's limiter sends
its scripts without waiting for the replicas (``evalWriteAsync``, never the synced eval of its
locks and semaphores), so this one waits for none either: ``sync_replicas`` does not apply.
A lost reply of a change (an acquire, a release, a set) is never sent again: the call raises
redis-py's ``ConnectionError`` or ``TimeoutError`` and the outcome is unknown.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from ._rate import RateArgs, RateLimiterConfig, RateType, parse_config
from ._sync import check_name, wait
from .synchronizers import _SyncObject


class RateLimiter(_SyncObject):
    """Redisson's ``RRateLimiter``: at most ``rate`` permits in any window of ``interval_ms``,
    for every client (``OVERALL``) or per client id (``PER_CLIENT``). ``client_id`` is the
    window's id for ``PER_CLIENT`` (default: the library's client uuid; give a Redisson
    client's ``getServiceManager().getId()`` to share its window)."""

    _what = "rate limiter"
    _syncs = False

    def __init__(self, client: Any, name: str, *, client_id: Optional[str] = None, **options: Any) -> None:
        super().__init__(client, name, **options)
        #: The id of this client's window of a ``PER_CLIENT`` limiter.
        self.client_id = self._session.uuid if client_id is None else check_name(client_id, "client id")

    def try_set_rate(
        self, mode: Union[RateType, str], rate: int, interval_ms: int, keep_alive_ms: Optional[int] = None
    ) -> bool:
        """Redisson's ``trySetRate``: sets the rate if the limiter has none yet; True if set.
        ``keep_alive_ms``: the limiter's keys expire that long after their last use (at least
        the interval)."""
        return int(self._once(RateArgs.try_set(self.name, mode, rate, interval_ms, keep_alive_ms))) == 1

    def set_rate(
        self,
        mode: Union[RateType, str],
        rate: int,
        interval_ms: int,
        keep_alive_ms: Optional[int] = None,
        *,
        keep_state: bool = False,
        xx: bool = False,
    ) -> bool:
        """Redisson's ``setRate(RateLimiterArgs)``: sets the rate whatever it was. The state (the
        permits left, the grants in the window) starts afresh, unless ``keep_state``: then the
        grants in the window still count against the new rate. ``xx``: only if the limiter is
        set (Redisson's ``updateRate``); False when it is not."""
        args = RateArgs.set(self.name, self.client_id, mode, rate, interval_ms, keep_alive_ms, keep_state, xx)
        return int(self._once(args)) == 1

    def acquire(self, permits: int = 1, *, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Takes ``permits`` permits, waiting in the server (in arrival order) until they fit in
        the window, at most ``timeout`` seconds (None: no limit, Redisson's ``acquire``);
        ``blocking=False`` or ``timeout=0`` tries once. True when taken."""
        block_ms, sock = wait(blocking, timeout, self.command_timeout)
        return self._once(RateArgs.acquire(self.name, self.client_id, permits, block_ms), sock) is None

    def try_acquire(self, permits: int = 1) -> bool:
        """Redisson's ``tryAcquire(permits)``: takes the permits if they fit now; never waits."""
        return self.acquire(permits, blocking=False)

    def release(self, permits: int = 1) -> int:
        """Redisson's ``release``: gives ``permits`` back to the window (taken off its newest
        grants; never above the rate); returns the permits available after it."""
        return int(self._once(RateArgs.release(self.name, self.client_id, permits)))

    def available_permits(self) -> int:
        """The permits that fit in the window now (0 to the rate)."""
        return int(self._read(RateArgs.available(self.name, self.client_id)))

    def get_config(self) -> Optional[RateLimiterConfig]:
        """The limiter's settings, or None when it has none."""
        return parse_config(self._read(("HGETALL", self.name)))
