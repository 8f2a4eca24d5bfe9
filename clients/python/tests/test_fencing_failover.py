"""Fencing tokens across a Sentinel failover (issue 35): the primary grants tokens its replica
never receives (the replica stopped, its link killed), dies, and the sentinels promote the
replica. A fenced lock made from the Sentinel-managed client (``Sentinel(...).master_for``) is
then handed a token above every lost one, on the name and on a name the lost history created:
the first token of the new primary's era, ``2**32 + 1``."""

from __future__ import annotations

import signal


from conftest import wait_until
from redis_lockmod import Lock

ERA1 = 1 << 32


def test_a_fenced_lock_after_a_sentinel_failover_gets_a_token_above_every_lost_one(watched) -> None:
    primary, replica, sentinels = watched
    m = sentinels.master()
    lock = Lock(m, "ledger", fenced=True, lease_ms=60_000)
    assert lock.acquire()  # synced to the replica before it returns
    assert lock.token == 1
    lock.release()

    old = primary.client()
    replica.signal(signal.SIGSTOP)
    try:
        # Nothing more reaches the replica: what the primary sent is in its socket, what
        # follows the killed link is sent to nobody.
        old.execute_command("CLIENT", "KILL", "TYPE", "replica")
        lost = []
        for _ in range(5):
            lost.append(old.execute_command("LOCK.ACQUIRE", "ledger", "other:1", 60_000, "TOKEN")[1])
            old.execute_command("LOCK.UNLOCK", "ledger", "other:1", 60_000)
        lost.append(old.execute_command("LOCK.ACQUIRE", "fresh", "other:1", 60_000, "TOKEN")[1])
        assert lost == [2, 3, 4, 5, 6, 1]
        primary.stop()  # SIGKILL: the grants die with it
    finally:
        replica.signal(signal.SIGCONT)
    old.close()

    wait_until(lambda: sentinels.primary_port() == replica.port, 30, "the sentinels promoted the replica")
    new = replica.client()
    wait_until(lambda: new.info("replication")["role"] == "master", 10, "the replica is the primary")
    assert new.get("redisson_lock_token:{ledger}") in (b"1", str(ERA1).encode()), "token 1 was all it had"

    again = Lock(m, "ledger", fenced=True, lease_ms=60_000)
    assert again.acquire()
    assert again.token == ERA1 + 1 and again.token > max(lost)
    again.release()
    fresh = Lock(m, "fresh", fenced=True, lease_ms=60_000)
    assert fresh.acquire()
    assert fresh.token == ERA1 + 1, "a name the new primary never saw starts in its era"
    fresh.release()
    assert new.get("lockmod:fencing:era") == b"1"
    new.close()
