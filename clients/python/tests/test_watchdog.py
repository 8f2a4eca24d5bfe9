"""The watchdog: a lock taken without a lease keeps a 1 s lease alive for 5 s, stops renewing
at release, and signals (callback, then `LockLostError` on release) a lock found gone."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio as aredis

from conftest import wait_until
from redis_lockmod import FairLock, Lock, LockLostError, ReadWriteLock
from redis_lockmod import asyncio as alocks

WATCH = {"watchdog_lease_ms": 1000}


def test_the_watchdog_keeps_a_one_second_lease_alive_for_five_seconds(r: redis.Redis) -> None:
    rw = ReadWriteLock(r, "w-rw", **WATCH)
    locks = [Lock(r, "w-lock", **WATCH), FairLock(r, "w-fair", **WATCH), rw.write_lock(), rw.read_lock()]
    for lock in locks:
        assert lock.acquire(blocking=False) and lock.watchdog
    assert all(0 < lock.remaining_ms() <= 1000 for lock in locks)
    time.sleep(5)
    for lock in locks:
        assert lock.hold_count() == 1, lock
        assert 0 < lock.remaining_ms() <= 1000, "renewed, never past the watchdog lease"
    assert r.pttl("{w-rw}:" + rw.read_lock().owner + ":rwlock_timeout:1") > 0, "the read hold too"
    for lock in reversed(locks):
        lock.release()
    assert r.keys("w-*") == []
    # Stopped at release: no renewal is sent any more.
    renewals = renew_calls(r)
    time.sleep(1)
    assert renew_calls(r) == renewals


def renew_calls(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.endswith(".renew"))


def test_a_force_unlocked_lock_is_signalled_lost_and_release_raises(r: redis.Redis) -> None:
    lost = []
    signalled = threading.Event()

    def on_lost(lock) -> None:
        lost.append(lock.name)
        signalled.set()

    rw = ReadWriteLock(r, "l-rw", on_lost=on_lost, **WATCH)
    kinds = [Lock(r, "l-lock", on_lost=on_lost, **WATCH), FairLock(r, "l-fair", on_lost=on_lost, **WATCH), rw.write_lock()]
    for lock in kinds:
        assert lock.acquire()
    # Another client's force unlock, as an operator would run it.
    r.execute_command("LOCK.FORCEUNLOCK", "l-lock")
    r.execute_command("FAIRLOCK.FORCEUNLOCK", "l-fair")
    r.execute_command("RWLOCK.FORCEUNLOCK", "l-rw", "WRITE")
    deadline = time.monotonic() + 5
    while len(lost) < 3 and time.monotonic() < deadline:
        signalled.wait(0.1)
    assert sorted(lost) == ["l-fair", "l-lock", "l-rw"]
    for lock in kinds:
        assert lock.lost
        with pytest.raises(LockLostError):
            lock.release()
        assert not lock.lost
        assert lock.acquire(blocking=False), "free to take again"
        lock.release()
    assert r.keys("l-*") == []


def test_the_asyncio_watchdog_keeps_the_lease_and_signals_a_lost_lock(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lost = asyncio.Event()

        async def on_lost(lock) -> None:
            lost.set()

        kept = alocks.FairLock(r, "aw-kept", **WATCH)
        gone = alocks.Lock(r, "aw-gone", on_lost=on_lost, **WATCH)
        assert await kept.acquire() and await gone.acquire()
        await r.execute_command("LOCK.FORCEUNLOCK", "aw-gone")
        await asyncio.wait_for(lost.wait(), 5)
        with pytest.raises(LockLostError):
            await gone.release()
        await asyncio.sleep(4)
        assert await kept.hold_count() == 1 and 0 < await kept.remaining_ms() <= 1000
        await kept.release()
        assert await r.keys("aw-*") == []
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_lock_left_held_by_an_ended_thread_is_not_renewed_and_frees_itself(r: redis.Redis, caplog) -> None:
    caplog.set_level("WARNING", "redis_lockmod")
    lock = Lock(r, "w-orphan", **WATCH)
    t = threading.Thread(target=lambda: lock.acquire())
    t.start()
    t.join()
    assert r.exists("w-orphan") == 1
    wait_until(lambda: r.exists("w-orphan") == 0, message="the orphaned lease ran out")
    assert "has ended; its lease is left to run out" in caplog.text
