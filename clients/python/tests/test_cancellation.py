"""Issue 34's traps in the Python library: a cancelled wait is over, with its grant given back,
before the cancellation reaches the caller (asyncio task cancel, ``asyncio.timeout``, a thread's
timeout); a lock object shared by threads or tasks excludes them (test_exclusion), and one that
would belong to a throwaway task is refused; out-of-range timeouts saturate to "no limit" or
are a clear error, never a crash in the watchdog's thread.

The grant that races a cancellation is made certain with a gate: the waiter's connection reads
its reply only once the gate opens, and the holder's unlock (which grants the parked waiter)
runs before the task is cancelled."""

from __future__ import annotations

import asyncio
import math
import sys
import threading
import time
from typing import Any, List

import pytest
import redis
import redis.asyncio as aredis

from conftest import parked_async, wait_until
from redis_lockmod import Lock, LockError, Semaphore
from redis_lockmod import asyncio as alocks


def gate_next_wait(transport: Any) -> asyncio.Event:
    """The next connection `transport` takes reads its replies only once the returned event is
    set: a grant the server makes meanwhile stays unread, as if it raced the cancellation."""
    gate = asyncio.Event()
    take = transport._take

    async def gated_take(*args: Any) -> Any:
        transport._take = take
        link = await take(*args)
        read = link.conn.read_response

        async def gated_read(*a: Any, **kw: Any) -> Any:
            await gate.wait()
            link.conn.read_response = read
            return await read(*a, **kw)

        link.conn.read_response = gated_read
        return link

    transport._take = gated_take
    return gate


async def acquire_in(lock: Any, **kw: Any) -> bool:
    """An acquire in a task that could go on to release it."""
    return await lock.acquire(**kw)


async def blocked(r: aredis.Redis) -> int:
    return int((await r.info("clients"))["blocked_clients"])


