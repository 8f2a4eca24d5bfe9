"""Replies that never arrive: the server is kept busy with ``DEBUG SLEEP`` from another
connection while the lock's socket timeout is shorter. Each test first uses the lock once, so
that its request goes out on an established connection (a connection attempt to a sleeping
server fails before anything is sent, and is simply tried again). A grant whose reply is lost is found
with ``*.HOLDS`` and counted as held; an unlock whose reply is lost is sent again with the same
``LATCH`` request id and is not applied twice."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
import redis
import redis.asyncio as aredis

from conftest import server_asleep
from redis_lockmod import FairLock, Lock, ReadWriteLock
from redis_lockmod import asyncio as alocks

FAST = {"command_timeout": 0.25, "lease_ms": 30_000}


@pytest.mark.parametrize("blocking", [False, True], ids=["try", "block"])
def test_a_granted_acquire_whose_reply_is_lost_is_recognised_as_held(server, r, caplog, blocking) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    lock = Lock(r, "lost-acquire", **FAST)
    assert lock.acquire(blocking=blocking, timeout=0.05)
    lock.release()
    with server_asleep(server, 1.2):
        assert lock.acquire(blocking=blocking, timeout=0.05)
    assert "reply lost" in caplog.text and "settled with LOCK.HOLDS: granted" in caplog.text
    assert lock.hold_count() == 1
    assert r.hgetall("lost-acquire") == {lock.owner.encode(): b"1"}, "granted once, not re-sent"
    lock.release()
    assert r.exists("lost-acquire") == 0


def test_a_lost_fenced_grant_still_knows_its_token(server, r, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    lock = ReadWriteLock(r, "lost-fenced", fenced=True, **FAST).write_lock()
    assert lock.acquire(blocking=False) and lock.token == 1
    with server_asleep(server, 1.2):
        assert lock.acquire(blocking=False)
    assert "settled with RWLOCK.HOLDS: granted" in caplog.text
    assert lock.token == 2 and r.get("redisson_lock_token:{lost-fenced}") == b"2"
    assert lock.hold_count() == 2


def test_a_refused_acquire_whose_reply_is_lost_raises_and_takes_nothing(server, r, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    holder = Lock(r, "lost-refused", lease_ms=30_000)
    lock = Lock(r, "lost-refused", **FAST)
    assert lock.acquire(blocking=False)
    lock.release()
    assert holder.acquire()
    result = {}

    def other() -> None:
        with server_asleep(server, 1.2):
            try:
                result["v"] = lock.acquire(blocking=False)
            except redis.exceptions.TimeoutError as e:
                result["e"] = e

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert "e" in result, result
    assert "settled with LOCK.HOLDS: not granted" in caplog.text
    assert r.hgetall("lost-refused") == {holder.owner.encode(): b"1"}
    holder.release()


def test_a_lost_unlock_reply_is_not_applied_twice(server, r, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    lock = FairLock(r, "lost-unlock", **FAST)
    assert lock.acquire() and lock.acquire()
    assert lock.hold_count() == 2
    with server_asleep(server, 1.2):
        lock.release()
    assert "re-sending the same LATCH request" in caplog.text
    assert r.hgetall("lost-unlock") == {lock.owner.encode(): b"1"}, "one hold given back, not two"
    assert lock.hold_count() == 1
    latches = r.keys("redisson_unlock_latch:{lost-unlock}:*")
    assert [r.get(k) for k in latches] == [b"0"], "one unlock request: the latch answered the re-send"
    lock.release()
    assert r.exists("lost-unlock") == 0


def test_an_asyncio_grant_whose_reply_is_lost_is_recognised_as_held(server, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")

    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = alocks.Lock(r, "alost", **FAST)
        assert await lock.acquire(timeout=0.05)
        await lock.release()
        with server_asleep(server, 1.2):
            assert await lock.acquire(timeout=0.05)
        assert await r.hgetall("alost") == {lock.owner.encode(): b"1"}
        await lock.release()
        assert await r.exists("alost") == 0
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())
    assert "settled with LOCK.HOLDS: granted" in caplog.text


def test_a_cancelled_waiter_leaves_no_grant_behind(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        holder = alocks.Lock(r, "acancel", lease_ms=30_000)
        assert await holder.acquire()

        async def waiter() -> None:
            await alocks.Lock(r, "acancel", lease_ms=30_000).acquire(timeout=10)

        task = asyncio.create_task(waiter())
        while int((await r.info("clients"))["blocked_clients"]) != 1:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while int((await r.info("clients"))["blocked_clients"]) != 0:
            await asyncio.sleep(0.005)
        await holder.release()
        await alocks.close(r)  # waits for the settling of the cancelled acquire
        assert await r.exists("acancel") == 0, "the cancelled waiter was not handed the lock"
        await r.aclose()

    asyncio.run(main())


def test_a_release_retried_after_it_failed_is_the_same_request_or_settled_by_asking(server, r, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    lock = Lock(r, "lost-retried", **FAST)
    lock.settle_timeout = 0.25  # re-sends as impatient as the first send, so release gives up
    assert lock.acquire() and lock.acquire() and lock.acquire()
    owner = lock.owner.encode()

    def fail_a_release() -> None:
        # Established connections, so that every send goes out (a connection attempt to a
        # sleeping server fails before sending and is tried again until it wakes).
        transport = lock._session.transport
        cls, kwargs = transport._node("lost-retried")
        for link in [transport._take(cls, kwargs, 0.25) for _ in range(3)]:
            transport._put(link)
        with server_asleep(server, 1.5):
            with pytest.raises(redis.exceptions.TimeoutError):
                lock.release()

    fail_a_release()
    lock.release()  # the caller's retry: the same LATCH request, which the latch answers
    assert r.hgetall("lost-retried") == {owner: b"2"}, "released once, not twice"
    assert len(r.keys("redisson_unlock_latch:{lost-retried}:*")) == 1
    fail_a_release()
    # Retried after the latch's re-send window: settled by asking, not re-sent.
    hold = lock._session.find(("lock", "lost-retried", lock.owner))
    hold.pending_unlock.first_sent -= 3600
    lock.release()
    assert "settled with LOCK.HOLDS: applied" in caplog.text
    assert r.hgetall("lost-retried") == {owner: b"1"} and lock.hold_count() == 1
    fail_a_release()
    # An acquire after a failed release first reads the hold count back: the unlock ran.
    assert lock.acquire(blocking=False)
    assert r.hgetall("lost-retried") == {owner: b"1"}
    lock.release()
    assert r.exists("lost-retried") == 0
