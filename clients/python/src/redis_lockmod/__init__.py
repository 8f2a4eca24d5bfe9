"""redis-lockmod: Redisson's locks and synchronizers for Python, on the redis-lockmod Redis module.

Sync locks on redis-py (``redis.Redis``, ``redis.cluster.RedisCluster``)::

    import redis
    from redis_lockmod import Lock

    with Lock(redis.Redis(), "orders"):
        ...

Also Redisson's synchronizers: `Semaphore`, `PermitExpirableSemaphore`, `CountDownLatch`
(`redis_lockmod.synchronizers`), and its rate limiter, `RateLimiter` (`redis_lockmod.ratelimiter`).
The asyncio locks, synchronizers and rate limiter (``redis.asyncio``) live in
`redis_lockmod.asyncio` with the same names.
"""

from ._session import close
from .errors import LockError, LockLostError, LockNotOwnedError, LockTimeoutError, NoSyncedReplicasError
from ._rate import RateLimiterConfig, RateType
from .locks import FairLock, Lock, ReadLock, ReadWriteLock, WriteLock
from .ratelimiter import RateLimiter
from .synchronizers import CountDownLatch, PermitExpirableSemaphore, Semaphore

__version__ = "0.1.0"

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
    "__version__",
]
