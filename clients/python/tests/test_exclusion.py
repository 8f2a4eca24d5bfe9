"""Mutual exclusion under contention: 16 threads (and 16 asyncio tasks) x 100 acquisitions of
one lock of each kind. Inside the lock each worker does a read-modify-write of a shared counter
with a yield in the middle, so any overlap loses an increment; a gauge records the most
holders seen at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict

import pytest
import redis
import redis.asyncio as aredis

from redis_lockmod import FairLock, Lock, ReadWriteLock
from redis_lockmod import asyncio as alocks

WORKERS, ROUNDS = 16, 100

SYNC: Dict[str, Callable[[Any, str], Any]] = {
    "reentrant": lambda r, n: Lock(r, n),
    "write": lambda r, n: ReadWriteLock(r, n).write_lock(),
    "fair": lambda r, n: FairLock(r, n, lease_ms=30_000),
}
ASYNC: Dict[str, Callable[[Any, str], Any]] = {
    "reentrant": lambda r, n: alocks.Lock(r, n),
    "write": lambda r, n: alocks.ReadWriteLock(r, n).write_lock(),
    "fair": lambda r, n: alocks.FairLock(r, n, lease_ms=30_000),
}


class Gauge:
    """Counts holders inside; remembers the most at once and lost increments."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.inside = self.most = self.counter = 0

    def enter(self) -> None:
        with self.mutex:
            self.inside += 1
            self.most = max(self.most, self.inside)

    def leave(self) -> None:
        with self.mutex:
            self.inside -= 1


@pytest.mark.parametrize("kind", SYNC)
def test_sixteen_threads_never_hold_the_lock_together(r: redis.Redis, kind: str) -> None:
    lock = SYNC[kind](r, f"mx-{kind}")
    g = Gauge()
    errors = []

    def worker() -> None:
        try:
            for _ in range(ROUNDS):
                with lock:
                    g.enter()
                    n = g.counter
                    time.sleep(0)
                    g.counter = n + 1
                    g.leave()
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (g.most, g.counter) == (1, WORKERS * ROUNDS)
    assert r.exists(f"mx-{kind}") == 0, "every hold released"


def test_readers_share_and_writers_exclude_under_sixteen_threads(r: redis.Redis) -> None:
    rw = ReadWriteLock(r, "mx-rw")
    mutex = threading.Lock()
    state = {"readers": 0, "writers": 0, "bad": 0, "most_readers": 0, "writes": 0}
    errors = []

    def worker(i: int) -> None:
        writer = i % 2 == 0
        lock = rw.write_lock() if writer else rw.read_lock()
        try:
            for _ in range(ROUNDS // 2):
                with lock:
                    with mutex:
                        state["writers" if writer else "readers"] += 1
                        state["most_readers"] = max(state["most_readers"], state["readers"])
                        if state["writers"] > 1 or (state["writers"] and state["readers"]):
                            state["bad"] += 1
                    time.sleep(0)
                    with mutex:
                        state["writers" if writer else "readers"] -= 1
                        state["writes"] += writer
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and state["bad"] == 0
    assert state["writes"] == WORKERS // 2 * (ROUNDS // 2)
    assert r.exists("mx-rw") == 0


@pytest.mark.parametrize("kind", ASYNC)
def test_sixteen_tasks_never_hold_the_lock_together(server, kind: str) -> None:
    async def main() -> Gauge:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = ASYNC[kind](r, f"amx-{kind}")
        g = Gauge()

        async def worker() -> None:
            for _ in range(ROUNDS):
                async with lock:
                    g.enter()
                    n = g.counter
                    await asyncio.sleep(0)
                    g.counter = n + 1
                    g.leave()

        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        assert await r.exists(f"amx-{kind}") == 0
        await alocks.close(r)
        await r.aclose()
        return g

    g = asyncio.run(main())
    assert (g.most, g.counter) == (1, WORKERS * ROUNDS)
