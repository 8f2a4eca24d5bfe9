"""redis-lockmod: Redisson's locks for Python, on the redis-lockmod Redis module.

Sync locks on redis-py (``redis.Redis``, ``redis.cluster.RedisCluster``)::

    import redis
    from redis_lockmod import Lock

    with Lock(redis.Redis(), "orders"):
        ...

The asyncio locks (``redis.asyncio``) live in `redis_lockmod.asyncio` with the same names.
"""

from ._session import close
from .errors import LockError, LockLostError, LockNotOwnedError, LockTimeoutError
from .locks import FairLock, Lock, ReadLock, ReadWriteLock, WriteLock

__version__ = "0.1.0"

__all__ = [
    "FairLock",
    "Lock",
    "LockError",
    "LockLostError",
    "LockNotOwnedError",
    "LockTimeoutError",
    "ReadLock",
    "ReadWriteLock",
    "WriteLock",
    "close",
    "__version__",
]
