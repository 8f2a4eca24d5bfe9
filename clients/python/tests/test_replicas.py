"""Replicas synced, as Redisson's ``checkLockSyncedSlaves`` (issue 29): on a primary with a
replica, every grant, renewal and unlock (and semaphore change) waits for the replica
(``WAIT``, pipelined); with the replica stopped (SIGSTOP: it acknowledges nothing), a grant is
given back and `NoSyncedReplicasError` raised, a release or renewal stays applied and is
reported (the release) or logged (the renewal). With no replica, no ``WAIT`` is sent at all."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Iterator, Tuple

import pytest
import redis
import redis.asyncio as aredis

from conftest import Server, blocked_clients, stopped, streaming, wait_until
from redis_lockmod import (
    FairLock,
    Lock,
    NoSyncedReplicasError,
    PermitExpirableSemaphore,
    RateLimiter,
    RateType,
    ReadWriteLock,
    Semaphore,
)
from redis_lockmod import asyncio as alocks

#: A short wait for the replicas, so that an unsynced call fails fast.
SYNC = {"sync_timeout_ms": 200}


@pytest.fixture(scope="module")
def pair() -> Iterator[Tuple[Server, Server]]:
    primary = Server()
    replica = None
    try:
        replica = primary.replica()
        yield primary, replica
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()


@pytest.fixture
def p(pair) -> Iterator[redis.Redis]:
    """A client of the primary, flushed, with the replica in sync again."""
    c = pair[0].client()
    c.flushall()
    assert c.execute_command("WAIT", 1, 5000) == 1
    yield c
    c.close()


@pytest.fixture
def rep(pair) -> Iterator[redis.Redis]:
    c = pair[1].client()
    yield c
    c.close()


def waits(r: redis.Redis) -> int:
    """Calls of WAIT (and WAITAOF) the primary has run."""
    stats = r.info("commandstats")
    return sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("wait", "waitaof"))


def test_every_grant_and_release_waits_for_the_replica_and_the_replica_has_it(p, rep) -> None:
    lock = Lock(p, "s-lock", lease_ms=30_000, **SYNC)
    before = waits(p)
    assert lock.acquire(blocking=False)
    # No waiting here: the call returned once the replica had acknowledged the grant.
    assert rep.hgetall("s-lock") == {lock.owner.encode(): b"1"}
    assert lock.acquire()  # reentry
    assert rep.hgetall("s-lock") == {lock.owner.encode(): b"2"}
    lock.release()
    assert rep.hgetall("s-lock") == {lock.owner.encode(): b"1"}
    lock.release()
    assert rep.exists("s-lock") == 0
    assert waits(p) - before == 4, "one WAIT per call, pipelined with it"


def test_an_unsynced_grant_is_given_back_and_raises(pair, p, rep) -> None:
    lock = FairLock(p, "s-fair", lease_ms=30_000, **SYNC)
    with stopped(pair[1]):
        started = time.monotonic()
        with pytest.raises(NoSyncedReplicasError) as raised:
            lock.acquire(blocking=False)
        assert time.monotonic() - started >= 0.2, "it waited the sync timeout"
        assert raised.value.replicas == 1 and raised.value.synced == 0
        assert p.exists("s-fair") == 0, "the grant was given back on the primary"
        assert lock.token is None and not lock.lost
    assert p.execute_command("WAIT", 1, 5000) == 1
    assert rep.exists("s-fair") == 0
    assert lock.acquire(blocking=False), "usable again once the replica runs"
    lock.release()


def test_an_unsynced_reentry_gives_back_that_hold_only(pair, p) -> None:
    lock = ReadWriteLock(p, "s-rw", lease_ms=30_000, fenced=True, **SYNC).write_lock()
    assert lock.acquire() and lock.token == 1
    with stopped(pair[1]):
        with pytest.raises(NoSyncedReplicasError):
            lock.acquire()
        assert p.hgetall("s-rw") == {b"mode": b"write", f"{lock.owner}:write".encode(): b"1"}
    assert lock.hold_count() == 1 and lock.token == 1
    lock.release()
    assert p.exists("s-rw") == 0


def test_an_unsynced_refusal_is_a_refusal(pair, p) -> None:
    holder = Lock(p, "s-busy", lease_ms=30_000, **SYNC)
    assert holder.acquire()
    other = Lock(p, "s-busy", lease_ms=30_000, **SYNC)
    result = {}
    with stopped(pair[1]):
        # Another thread: another owner.
        t = threading.Thread(target=lambda: result.update(v=other.acquire(blocking=False)))
        t.start()
        t.join()
    assert result == {"v": False}
    holder.release()


def test_a_grant_made_while_parked_is_synced_and_given_back_when_not(pair, p, rep) -> None:
    p.execute_command("LOCK.ACQUIRE", "s-park", "holder", 30_000)
    waiter = Lock(p, "s-park", lease_ms=30_000, **SYNC)
    result = {}

    def wait() -> None:
        try:
            result["v"] = waiter.acquire(timeout=10)
        except NoSyncedReplicasError as e:
            result["e"] = e

    t = threading.Thread(target=wait)
    t.start()
    wait_until(lambda: blocked_clients(p) == 1, message="waiter parked")
    with stopped(pair[1]):
        assert p.execute_command("LOCK.UNLOCK", "s-park", "holder", 30_000) == 1
        t.join()
        assert isinstance(result.get("e"), NoSyncedReplicasError), result
        assert p.exists("s-park") == 0, "the grant was given back"
    # Parked again, granted with the replica running: synced.
    p.execute_command("LOCK.ACQUIRE", "s-park", "holder", 30_000)
    t = threading.Thread(target=lambda: result.update(v=waiter.acquire(timeout=10)))
    t.start()
    wait_until(lambda: blocked_clients(p) == 1, message="waiter parked")
    p.execute_command("LOCK.UNLOCK", "s-park", "holder", 30_000)
    t.join()
    assert result["v"] is True
    held = p.hgetall("s-park")
    assert len(held) == 1 and b"holder" not in held
    assert rep.hgetall("s-park") == held, "the replica had the grant when acquire returned"
    # Held by the waiter thread's owner, which ended: freed by force.
    waiter.force_unlock()


def test_an_unsynced_release_is_applied_and_raises(pair, p) -> None:
    lock = Lock(p, "s-rel", lease_ms=30_000, **SYNC)
    assert lock.acquire()
    with stopped(pair[1]):
        with pytest.raises(NoSyncedReplicasError) as raised:
            lock.release()
        assert raised.value.reply == 1
        assert p.exists("s-rel") == 0, "released on the primary"
    assert lock.hold_count() == 0 and not lock.lost
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()


def test_an_unsynced_renewal_is_logged_and_the_lock_kept(pair, p, caplog) -> None:
    caplog.set_level(logging.WARNING, "redis_lockmod")
    lock = Lock(p, "s-wd", watchdog_lease_ms=3000, watchdog_interval_ms=300, **SYNC)
    assert lock.acquire()
    with stopped(pair[1]):
        wait_until(lambda: "none of the 1 replica(s) acknowledged" in caplog.text, 5, "an unsynced renewal")
    wait_until(lambda: p.execute_command("WAIT", 1, 100) == 1, 5, "the replica back")
    time.sleep(0.7)  # renewals go on
    assert not lock.lost and lock.hold_count() == 1
    assert 2000 < p.pttl("s-wd") <= 3000, "renewed on the primary all along"
    lock.release()


def test_without_sync_nothing_waits(pair, p) -> None:
    lock = Lock(p, "s-off", lease_ms=30_000, sync_replicas=False)
    before = waits(p)
    with stopped(pair[1]):
        assert lock.acquire(blocking=False)
        lock.release()
    assert waits(p) == before


def test_the_rate_limiter_waits_for_no_replica_as_redissons(pair, p) -> None:
    # Redisson sends its rate-limiter bodies with evalWriteAsync, never the synced eval.
    limiter = RateLimiter(p, "s-rate", **SYNC)
    before = waits(p)
    with stopped(pair[1]):
        assert limiter.try_set_rate(RateType.OVERALL, 2, 60_000)
        assert limiter.try_acquire() and limiter.acquire(timeout=1)
        assert limiter.release(1) == 1 and limiter.available_permits() == 1
        assert limiter.set_rate(RateType.OVERALL, 3, 60_000, keep_state=True)
    assert waits(p) == before, "no WAIT sent"


def test_semaphore_grants_unsynced_are_given_back(pair, p) -> None:
    sem = Semaphore(p, "s-sem", **SYNC)
    assert sem.try_set_permits(3)
    psem = PermitExpirableSemaphore(p, "s-psem", lease_ms=30_000, **SYNC)
    assert psem.try_set_permits(2)
    with stopped(pair[1]):
        with pytest.raises(NoSyncedReplicasError):
            sem.acquire(2)
        assert p.get("s-sem") == b"3", "the permits were given back"
        with pytest.raises(NoSyncedReplicasError):
            psem.acquire()
        assert psem.available_permits() == 2 and p.zcard("{s-psem}:timeout") == 0
        with pytest.raises(NoSyncedReplicasError) as raised:
            sem.release(1)
        assert raised.value.reply == 4 and p.get("s-sem") == b"4", "a release stays applied"
    ids = psem.acquire()
    assert ids is not None and psem.acquired_permits() == 1
    psem.release(ids)


def test_asyncio_grants_unsynced_are_given_back(pair, p) -> None:
    async def main() -> None:
        r = aredis.Redis(port=pair[0].port)
        lock = alocks.Lock(r, "s-alock", lease_ms=30_000, **SYNC)
        sem = alocks.Semaphore(r, "s-asem", **SYNC)
        assert await sem.try_set_permits(1)
        assert await lock.acquire()
        await lock.release()
        with stopped(pair[1]):
            with pytest.raises(NoSyncedReplicasError):
                await lock.acquire()
            assert await r.exists("s-alock") == 0
            with pytest.raises(NoSyncedReplicasError):
                await sem.acquire(timeout=5)
            assert await r.get("s-asem") == b"1"
        assert await sem.acquire(timeout=5)
        await sem.release()
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_with_no_replica_no_wait_is_sent_and_info_is_asked_at_most_once_a_second(server, r) -> None:
    before = waits(r)
    info_before = r.info("commandstats").get("cmdstat_info", {}).get("calls", 0)
    lock = Lock(r, "s-none", lease_ms=30_000)
    started = time.monotonic()
    for _ in range(200):
        assert lock.acquire(blocking=False)
        lock.release()
    elapsed = time.monotonic() - started
    assert waits(r) == before
    infos = r.info("commandstats")["cmdstat_info"]["calls"] - info_before - 1  # our own INFO above
    assert 1 <= infos <= elapsed + 2, f"{infos} INFO in {elapsed:.1f} s"


def test_with_an_aof_the_wait_is_waitaof_where_the_server_has_it() -> None:
    # appendfsync always: each write is on disk before it is acknowledged (with everysec a
    # WAITAOF waits up to a second for the next fsync).
    aof = ("--appendonly", "yes", "--appendfsync", "always")
    primary = Server(*aof)
    replica = None
    try:
        replica = Server("--replicaof", "127.0.0.1", str(primary.port), *aof)
        c = replica.client()
        wait_until(lambda: c.info("replication").get("master_link_status") == "up", 10, "replica in sync")
        r = primary.client()
        wait_until(lambda: streaming(r), 10, "the primary streaming to the replica")
        version = tuple(int(x) for x in r.info("server")["redis_version"].split(".")[:2])
        if version >= (7, 2):
            # The replica acknowledges its AOF only once its first rewrite after the sync is done.
            wait_until(lambda: r.execute_command("WAITAOF", 0, 1, 100)[1] == 1, 10, "the replica's AOF on")
        # WAITAOF came with Redis 7.2 (and every Valkey); Redis 7.0 gets WAIT.
        used = "cmdstat_waitaof" if version >= (7, 2) else "cmdstat_wait"
        before = r.info("commandstats").get(used, {}).get("calls", 0)
        # The default second: an fsync on a loaded machine can outlast the other tests' 200 ms.
        lock = Lock(r, "s-aof", lease_ms=30_000, sync_timeout_ms=1000)
        assert lock.acquire()
        stats = r.info("commandstats")
        assert stats.get(used, {}).get("calls") == before + 1, stats
        assert c.hgetall("s-aof") == {lock.owner.encode(): b"1"}
        with stopped(replica):
            with pytest.raises(NoSyncedReplicasError):
                lock.release()
        c.close()
        r.close()
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()
