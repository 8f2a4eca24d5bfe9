"""The fair lock grants waiters in arrival order; fencing tokens grow with every grant."""

from __future__ import annotations

import threading
from typing import List

import redis

from conftest import blocked_clients, wait_until
from redis_lockmod import FairLock, Lock, ReadWriteLock


def test_fair_lock_waiters_are_granted_in_arrival_order(r: redis.Redis) -> None:
    holder = FairLock(r, "fifo", lease_ms=30_000)
    assert holder.acquire()
    order: List[int] = []
    errors = []

    def waiter(i: int) -> None:
        lock = FairLock(r, "fifo", lease_ms=30_000)
        try:
            assert lock.acquire(timeout=10)
            order.append(i)
            lock.release()
        except Exception as e:
            errors.append(e)

    threads = []
    for i in range(6):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        # Queued (visibly, for Redisson clients too) before the next one arrives.
        wait_until(lambda: r.llen("redisson_lock_queue:{fifo}") == i + 1, message=f"waiter {i} queued")
    assert blocked_clients(r) == 6
    holder.release()
    for t in threads:
        t.join()
    assert errors == [] and order == list(range(6))
    assert r.exists("fifo", "redisson_lock_queue:{fifo}", "redisson_lock_timeout:{fifo}") == 0


def test_fencing_tokens_increase_with_every_grant_of_every_kind(r: redis.Redis) -> None:
    tokens: List[int] = []
    lock = Lock(r, "fenced", fenced=True, lease_ms=30_000)
    for _ in range(2):  # a reentrant grant is a grant
        assert lock.acquire()
        tokens.append(lock.token)
    got = {}

    def blocked() -> None:
        other = Lock(r, "fenced", fenced=True, lease_ms=30_000)
        assert other.acquire(timeout=10)
        got["token"] = other.token
        other.release()

    t = threading.Thread(target=blocked)
    t.start()
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter parked")
    lock.release()
    assert lock.token == tokens[-1], "still held once: the last grant's token"
    lock.release()
    assert lock.token is None
    t.join()
    tokens.append(got["token"])
    write = ReadWriteLock(r, "fenced-rw", fenced=True, lease_ms=30_000).write_lock()
    fair = FairLock(r, "fenced-fair", fenced=True, lease_ms=30_000)
    for other in (write, fair):
        first = None
        for _ in range(3):
            assert other.acquire()
            first = first or other.token
            other.release()
        assert other.token is None
        assert r.get("redisson_lock_token:{" + other.name + "}") == b"3"
        assert first == 1
    assert tokens == [1, 2, 3], "strictly increasing, one counter per lock name"
    assert r.get("redisson_lock_token:{fenced}") == b"3" and r.pttl("redisson_lock_token:{fenced}") == -1
