"""Redisson's synchronizers (issue 26) against the real module: `Semaphore`,
`PermitExpirableSemaphore` and `CountDownLatch`, sync and asyncio, on Redisson's layout; waits
in the server (BLOCK), timeouts, and cancelled waits that leave no permit behind."""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import threading
import time
import weakref
from typing import List

import pytest
import redis
import redis.asyncio as aredis

from conftest import blocked_clients, wait_until
from redis_lockmod import (
    CountDownLatch,
    LockLostError,
    LockNotOwnedError,
    LockTimeoutError,
    PermitExpirableSemaphore,
    Semaphore,
)
from redis_lockmod import _sync
from redis_lockmod import asyncio as alocks

HEX_ID = re.compile(r"[0-9a-f]{32}")


def in_thread(fn):
    """Starts `fn` in a thread; returns the thread and where its result lands."""
    out: dict = {}

    def run() -> None:
        try:
            out["v"] = fn()
        except BaseException as e:  # reported by the test
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


# -- no server ---------------------------------------------------------------------------------
def test_timeouts_translate_to_block_as_for_the_locks() -> None:
    assert _sync.wait(True, None, 10.0) == (0, None), "no limit: BLOCK 0, no socket timeout"
    assert _sync.wait(True, -1, 10.0) == (0, None)
    assert _sync.wait(True, 2.5, 10.0) == (2500, 12.5), "the wait goes on top of the command timeout"
    assert _sync.wait(True, 0.0001, 10.0)[0] == 1, "never BLOCK 0 for a short timeout"
    assert _sync.wait(True, 0, 10.0) == (None, 10.0), "0 tries once"
    assert _sync.wait(False, 5, 10.0) == (None, 10.0)


def test_arguments_are_checked_before_anything_is_sent() -> None:
    r = redis.Redis(port=1)  # never connected: every check fails first
    sem, psem, latch = Semaphore(r, "s"), PermitExpirableSemaphore(r, "p", lease_ms=1000), CountDownLatch(r, "l")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError):
            sem.acquire(bad)
        with pytest.raises(ValueError):
            sem.release(bad)
        with pytest.raises(ValueError):
            psem.acquire(bad)
    for bad in (-1, 1.5, None):
        with pytest.raises(ValueError):
            sem.try_set_permits(bad)
        with pytest.raises(ValueError):
            latch.try_set_count(bad)
    with pytest.raises(ValueError):
        sem.add_permits(1.0)
    with pytest.raises(ValueError):
        sem.try_set_permits(1, lease_ms=0)
    with pytest.raises(ValueError):
        PermitExpirableSemaphore(r, "p", lease_ms=-5)
    with pytest.raises(ValueError):
        psem.release([])
    with pytest.raises(ValueError):
        Semaphore(r, "")
    assert repr(sem) == "<Semaphore 's'>" and sem.client is r


# -- Semaphore -----------------------------------------------------------------------------------
def test_a_semaphore_counts_permits_in_redissons_key(r: redis.Redis) -> None:
    sem = Semaphore(r, "pool")
    assert sem.available_permits() == 0
    assert sem.try_set_permits(3) is True and sem.try_set_permits(5) is False
    assert r.get("pool") == b"3" and r.pttl("pool") == -1
    assert sem.acquire(2) is True and r.get("pool") == b"1"
    assert sem.acquire(2, blocking=False) is False, "only 1 left"
    assert sem.acquire(2, timeout=0) is False
    assert sem.release(2) == 3 and sem.available_permits() == 3
    sem.add_permits(2)
    assert sem.available_permits() == 5
    sem.add_permits(-4)
    assert sem.available_permits() == 1
    assert sem.drain_permits() == 1 and sem.available_permits() == 0
    assert Semaphore(r, "lease").try_set_permits(1, lease_ms=30_000) and 29_000 < r.pttl("lease") <= 30_000


