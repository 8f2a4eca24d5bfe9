"""No garbage per unlock (issue 34): every unlock carries ``LATCH <id> <ms>``, and the latch key
it leaves (``redisson_unlock_latch:{name}:<id>``, 120 s by default) is deleted once the unlock's
reply arrived, as Redisson deletes its own. 10,000 lock/unlock cycles of every kind that unlocks
with a latch, sync and asyncio, leave the key count flat; a reply that was lost keeps its latch
(the re-send must find it: test_lost_replies); a user without ``DEL`` leaves latches to expire,
with one warning."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable, Dict

import pytest
import redis
import redis.asyncio as aredis

from conftest import wait_until
from redis_lockmod import FairLock, Lock, ReadWriteLock
from redis_lockmod import asyncio as alocks

CYCLES, EVERY = 10_000, 1_000

SYNC: Dict[str, Callable[[Any, str], Any]] = {
    "reentrant": lambda r, n: Lock(r, n, lease_ms=30_000),
    "fair": lambda r, n: FairLock(r, n, lease_ms=30_000),
    "read": lambda r, n: ReadWriteLock(r, n, lease_ms=30_000).read_lock(),
    "write": lambda r, n: ReadWriteLock(r, n, lease_ms=30_000).write_lock(),
}
ASYNC: Dict[str, Callable[[Any, str], Any]] = {
    "reentrant": lambda r, n: alocks.Lock(r, n, lease_ms=30_000),
    "fair": lambda r, n: alocks.FairLock(r, n, lease_ms=30_000),
    "read": lambda r, n: alocks.ReadWriteLock(r, n, lease_ms=30_000).read_lock(),
    "write": lambda r, n: alocks.ReadWriteLock(r, n, lease_ms=30_000).write_lock(),
}


def latches(r: redis.Redis) -> int:
    return len(r.keys("redisson_unlock_latch:*"))


@pytest.mark.parametrize("kind", SYNC)
def test_ten_thousand_sync_cycles_leave_the_key_count_flat(r: redis.Redis, kind: str) -> None:
    lock = SYNC[kind](r, f"flat-{kind}")
    expired = int(r.info("stats")["expired_keys"])
    most = 0
    for i in range(1, CYCLES + 1):
        assert lock.acquire(blocking=False)
        lock.release()
        if i % EVERY == 0:
            # The last unlock's DEL may still be on its way; nothing older is left.
            most = max(most, r.dbsize())
            assert latches(r) <= 1, f"after {i} cycles"
    assert most <= 1, f"at most one key at a time, saw {most}"
    wait_until(lambda: r.dbsize() == 0, 5, "every key gone")
    assert int(r.info("stats")["expired_keys"]) == expired, "deleted, not left to expire"


@pytest.mark.parametrize("kind", ASYNC)
def test_ten_thousand_asyncio_cycles_leave_the_key_count_flat(server, kind: str) -> None:
    async def main() -> int:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = ASYNC[kind](r, f"aflat-{kind}")
        most = 0
        for i in range(1, CYCLES + 1):
            assert await lock.acquire(blocking=False)
            await lock.release()
            if i % EVERY == 0:
                most = max(most, await r.dbsize())
                assert len(await r.keys("redisson_unlock_latch:*")) <= 1, f"after {i} cycles"
        deadline = asyncio.get_running_loop().time() + 5
        while await r.dbsize() != 0:
            assert asyncio.get_running_loop().time() < deadline, "every key gone"
            await asyncio.sleep(0.01)
        await alocks.close(r)
        await r.aclose()
        return most

    assert asyncio.run(main()) <= 1


def test_reentrant_holds_and_waits_delete_their_latches_too(server, r: redis.Redis) -> None:
    # A partial unlock (latch value 0) and a grant handed over to a parked waiter.
    lock = Lock(r, "flat-nested", lease_ms=30_000)
    for _ in range(100):
        assert lock.acquire() and lock.acquire()
        lock.release()
        lock.release()
    wait_until(lambda: latches(r) == 0, 5, "the nested unlocks' latches deleted")
    other = Lock(server.client(), "flat-nested", lease_ms=30_000)
    for _ in range(20):
        assert lock.acquire()
        t = threading.Thread(target=lambda: (other.acquire(timeout=30), other.release()))
        t.start()
        wait_until(lambda: int(r.info("clients")["blocked_clients"]) == 1, 10, "the waiter parked")
        lock.release()
        t.join()
    wait_until(lambda: r.dbsize() == 0, 5, "nothing left")


def test_a_user_without_del_leaves_latches_to_expire_and_is_warned_once(server, r: redis.Redis, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    r.execute_command("ACL", "SETUSER", "nodel", "on", ">pw", "~*", "&*", "+@all", "-del")
    try:
        c = server.client(username="nodel", password="pw")
        lock = Lock(c, "flat-nodel", lease_ms=30_000)
        for _ in range(5):
            assert lock.acquire(blocking=False)
            lock.release()
        assert r.exists("flat-nodel") == 0, "released"
        assert latches(r) == 5, "latches kept, to expire"
        assert all(59_000 < r.pttl(k) <= 120_000 for k in r.keys("redisson_unlock_latch:*"))
        assert caplog.text.count("refused the DEL of an unlock latch") == 1
        denied = [e for e in r.acl_log() if e["object"] == "del"]
        assert sum(e["count"] for e in denied) == 1, "one refused DEL, then no more sent"
        c.close()
    finally:
        r.execute_command("ACL", "DELUSER", "nodel")
        r.execute_command("ACL", "LOG", "RESET")
