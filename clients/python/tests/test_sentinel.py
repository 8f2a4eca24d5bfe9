"""Sentinel (issue 29): locks made from a Sentinel-managed client (``Sentinel(...).master_for``)
follow a failover. A primary, a replica and three sentinels (down after 1 s); locks held (synced
to the replica) and waiters parked (sync and asyncio), then the primary is killed: the sentinels
promote the replica, the parked waiters' lost waits are settled there (not granted) and become
new waits on the new primary, which are granted when the lock is released there; the held locks
are still held on the new primary and the watchdog goes on renewing them there."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict

import redis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel

from conftest import blocked_clients, wait_until
from redis_lockmod import FairLock, Lock
from redis_lockmod import asyncio as alocks


def renewals(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_lock.renew", {}).get("calls", 0))


def test_locks_and_waiters_follow_a_sentinel_failover(watched) -> None:
    primary, replica, sentinels = watched
    m = sentinels.master()
    held = Lock(m, "held", watchdog_lease_ms=10_000, watchdog_interval_ms=500)
    fixed = FairLock(m, "fixed", lease_ms=60_000)
    assert held.acquire() and fixed.acquire()  # each synced to the replica before it returns
    old = primary.client()
    for name in ("busy", "abusy"):
        old.execute_command("LOCK.ACQUIRE", name, "holder", 60_000)
    assert old.execute_command("WAIT", 1, 5000) == 1

    result: Dict[str, Any] = {}
    waiter = Lock(m, "busy", lease_ms=60_000)

    def wait_sync() -> None:
        try:
            result["sync"] = (waiter.acquire(timeout=40), waiter.owner)
        except Exception as e:  # reported by the assertion below
            result["sync"] = e

    async def wait_async() -> None:
        r = AsyncSentinel(sentinels.addresses, socket_timeout=2).master_for(sentinels.name, socket_timeout=5)
        lock = alocks.Lock(r, "abusy", lease_ms=60_000)
        try:
            result["async"] = (await lock.acquire(timeout=40), lock.owner)
        except Exception as e:
            result["async"] = e
        await alocks.close(r)
        await r.aclose()

    threads = [threading.Thread(target=wait_sync), threading.Thread(target=lambda: asyncio.run(wait_async()))]
    for t in threads:
        t.start()
    wait_until(lambda: blocked_clients(old) == 2, 10, "both waiters parked on the primary")
    old.close()

    killed = time.monotonic()
    primary.stop()  # SIGKILL
    wait_until(lambda: sentinels.primary_port() == replica.port, 30, "the sentinels promoted the replica")
    new = replica.client()
    wait_until(lambda: new.info("replication")["role"] == "master", 10, "the replica is the primary")
    wait_until(lambda: blocked_clients(new) == 2, 30, "both waiters parked again on the new primary")
    failover = time.monotonic() - killed
    assert result == {}, "nobody was granted anything meanwhile"

    assert new.hgetall("held") == {held.owner.encode(): b"1"}, "the held lock survived the failover"
    assert new.hgetall("fixed") == {fixed.owner.encode(): b"1"}
    before = renewals(new)
    wait_until(lambda: renewals(new) >= before + 2, 10, "the watchdog renews on the new primary")
    assert new.pttl("held") > 9000

    for name in ("busy", "abusy"):
        assert new.execute_command("LOCK.UNLOCK", name, "holder", 60_000) == 1
    for t in threads:
        t.join(30)
    for name in ("sync", "async"):
        granted, owner = result[name]
        assert granted is True, result
        assert new.hgetall({"sync": "busy", "async": "abusy"}[name]) == {owner.encode(): b"1"}
    held.release()
    fixed.release()
    assert new.exists("held", "fixed") == 0
    print(f"failover: the waiters were parked again {failover:.1f} s after the kill")
    new.close()