def test_with_a_semaphore_holds_a_permit_for_the_block(r: redis.Redis) -> None:
    sem = Semaphore(r, "with", timeout=0.05)
    sem.try_set_permits(2)
    with sem:
        assert sem.available_permits() == 1
        with sem.hold(1):
            assert sem.available_permits() == 0
            with pytest.raises(LockTimeoutError, match="semaphore 'with'"):
                with sem:
                    pass
        assert sem.available_permits() == 1
    assert sem.available_permits() == 2
    with pytest.raises(RuntimeError):
        with sem.hold(2, timeout=None):
            raise RuntimeError("released anyway")
    assert sem.available_permits() == 2
    with pytest.raises(LockTimeoutError, match="3 permit"):
        with sem.hold(3):
            pass


def test_a_waiting_acquire_parks_in_the_server_and_is_served_in_arrival_order(r: redis.Redis) -> None:
    sem = Semaphore(r, "fifo")
    sem.try_set_permits(0)
    order: List[int] = []
    lock = threading.Lock()

    def waiter(i: int, n: int):
        def run() -> bool:
            ok = Semaphore(r, "fifo").acquire(n, timeout=10)
            with lock:
                order.append(i)
            return ok

        return run

    # A waiter for 3, then one for 1: the second is not served before the first.
    first, got3 = in_thread(waiter(0, 3))
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter for 3 parked")
    second, got1 = in_thread(waiter(1, 1))
    wait_until(lambda: blocked_clients(r) == 2, message="the waiter for 1 parked")
    sem.release(1)
    time.sleep(0.1)
    assert order == [] and blocked_clients(r) == 2, "1 permit must not overtake the waiter for 3"
    sem.release(2)
    first.join(10)
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter for 3 served")
    sem.release(1)
    second.join(10)
    assert got3 == {"v": True} and got1 == {"v": True} and order == [0, 1]
    assert sem.available_permits() == 0


def test_a_waiting_acquire_times_out_with_false_and_leaves_no_waiter(r: redis.Redis) -> None:
    sem = Semaphore(r, "tmo")
    start = time.monotonic()
    assert sem.acquire(timeout=0.2) is False
    assert 0.15 < time.monotonic() - start < 5
    assert blocked_clients(r) == 0 and sem.available_permits() == 0


# -- PermitExpirableSemaphore --------------------------------------------------------------------
def test_expirable_permits_have_ids_and_leases_in_redissons_zset(r: redis.Redis) -> None:
    psem = PermitExpirableSemaphore(r, "jobs", lease_ms=30_000)
    assert psem.try_set_permits(3) is True and psem.try_set_permits(1) is False
    ids = psem.acquire(2)
    assert ids is not None and len(ids) == 2 and all(HEX_ID.fullmatch(i) for i in ids)
    assert r.get("jobs") == b"1" and r.zcard("{jobs}:timeout") == 2
    deadline = r.zscore("{jobs}:timeout", bytes.fromhex(ids[0]))
    assert abs(deadline - (time.time() * 1000 + 30_000)) < 5_000, "an absolute expiry in ms"
    assert psem.available_permits() == 1 and psem.acquired_permits() == 2
    assert psem.acquire(2, blocking=False) is None
    assert psem.update_lease(ids[0], 60_000) is True
    assert r.zscore("{jobs}:timeout", bytes.fromhex(ids[0])) > deadline + 20_000
    assert psem.try_release(ids[0]) is True and psem.try_release(ids[0]) is False
    with pytest.raises(LockNotOwnedError, match="not released"):
        psem.release(ids[0])
    assert psem.update_lease(ids[0], 1_000) is False
    psem.release([ids[1]])
    assert psem.available_permits() == 3 and psem.acquired_permits() == 0
    psem.set_permits(5)
    assert psem.available_permits() == 5
    # Without a lease (here or on the semaphore) a permit never expires, as Redisson's acquire().
    forever = PermitExpirableSemaphore(r, "jobs").acquire()
    assert r.zscore("{jobs}:timeout", bytes.fromhex(forever[0])) == 922_337_203_685_477


