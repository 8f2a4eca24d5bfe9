"""The asyncio rate limiter on ``redis.asyncio``: `RateLimiter`, with the sync one's names and
options (see `redis_lockmod.ratelimiter`)::

    limiter = RateLimiter(r, "api")
    await limiter.try_set_rate(RateType.OVERALL, 10, 1000)
    await limiter.acquire(timeout=5)

A task cancelled while it waits leaves nothing behind, before the ``CancelledError`` reaches
its caller: its parked request is answered at once with ``CLIENT UNBLOCK <id> TIMEOUT``, and
permits granted before the unblock got there are given back with ``RATELIMITER.RELEASE``, as
for the semaphores.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from .._rate import RateArgs, RateLimiterConfig, RateType, parse_config
from .._sync import check_name, wait
from .synchronizers import _AsyncObject


class RateLimiter(_AsyncObject):
    """As the sync `redis_lockmod.RateLimiter` (Redisson's ``RRateLimiter``)."""

    _what = "rate limiter"
    _syncs = False

    def __init__(self, client: Any, name: str, *, client_id: Optional[str] = None, **options: Any) -> None:
        super().__init__(client, name, **options)
        self.client_id = self._session.uuid if client_id is None else check_name(client_id, "client id")

    async def try_set_rate(
        self, mode: Union[RateType, str], rate: int, interval_ms: int, keep_alive_ms: Optional[int] = None
    ) -> bool:
        return int(await self._once(RateArgs.try_set(self.name, mode, rate, interval_ms, keep_alive_ms))) == 1

    async def set_rate(
        self,
        mode: Union[RateType, str],
        rate: int,
        interval_ms: int,
        keep_alive_ms: Optional[int] = None,
        *,
        keep_state: bool = False,
        xx: bool = False,
    ) -> bool:
        args = RateArgs.set(self.name, self.client_id, mode, rate, interval_ms, keep_alive_ms, keep_state, xx)
        return int(await self._once(args)) == 1

    async def acquire(self, permits: int = 1, *, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """As the sync `RateLimiter.acquire`; cancelling the task gives back a racing grant."""
        block_ms, sock = wait(blocking, timeout, self.command_timeout)
        args = RateArgs.acquire(self.name, self.client_id, permits, block_ms)
        give_back = lambda reply: RateArgs.give_back(self.name, self.client_id, permits, reply)  # noqa: E731
        return await self._wait(args, sock, give_back) is None

    async def try_acquire(self, permits: int = 1) -> bool:
        return await self.acquire(permits, blocking=False)

    async def release(self, permits: int = 1) -> int:
        return int(await self._once(RateArgs.release(self.name, self.client_id, permits)))

    async def available_permits(self) -> int:
        return int(await self._read(RateArgs.available(self.name, self.client_id)))

    async def get_config(self) -> Optional[RateLimiterConfig]:
        return parse_config(await self._read(("HGETALL", self.name)))
