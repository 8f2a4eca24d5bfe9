"""Each lock kind against the real module: reentrancy per thread and per task, hold counts,
the keyspace Redisson would read, and the queries (locked, owned, remaining_ms, force_unlock)."""

from __future__ import annotations

import asyncio
import gc
import re
import threading
import weakref

import pytest
import redis
import redis.asyncio as aredis

import redis_lockmod
from conftest import ROOT, wait_until
from redis_lockmod import FairLock, Lock, LockLostError, LockNotOwnedError, ReadWriteLock
from redis_lockmod import asyncio as alocks


def in_thread(fn):
    """Runs `fn` in another thread (another owner) and returns its result."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", fn()))
    t.start()
    t.join()
    return out["v"]


def test_owner_names_are_redissons_client_uuid_and_thread_id(r: redis.Redis) -> None:
    a, b = Lock(r, "o1"), Lock(r, "o2")
    assert re.fullmatch(r"[0-9a-f-]{36}:\d+", a.owner)
    assert a.owner == b.owner, "one client: one uuid; one thread: one id"
    assert in_thread(lambda: a.owner) != a.owner
    assert Lock(redis.Redis(port=r.connection_pool.connection_kwargs["port"]), "o1").owner != a.owner


def test_the_reentrant_lock_counts_holds_per_thread_and_frees_the_key_on_the_last_release(r: redis.Redis) -> None:
    lock = Lock(r, "orders", lease_ms=30_000)
    assert lock.acquire() and lock.acquire(blocking=False) and lock.acquire(timeout=1)
    assert lock.hold_count() == 3 and lock.owned() and lock.locked()
    assert r.hgetall("orders") == {lock.owner.encode(): b"3"}
    assert 29_000 < lock.remaining_ms() <= 30_000
    assert in_thread(lambda: (lock.acquire(blocking=False), lock.owned(), lock.hold_count())) == (False, False, 0)
    for left in (2, 1):
        lock.release()
        assert r.hgetall("orders") == {lock.owner.encode(): str(left).encode()}
    lock.release()
    assert r.exists("orders") == 0 and not lock.locked() and lock.remaining_ms() == -2
    with pytest.raises(LockNotOwnedError):
        lock.release()
    # Every unlock carried a latch (test_lost_replies), deleted once its reply arrived.
    wait_until(lambda: r.keys("redisson_unlock_latch:{orders}:*") == [], 5, "the latches deleted")


def test_the_read_write_lock_shares_reads_excludes_writes_and_lets_the_writer_read(r: redis.Redis) -> None:
    rw = ReadWriteLock(r, "doc", lease_ms=30_000)
    read, write = rw.read_lock(), rw.write_lock()
    assert write.acquire() and write.acquire() and read.acquire()
    assert (read.hold_count(), write.hold_count()) == (1, 2)
    owner = write.owner.encode()
    assert r.hgetall("doc") == {b"mode": b"write", owner + b":write": b"2", owner: b"1"}
    assert write.locked() and not read.locked()
    assert in_thread(lambda: read.acquire(blocking=False)) is False
    write.release()
    write.release()
    assert r.hgetall("doc") == {b"mode": b"read", owner: b"1"}, "downgraded to its read hold"
    assert in_thread(lambda: (read.acquire(blocking=False), read.hold_count())) == (True, 1)
    assert in_thread(lambda: write.acquire(blocking=False)) is False
    read.release()
    assert r.hlen("doc") == 2, "the other reader still holds"


def test_the_fair_lock_is_reentrant_and_its_try_never_queues(r: redis.Redis) -> None:
    lock = FairLock(r, "fair", lease_ms=30_000)
    assert lock.acquire() and lock.acquire()
    assert lock.hold_count() == 2
    assert in_thread(lambda: lock.acquire(blocking=False)) is False
    assert r.exists("redisson_lock_queue:{fair}", "redisson_lock_timeout:{fair}") == 0, "NOQUEUE"
    lock.release()
    lock.release()
    assert r.keys("fair*") == []


def test_force_unlock_frees_any_holder_and_the_holder_learns_on_release(r: redis.Redis) -> None:
    lock = Lock(r, "forced", lease_ms=30_000)
    assert in_thread(lambda: lock.acquire()) is True
    assert lock.locked() and not lock.owned()
    assert lock.force_unlock() is True and lock.force_unlock() is False
    assert r.exists("forced") == 0
    assert lock.acquire(blocking=False)
    r.delete("forced")  # as if the lease ran out
    with pytest.raises(LockLostError):
        lock.release()
    rw = ReadWriteLock(r, "rwf", lease_ms=30_000)
    assert rw.read_lock().acquire()
    assert rw.write_lock().force_unlock() is False, "not in write mode"
    assert rw.read_lock().force_unlock() is True and r.exists("rwf") == 0


def test_options_are_checked() -> None:
    r = redis.Redis()
    with pytest.raises(ValueError):
        Lock(r, "x", lease_ms=0)
    with pytest.raises(ValueError):
        Lock(r, "")
    with pytest.raises(ValueError):
        redis_lockmod.ReadLock(r, "x", fenced=True)


def test_asyncio_locks_are_reentrant_per_task(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        lock = alocks.Lock(r, "alock", lease_ms=30_000)
        async with lock:
            async with lock:
                assert await lock.hold_count() == 2
                assert await r.hgetall("alock") == {lock.owner.encode(): b"2"}

                async def other() -> tuple:
                    return await lock.acquire(blocking=False), await lock.owned(), lock.owner

                got, owned, owner = await asyncio.create_task(other())
                assert (got, owned) == (False, False) and owner != lock.owner
        assert await r.exists("alock") == 0 and not await lock.locked()
        rw = alocks.ReadWriteLock(r, "adoc", lease_ms=30_000)
        async with rw.write_lock():
            async with rw.read_lock():
                assert await rw.read_lock().hold_count() == 1 and await rw.write_lock().hold_count() == 1
        fair = alocks.FairLock(r, "afair", lease_ms=30_000)
        async with fair:
            assert await fair.remaining_ms() > 29_000
        assert await r.exists("alock", "adoc", "afair") == 0
        with pytest.raises(LockNotOwnedError):
            await fair.release()
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_lock_keeps_the_client_it_was_given_alive_and_only_while_it_lives(server) -> None:
    # The README's first line: a client made inline has no other reference than the lock.
    for kind in (Lock, FairLock):
        with kind(redis.Redis(port=server.port), f"inline-{kind.__name__}") as lock:
            assert lock.owned() and gc.collect() >= 0 and lock.hold_count() == 1
        assert not lock.locked()
    rw = ReadWriteLock(redis.Redis(port=server.port), "inline-rw").write_lock()
    gc.collect()
    with rw:
        assert rw.owned()
    # The library's own registry holds the client weakly: once its locks are gone, it goes.
    client = redis.Redis(port=server.port)
    ref = weakref.ref(client)
    lock = Lock(client, "inline-gone", lease_ms=30_000)
    with lock:
        pass
    lock2 = ReadWriteLock(client, "inline-gone-rw")
    del client
    gc.collect()
    assert ref() is lock.client is lock2.client
    del lock, lock2
    gc.collect()
    assert ref() is None, "a client outlived its locks: something else keeps it"


def test_an_asyncio_lock_keeps_the_client_it_was_given_alive(server) -> None:
    async def main() -> None:
        async with alocks.Lock(aredis.Redis(port=server.port), "ainline") as lock:
            gc.collect()
            assert await lock.hold_count() == 1
        assert not await lock.locked()
        w = alocks.ReadWriteLock(aredis.Redis(port=server.port), "ainline-rw").write_lock()
        gc.collect()
        async with w:
            assert await w.owned()
        client = aredis.Redis(port=server.port)
        ref = weakref.ref(client)
        lock = alocks.FairLock(client, "ainline-fair", lease_ms=30_000)
        async with lock:
            pass
        await alocks.close(client)
        await client.aclose()
        del client, lock
        gc.collect()
        assert ref() is None, "an asyncio client outlived its locks"

    asyncio.run(main())


def test_the_version_is_the_modules() -> None:
    cargo = (ROOT / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.M).group(1)
    pyproject = (ROOT / "clients" / "python" / "pyproject.toml").read_text()
    assert redis_lockmod.__version__ == version
    assert f'version = "{version}"' in pyproject