def test_an_expired_permit_comes_back_by_itself_and_its_hold_learns_it(r: redis.Redis) -> None:
    psem = PermitExpirableSemaphore(r, "short", lease_ms=150)
    psem.try_set_permits(1)
    with pytest.raises(LockLostError, match="expired before release"):
        with psem.hold() as ids:
            assert len(ids) == 1 and psem.available_permits() == 0
            # Back at its deadline by the server's timer, nobody calling.
            wait_until(lambda: r.get("short") == b"1", message="the expired permit back")
    assert psem.available_permits() == 1 and r.zcard("{short}:timeout") == 0
    with psem.hold(lease_ms=30_000) as ids:
        assert psem.acquired_permits() == 1
    assert psem.available_permits() == 1


def test_an_expired_permit_goes_to_a_parked_waiter(r: redis.Redis) -> None:
    psem = PermitExpirableSemaphore(r, "handoff", lease_ms=30_000)
    psem.try_set_permits(1)
    assert psem.acquire(lease_ms=200) is not None
    t, out = in_thread(lambda: psem.acquire(timeout=10))
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter parked")
    t.join(10)
    assert out["v"] is not None and len(out["v"]) == 1
    assert psem.acquired_permits() == 1


# -- CountDownLatch ------------------------------------------------------------------------------
def test_a_count_down_latch_opens_at_zero_and_wakes_every_waiter(r: redis.Redis) -> None:
    latch = CountDownLatch(r, "ready")
    assert latch.wait(timeout=0) is True, "an absent latch is open"
    assert latch.try_set_count(2) is True and latch.try_set_count(5) is False
    assert r.get("ready") == b"2" and latch.count() == 2
    assert latch.wait(timeout=0) is False and latch.wait(timeout=0.05) is False
    waiters = [in_thread(lambda: CountDownLatch(r, "ready").wait(timeout=10)) for _ in range(3)]
    wait_until(lambda: blocked_clients(r) == 3, message="3 waiters parked")
    assert latch.count_down() == 1 and blocked_clients(r) == 3
    assert latch.count_down() == 0
    for t, out in waiters:
        t.join(10)
        assert out == {"v": True}
    assert r.exists("ready") == 0 and latch.count() == 0
    assert latch.count_down() == 0 and r.exists("ready") == 0, "nothing written on an absent latch"


def test_synchronizers_keep_the_client_they_were_given_alive(server) -> None:
    sem = Semaphore(redis.Redis(port=server.port), "inline")
    gc.collect()
    sem.try_set_permits(1)
    with sem:
        pass
    client = redis.Redis(port=server.port)
    ref = weakref.ref(client)
    latch = CountDownLatch(client, "inline-latch")
    assert latch.count() == 0
    del client
    gc.collect()
    assert ref() is latch.client
    del latch
    gc.collect()
    assert ref() is None


# -- asyncio -------------------------------------------------------------------------------------
async def parked(r: aredis.Redis, n: int) -> None:
    deadline = time.monotonic() + 10
    while int((await r.info("clients"))["blocked_clients"]) != n:
        assert time.monotonic() < deadline, f"never {n} parked"
        await asyncio.sleep(0.005)


