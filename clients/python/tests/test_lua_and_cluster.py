"""Sharing: a Redisson-style client (this repository's Lua reference of Redisson's scripts,
bench/lua/, sent with EVAL) and the library contend for one lock by the same names; and the
locks on a Redis Cluster (scripts/cluster.sh), with redis-py's sync and asyncio RedisCluster."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from conftest import ROOT, blocked_clients, wait_until
from redis_lockmod import FairLock, Lock, ReadWriteLock
from redis_lockmod import asyncio as alocks

JAVA = "6f1c3f5e-redisson-client:57"  # a Redisson owner: <client uuid>:<thread id>


def script(r: redis.Redis, name: str):
    return r.register_script((ROOT / "bench" / "lua" / f"{name}.lua").read_text())


def test_a_lua_client_and_the_library_share_one_lock_by_name_and_owner(r: redis.Redis) -> None:
    acquire, unlock = script(r, "lock_acquire"), script(r, "lock_unlock")
    channel = "redisson_lock__channel:{shared}"
    lock = Lock(r, "shared", lease_ms=30_000)
    assert acquire(keys=["shared"], args=[JAVA, 30_000]) is None
    assert lock.acquire(blocking=False) is False

    def lua_unlock_once_parked() -> None:
        wait_until(lambda: blocked_clients(r) == 1, message="the library parked")
        # The Lua unlock (Redisson's) wakes the library's parked acquire.
        assert unlock(keys=["shared", channel], args=[JAVA, 30_000]) == 1

    t = threading.Thread(target=lua_unlock_once_parked)
    t.start()
    assert lock.acquire(timeout=10)
    t.join()
    assert r.hgetall("shared") == {lock.owner.encode(): b"1"}
    assert acquire(keys=["shared"], args=[JAVA, 30_000]) > 0, "the Lua client is refused: PTTL"
    # Same layout: the Lua script re-enters with the library's owner name, and the library sees it.
    assert acquire(keys=["shared"], args=[lock.owner, 30_000]) is None
    assert lock.hold_count() == 2
    assert unlock(keys=["shared", channel], args=[lock.owner, 30_000]) == 0
    lock.release()
    assert r.exists("shared") == 0


def test_locks_work_on_a_cluster_routed_by_slot(cluster) -> None:
    rc = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    names = ["orders", "{user:42}:cart", "stock-17"]
    for name in names:
        node = rc.get_node_from_key(name)
        direct = redis.Redis(host=node.host, port=node.port)
        lock, fair = Lock(rc, name, fenced=True), FairLock(rc, name + "-fair", lease_ms=30_000)
        rw = ReadWriteLock(rc, name + "-rw")
        assert lock.acquire() and lock.token == 1
        assert direct.hgetall(name) == {lock.owner.encode(): b"1"}, "on the slot's primary"
        assert fair.acquire() and rw.write_lock().acquire() and rw.read_lock().acquire()
        assert lock.hold_count() == 1 and rw.read_lock().hold_count() == 1
        for held in (rw.read_lock(), rw.write_lock(), fair, lock):
            held.release()
        assert not lock.locked() and direct.exists(name) == 0
    # Contention across threads on one cluster lock.
    lock = Lock(rc, "contended")
    count = {"n": 0}

    def worker() -> None:
        for _ in range(25):
            with lock:
                n = count["n"]
                count["n"] = n + 1

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count["n"] == 100 and not lock.locked()
    rc.close()


def test_asyncio_locks_work_on_a_cluster(cluster) -> None:
    async def main() -> None:
        rc = AsyncRedisCluster(host="127.0.0.1", port=cluster.ports[0])
        lock = alocks.Lock(rc, "aorders", fenced=True)

        async def waiter() -> int:
            other = alocks.Lock(rc, "aorders", fenced=True)
            assert await other.acquire(timeout=10)
            token = other.token
            await other.release()
            return token

        assert await lock.acquire()
        task = asyncio.create_task(waiter())
        await asyncio.sleep(0.1)
        await lock.release()
        assert await task == 2
        rw = alocks.ReadWriteLock(rc, "{user:7}:doc")
        async with rw.write_lock():
            assert await rw.write_lock().hold_count() == 1
        assert not await rw.write_lock().locked()
        await alocks.close(rc)
        await rc.aclose()

    asyncio.run(main())


def test_synchronizers_work_on_a_cluster(cluster) -> None:
    from redis_lockmod import CountDownLatch, PermitExpirableSemaphore, Semaphore

    rc = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    for name in ("pool", "{user:42}:pool", "stock-17"):
        node = rc.get_node_from_key(name)
        direct = redis.Redis(host=node.host, port=node.port)
        sem = Semaphore(rc, name)
        assert sem.try_set_permits(2) and direct.get(name) == b"2", "on the slot's primary"
        with sem.hold(2):
            t = threading.Thread(target=lambda: sem.acquire(timeout=10))
            t.start()
            wait_until(lambda: blocked_clients(direct) == 1, message="parked on the key's node")
        t.join()
        assert sem.available_permits() == 1
        psem = PermitExpirableSemaphore(rc, name + "-p", lease_ms=30_000)
        psem.try_set_permits(1)
        with psem.hold() as ids:
            assert len(ids) == 1 and psem.acquired_permits() == 1
        latch = CountDownLatch(rc, name + "-l")
        if "{" in name:
            # Redisson's latch channel is braced whatever the name, so a name with its own hash
            # tag puts it in another slot: refused with CROSSSLOT, as Redisson's Lua is.
            with pytest.raises(redis.exceptions.ClusterCrossSlotError):
                latch.try_set_count(1)
            assert direct.exists(name + "-l") == 0, "nothing written"
        else:
            assert latch.try_set_count(1) and latch.count_down() == 0 and latch.wait(timeout=1)
        direct.close()

    async def main() -> None:
        arc = AsyncRedisCluster(host="127.0.0.1", port=cluster.ports[0])
        sem = alocks.Semaphore(arc, "apool")
        await sem.try_set_permits(0)
        task = asyncio.create_task(sem.acquire(timeout=10))
        await asyncio.sleep(0.1)
        task.cancel()  # the unblock goes to the node the wait parked on
        await asyncio.gather(task, return_exceptions=True)
        waiting = asyncio.create_task(sem.acquire(timeout=10))
        await asyncio.sleep(0.1)
        assert await sem.release(1) in (0, 1)
        assert await waiting is True and await sem.available_permits() == 0
        await alocks.close(arc)
        await arc.aclose()

    asyncio.run(main())
    rc.close()


def test_rate_limiters_work_on_a_cluster(cluster) -> None:
    from redis_lockmod import RateLimiter, RateType

    rc = RedisCluster(host="127.0.0.1", port=cluster.ports[0])
    for name in ("api", "{user:42}:api", "quota-17"):
        node = rc.get_node_from_key(name)
        direct = redis.Redis(host=node.host, port=node.port)
        limiter = RateLimiter(rc, name)
        assert limiter.try_set_rate(RateType.PER_CLIENT, 1, 3_600_000) and limiter.try_acquire()
        value = f"{name}:value:{limiter.client_id}" if "{" in name else f"{{{name}}}:value:{limiter.client_id}"
        assert direct.get(value) == b"0", "on the slot's primary"
        t = threading.Thread(target=lambda: limiter.acquire(timeout=10))
        t.start()
        wait_until(lambda: blocked_clients(direct) == 1, message="parked on the key's node")
        assert limiter.release(1) == 1, "the permits before the parked waiter took its own"
        t.join()
        assert limiter.available_permits() == 0 and blocked_clients(direct) == 0
        direct.close()
    rc.close()
