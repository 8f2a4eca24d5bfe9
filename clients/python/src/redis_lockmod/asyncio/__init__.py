"""The asyncio locks, synchronizers and rate limiter (``redis.asyncio`` clients), with the
names and options of the sync ones::

    import redis.asyncio as redis
    from redis_lockmod.asyncio import Lock

    async with Lock(redis.Redis(), "orders"):
        ...
"""

from .._rate import RateLimiterConfig, RateType
from ..errors import LockError, LockLostError, LockNotOwnedError, LockTimeoutError, NoSyncedReplicasError
from ._session import close
from .locks import FairLock, Lock, ReadLock, ReadWriteLock, WriteLock
from .ratelimiter import RateLimiter
from .synchronizers import CountDownLatch, PermitExpirableSemaphore, Semaphore

__all__ = [
    "CountDownLatch",
    "FairLock",
    "Lock",
    "LockError",
    "LockLostError",
    "LockNotOwnedError",
    "LockTimeoutError",
    "NoSyncedReplicasError",
    "PermitExpirableSemaphore",
    "RateLimiter",
    "RateLimiterConfig",
    "RateType",
    "ReadLock",
    "ReadWriteLock",
    "Semaphore",
    "WriteLock",
    "close",
]