def test_asyncio_synchronizers(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "apool", timeout=0.05)
        assert await sem.try_set_permits(2)
        async with sem:
            async with sem.hold(1):
                assert await sem.available_permits() == 0
                with pytest.raises(LockTimeoutError):
                    async with sem:
                        pass
        assert await sem.available_permits() == 2
        waiting = asyncio.create_task(sem.acquire(3, timeout=10))
        await parked(r, 1)
        assert await sem.release(1) == 3
        assert await waiting is True and await sem.available_permits() == 0

        psem = alocks.PermitExpirableSemaphore(r, "ajobs", lease_ms=30_000)
        assert await psem.try_set_permits(1)
        async with psem.hold() as ids:
            assert HEX_ID.fullmatch(ids[0]) and await psem.acquired_permits() == 1
            assert await psem.acquire(blocking=False) is None
            assert await psem.update_lease(ids[0], 10_000)
        assert await psem.available_permits() == 1
        with pytest.raises(LockNotOwnedError):
            await psem.release(ids)

        latch = alocks.CountDownLatch(r, "aready")
        assert await latch.try_set_count(1) and await latch.count() == 1
        waiting = asyncio.create_task(latch.wait(timeout=10))
        await parked(r, 1)
        assert await latch.count_down() == 0 and await waiting is True
        assert await latch.wait(timeout=0.05) is True
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_cancelled_asyncio_wait_leaves_the_server_queue_and_takes_no_permit(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "acancel")
        psem = alocks.PermitExpirableSemaphore(r, "apcancel", lease_ms=30_000)
        latch = alocks.CountDownLatch(r, "alcancel")
        await latch.try_set_count(1)
        for wait in (lambda: sem.acquire(timeout=10), lambda: psem.acquire(), lambda: latch.wait()):
            task = asyncio.create_task(wait())
            await parked(r, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await parked(r, 0)
        # asyncio.timeout / wait_for cancel the same way.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(sem.acquire(), 0.1)
        await parked(r, 0)
        await alocks.close(r)
        await sem.release(1)
        assert await sem.available_permits() == 1, "the cancelled waiters took nothing"
        assert await psem.available_permits() == 0 and await psem.acquired_permits() == 0
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_grant_that_raced_the_cancellation_is_given_back(server, caplog) -> None:
    caplog.set_level(logging.INFO, "redis_lockmod")

    async def race(r: aredis.Redis, obj, grant, acquire) -> None:
        # The race made certain: the grant happens after the task was cancelled and before
        # its CLIENT UNBLOCK reaches the server, which then finds it no longer parked.
        transport = obj._session.transport
        unblock = transport.unblock

        async def grant_first(*args):
            await grant()
            return await unblock(*args)

        transport.unblock = grant_first
        task = asyncio.create_task(acquire())
        await parked(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await alocks.close(r)  # waits for the background settling
        transport.unblock = unblock

    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "arace")
        await race(r, sem, lambda: r.execute_command("SEMAPHORE.RELEASE", "arace", 2), lambda: sem.acquire(2))
        assert await sem.available_permits() == 2, "the raced grant was given back"
        psem = alocks.PermitExpirableSemaphore(r, "aprace", lease_ms=30_000)
        await psem.try_set_permits(0)
        await race(r, psem, lambda: r.execute_command("PSEMAPHORE.SETPERMITS", "aprace", 1), lambda: psem.acquire())
        assert await psem.available_permits() == 1 and await psem.acquired_permits() == 0
        await r.aclose()

    asyncio.run(main())
    assert caplog.text.count("granted to a cancelled acquire") == 2


def test_a_cancelled_wait_whose_unblock_meets_its_grant_in_one_server_iteration_gives_it_back(server) -> None:
    # A grant and the CLIENT UNBLOCK in one event-loop iteration of the server (both pipelined
    # on one connection): the module answers the unblock with the grant (Redis 7.0 alone would
    # drop that reply), so the settling gives it back, in bounded time.
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "asameloop", command_timeout=0.3)
        transport = sem._session.transport

        async def same_iteration(address, client_id, timeout):
            pipe = r.pipeline(transaction=False)
            pipe.execute_command("SEMAPHORE.RELEASE", "asameloop", 1)
            pipe.execute_command("CLIENT", "UNBLOCK", client_id, "TIMEOUT")
            return int((await pipe.execute())[1]) == 1

        transport.unblock = same_iteration
        task = asyncio.create_task(sem.acquire())
        await parked(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        start = time.monotonic()
        await alocks.close(r)  # the background settling ends
        assert time.monotonic() - start < 5
        await parked(r, 0)
        assert await sem.available_permits() == 1, "the grant that met the unblock was given back"
        await r.aclose()

    asyncio.run(main())