def test_a_cancelled_acquire_gives_back_a_raced_grant_before_the_cancellation_returns(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        holder = alocks.Lock(r, "c-raced", lease_ms=30_000)
        assert await holder.acquire()
        waiter_lock = alocks.Lock(aredis.Redis(port=server.port), "c-raced", lease_ms=30_000)
        gate = gate_next_wait(waiter_lock._session.transport)
        owner: List[str] = []

        async def waiter() -> None:
            owner.append(waiter_lock.owner)
            await waiter_lock.acquire()

        task = asyncio.create_task(waiter())
        await parked_async(r, 1)
        await r.execute_command("LOCK.UNLOCK", "c-raced", holder.owner, 30_000)  # granted to the waiter
        assert await r.hgetall("c-raced") == {owner[0].encode(): b"1"}
        task.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Nothing the caller does next can see the raced grant: it was given back already.
        assert await r.hgetall("c-raced") == {}
        assert await blocked(r) == 0
        await alocks.close(waiter_lock.client)
        await waiter_lock.client.aclose()
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_after_a_timed_out_acquire_the_next_acquire_of_the_task_is_no_reentry(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = alocks.Lock(r, "c-reentry", lease_ms=30_000)
        gate = gate_next_wait(lock._session.transport)

        async def task_body() -> tuple:
            await r.execute_command("LOCK.ACQUIRE", "c-reentry", "other", 30_000)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    waiting = asyncio.create_task(_unlock_when_parked(r, gate))
                    await lock.acquire()
            # The caller's next steps: a try, then the server's count of its holds.
            got = await lock.acquire(blocking=False)
            state = await r.hgetall("c-reentry")
            await waiting
            return got, state, lock.owner

        got, state, owner = await asyncio.create_task(task_body())
        assert got is True
        assert state == {owner.encode(): b"1"}, "a first hold, not a reentry on a raced grant"
        await alocks.close(r)
        await r.aclose()

    async def _unlock_when_parked(r: aredis.Redis, gate: asyncio.Event) -> None:
        await parked_async(r, 1)
        await r.execute_command("LOCK.UNLOCK", "c-reentry", "other", 30_000)
        await asyncio.sleep(0.5)  # past the timeout: the grant is unread when it fires
        gate.set()

    asyncio.run(main())


def test_an_unlock_right_after_a_cancellation_goes_to_the_next_waiter(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        holder = alocks.Lock(r, "c-next", lease_ms=30_000)
        assert await holder.acquire()
        first = asyncio.create_task(acquire_in(alocks.Lock(r, "c-next", lease_ms=30_000)))
        await parked_async(r, 1)
        second_lock = alocks.Lock(r, "c-next", lease_ms=30_000)
        owner: List[str] = []

        async def second() -> bool:
            owner.append(second_lock.owner)
            return await second_lock.acquire(timeout=30)

        queued = asyncio.create_task(second())
        await parked_async(r, 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await holder.release()
        assert await queued is True
        assert await r.hgetall("c-next") == {owner[0].encode(): b"1"}, "the cancelled waiter got nothing"
        await alocks.close(r)
        await r.aclose()

    for _ in range(5):
        asyncio.run(main())


def test_a_cancelled_semaphore_wait_whose_unblock_comes_too_early_is_unblocked_again(server) -> None:
    # The CLIENT UNBLOCK may reach the server before the wait's own command (two connections):
    # it unblocks nothing then, and must be sent again, or the wait stays parked.
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "c-early")
        transport = sem._session.transport
        unblock = transport.unblock
        calls: List[int] = []

        async def too_early(*args: Any) -> bool:
            calls.append(1)
            if len(calls) == 1:
                return False  # as if the server had not read the wait yet
            return await unblock(*args)

        transport.unblock = too_early
        task = asyncio.create_task(sem.acquire(timeout=60))
        await parked_async(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await blocked(r) == 0, "the wait is gone before the cancellation returned"
        assert len(calls) >= 2
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_cancelled_semaphore_and_rate_limiter_give_a_raced_grant_back_before_returning(server) -> None:
    async def race(r: aredis.Redis, obj: Any, grant: Any, acquire: Any) -> None:
        transport = obj._session.transport
        unblock = transport.unblock

        async def grant_first(*args: Any) -> bool:
            await grant()
            return await unblock(*args)

        transport.unblock = grant_first
        task = asyncio.create_task(acquire())
        await parked_async(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        transport.unblock = unblock

    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        sem = alocks.Semaphore(r, "c-sem")
        await race(r, sem, lambda: r.execute_command("SEMAPHORE.RELEASE", "c-sem", 2), lambda: sem.acquire(2))
        assert await r.get("c-sem") == b"2", "given back before the cancellation returned"
        limiter = alocks.RateLimiter(r, "c-rate")
        await limiter.try_set_rate("OVERALL", 2, 3_600_000)
        assert await limiter.try_acquire(2)
        await race(
            r, limiter, lambda: r.execute_command("RATELIMITER.RELEASE", "c-rate", 2, "CLIENT", limiter.client_id), lambda: limiter.acquire(2)
        )
        assert await r.zcard("{c-rate}:permits") == 0, "given back before the cancellation returned"
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_cancelled_acquire_without_client_unblock_settles_by_asking_before_returning(server, r: redis.Redis) -> None:
    r.execute_command("ACL", "SETUSER", "nounblock", "on", ">pw", "~*", "&*", "+@all", "-client|unblock")

    async def main() -> None:
        c = aredis.Redis(port=server.port, username="nounblock", password="pw")
        holder = alocks.Lock(c, "c-noperm", lease_ms=30_000)
        assert await holder.acquire()
        waiter = alocks.Lock(aredis.Redis(port=server.port, username="nounblock", password="pw"), "c-noperm", lease_ms=30_000)
        gate = gate_next_wait(waiter._session.transport)
        task = asyncio.create_task(acquire_in(waiter))
        await parked_async(c, 1)
        await c.execute_command("LOCK.UNLOCK", "c-noperm", holder.owner, 30_000)
        task.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await c.hgetall("c-noperm") == {}, "closed, settled with LOCK.HOLDS and given back"
        for client in (waiter.client, c):
            await alocks.close(client)
            await client.aclose()

    try:
        asyncio.run(main())
    finally:
        r.execute_command("ACL", "DELUSER", "nounblock")


def test_a_threads_timed_out_acquire_leaves_nothing_for_the_next_unlock(server, r: redis.Redis) -> None:
    holder = Lock(r, "c-thread", lease_ms=30_000)
    shared = Lock(r, "c-thread", lease_ms=30_000)
    assert holder.acquire()
    out: dict = {}

    def timed_out() -> None:
        out["first"] = shared.acquire(timeout=0.3)
        out["again"] = shared.acquire(blocking=False)
        out["holds"] = shared.hold_count()

    def queued() -> None:
        out["queued"] = shared.acquire(timeout=30)
        out["owner"] = shared.owner
        shared.release()

    t1 = threading.Thread(target=timed_out)
    t1.start()
    wait_until(lambda: int(r.info("clients")["blocked_clients"]) == 1, 10, "the first waiter parked")
    t2 = threading.Thread(target=queued)
    t2.start()
    wait_until(lambda: int(r.info("clients")["blocked_clients"]) == 2, 10, "the second waiter parked")
    t1.join()
    holder.release()
    t2.join()
    assert out == {"first": False, "again": False, "holds": 0, "queued": True, "owner": out["owner"]}
    assert r.exists("c-thread") == 0


def test_an_acquire_run_as_a_task_of_its_own_is_refused_before_anything_is_sent(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = alocks.Lock(r, "c-own-task", lease_ms=30_000)
        with pytest.raises(RuntimeError, match="task of its own"):
            await asyncio.create_task(lock.acquire())
        if sys.version_info < (3, 12):
            with pytest.raises(RuntimeError, match="task of its own"):
                await asyncio.wait_for(lock.acquire(), 5)
        else:  # wait_for runs it in the caller's task since 3.12
            assert await asyncio.wait_for(lock.acquire(), 5)
            await lock.release()
        assert await r.exists("c-own-task") == 0, "nothing held by a task that ended"
        async with asyncio.timeout(5):  # the way that works everywhere
            assert await lock.acquire()
        await lock.release()
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("timeout", [math.inf, 1e12, -1, None], ids=["inf", "1e12", "-1", "None"])
def test_a_timeout_past_any_real_wait_waits_without_limit(server, r: redis.Redis, timeout: Any) -> None:
    holder = Lock(r, "c-forever", lease_ms=30_000)
    assert holder.acquire()
    waiter = Lock(r, "c-forever", lease_ms=30_000)
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("v", waiter.acquire(timeout=timeout) and waiter.release()))
    t.start()
    wait_until(lambda: int(r.info("clients")["blocked_clients"]) == 1, 10, "parked")
    holder.release()
    t.join()
    assert "v" in out and r.exists("c-forever") == 0

    async def also_asyncio() -> None:
        ar = aredis.Redis(port=server.port)
        sem = alocks.Semaphore(ar, "c-forever-sem")
        task = asyncio.create_task(sem.acquire(timeout=timeout))
        await parked_async(ar, 1)
        await sem.release()
        assert await task is True
        await alocks.close(ar)
        await ar.aclose()

    asyncio.run(also_asyncio())


@pytest.mark.parametrize(
    "timeout, error",
    [(math.nan, ValueError), (-5, ValueError), (-0.5, ValueError), (True, TypeError), ("5", TypeError)],
    ids=["nan", "-5", "-0.5", "bool", "str"],
)
def test_a_timeout_that_means_nothing_is_a_clear_error_and_sends_nothing(r: redis.Redis, timeout: Any, error: Any) -> None:
    lock = Lock(r, "c-bad-timeout", lease_ms=30_000)
    sem = Semaphore(r, "c-bad-timeout-sem")
    calls = int(r.info("stats")["total_commands_processed"])
    with pytest.raises(error, match="timeout"):
        lock.acquire(timeout=timeout)
    with pytest.raises(error, match="timeout"):
        sem.acquire(timeout=timeout)
    with pytest.raises(error, match="timeout"):
        Lock(r, "c-bad-timeout", timeout=timeout)
    assert int(r.info("stats")["total_commands_processed"]) == calls + 1, "only the INFO above ran"
    assert r.exists("c-bad-timeout") == 0


@pytest.mark.parametrize("value", [math.inf, math.nan, 0, -1, 1e10])
def test_a_command_timeout_out_of_range_is_a_clear_error(r: redis.Redis, value: float) -> None:
    with pytest.raises(ValueError, match="command_timeout"):
        Lock(r, "c-cmd-timeout", command_timeout=value)


def test_a_watchdog_lease_of_millennia_does_not_kill_the_watchdog_thread(r: redis.Redis) -> None:
    crashed: List[BaseException] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: crashed.append(args.exc_value)
    try:
        eternal = Lock(r, "c-eternal", watchdog_lease_ms=10**14)  # 3,170 years, renewed every 1,057
        assert eternal.acquire()
        time.sleep(0.2)  # the watchdog thread goes to sleep until its next renewal
        short = Lock(r, "c-short", watchdog_lease_ms=1_000, watchdog_interval_ms=100)
        assert short.acquire()
        time.sleep(1.5)  # past the short lease: only a renewal keeps it
        assert short.owned(), "the watchdog still renews"
        assert crashed == []
        short.release()
        eternal.release()
    finally:
        threading.excepthook = hook
    with pytest.raises(ValueError, match="watchdog_interval_ms"):
        Lock(r, "c-bad-interval", watchdog_lease_ms=1_000, watchdog_interval_ms=1_000)


def test_an_interrupted_release_is_settled_by_asking_not_sent_again(r: redis.Redis) -> None:
    # Ctrl-C after the unlock's reply was read and its latch's DEL sent: sending the same
    # request again would find no latch and release a second hold.
    lock = Lock(r, "c-interrupted", lease_ms=30_000)
    assert lock.acquire() and lock.acquire()
    transport = lock._session.transport
    send_after = transport._send_after

    def interrupted(*args: Any) -> None:
        send_after(*args)
        transport._send_after = send_after
        raise KeyboardInterrupt

    transport._send_after = interrupted
    with pytest.raises(KeyboardInterrupt):
        lock.release()
    assert r.hgetall("c-interrupted") == {lock.owner.encode(): b"1"}
    lock.release()  # the caller's retry
    assert r.hgetall("c-interrupted") == {lock.owner.encode(): b"1"}, "settled as applied, not released twice"
    assert lock.hold_count() == 1
    lock.release()
    assert r.exists("c-interrupted") == 0
    with pytest.raises(LockError):
        lock.release()
