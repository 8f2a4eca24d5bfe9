"""Redisson's rate limiter (issue 30) against the real module: `RateLimiter`, sync and asyncio,
on Redisson's ``RRateLimiter`` layout; a window shared with Redisson's own tryAcquire body by
client id; waits in the server (BLOCK) in arrival order, timeouts, cancelled waits that keep
no permit, and a lost reply that is never sent again."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from pathlib import Path
from typing import List

import pytest
import redis
import redis.asyncio as aredis

from conftest import ROOT, blocked_clients, in_thread, parked_async, server_asleep, wait_until
from redis_lockmod import Lock, RateLimiter, RateLimiterConfig, RateType
from redis_lockmod import _rate
from redis_lockmod import asyncio as alocks

#: Redisson's tryAcquire body of 3.38.0 to HEAD (test data, read at run time, never copied).
TRY_ACQUIRE = "861d9229367b5aa9889ee26c5c31be7baeba2153"


def redisson_body(sha: str) -> str:
    default = ROOT.parent / "shared" / "redisson-ratelimiter-scripts"
    path = Path(os.environ.get("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS", default)) / "scripts" / f"{sha}.lua"
    if not path.is_file():
        pytest.fail(f"Redisson's rate-limiter scripts are missing at {path}: set LOCKMOD_REDISSON_RATELIMITER_SCRIPTS")
    return path.read_text()


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def grants(r: redis.Redis, key: str) -> List[int]:
    """The permits of each grant in a zset, read from Redisson's member: a length byte, the
    random bytes, the permits (4 bytes little-endian)."""
    out = []
    for member in r.zrange(key, 0, -1):
        assert len(member) == 1 + member[0] + 4, f"struct.pack('Bc0I', #random, random, permits): {member!r}"
        out.append(struct.unpack("<I", member[-4:])[0])
    return out


# -- no server ---------------------------------------------------------------------------------
def test_arguments_are_checked_before_anything_is_sent() -> None:
    r = redis.Redis(port=1)  # never connected: every check fails first
    limiter = RateLimiter(r, "api")
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError):
            limiter.acquire(bad)
        with pytest.raises(ValueError):
            limiter.try_acquire(bad)
        with pytest.raises(ValueError):
            limiter.release(bad)
        with pytest.raises(ValueError):
            limiter.try_set_rate(RateType.OVERALL, bad, 1000)
        with pytest.raises(ValueError):
            limiter.set_rate(RateType.OVERALL, 10, bad)
    for bad in ("ALL", 0, None):
        with pytest.raises(ValueError, match="rate type"):
            limiter.try_set_rate(bad, 10, 1000)
    with pytest.raises(ValueError, match="at least interval_ms"):
        limiter.try_set_rate(RateType.OVERALL, 10, 1000, keep_alive_ms=999)
    with pytest.raises(ValueError):
        RateLimiter(r, "")
    with pytest.raises(ValueError):
        RateLimiter(r, "api", client_id="")
    assert repr(limiter) == "<RateLimiter 'api'>" and limiter.client is r


def test_every_command_names_the_client_id_and_the_settings_are_redissons() -> None:
    R = _rate.RateArgs
    assert R.try_set("n", "per_client", 5, 1000, None) == ("RATELIMITER.TRYSETRATE", "n", "PER_CLIENT", 5, 1000)
    assert R.try_set("n", RateType.OVERALL, 5, 1000, 0) == ("RATELIMITER.TRYSETRATE", "n", "OVERALL", 5, 1000)
    assert R.set("n", "id", RateType.OVERALL, 5, 1000, 2000, True, True) == (
        "RATELIMITER.SETRATE", "n", "OVERALL", 5, 1000, "KEEPALIVE", 2000, "KEEPSTATE", "XX", "CLIENT", "id",
    )
    assert R.acquire("n", "id", 2, None) == ("RATELIMITER.ACQUIRE", "n", 2, "CLIENT", "id")
    assert R.acquire("n", "id", 2, 0) == ("RATELIMITER.ACQUIRE", "n", 2, "CLIENT", "id", "BLOCK", 0)
    assert R.give_back("n", "id", 2, None) == ("RATELIMITER.RELEASE", "n", 2, "CLIENT", "id"), "nil: granted"
    assert R.give_back("n", "id", 2, 503) is None, "a wait: nothing was taken"
    flat = [b"rate", b"10", b"interval", b"1000", b"keepAliveTime", b"0", b"type", b"1"]
    assert _rate.parse_config(flat) == RateLimiterConfig(RateType.PER_CLIENT, 10, 1000, 0)
    assert _rate.parse_config({"rate": "3", "interval": "50", "type": "0"}) == RateLimiterConfig(RateType.OVERALL, 3, 50, 0)
    assert _rate.parse_config([]) is None


# -- the layout ----------------------------------------------------------------------------------
def test_a_limiter_grants_up_to_its_rate_in_redissons_keys(r: redis.Redis) -> None:
    limiter = RateLimiter(r, "api")
    assert limiter.get_config() is None
    with pytest.raises(redis.ResponseError, match="RateLimiter is not initialized"):
        limiter.try_acquire()
    assert limiter.try_set_rate(RateType.OVERALL, 3, 60_000) is True
    assert limiter.try_set_rate(RateType.OVERALL, 99, 1_000) is False, "set once, by anyone"
    assert r.hgetall("api") == {b"rate": b"3", b"interval": b"60000", b"type": b"0", b"keepAliveTime": b"0"}
    assert limiter.get_config() == RateLimiterConfig(RateType.OVERALL, 3, 60_000, 0)
    before = server_ms(r)
    assert limiter.try_acquire(2) is True and limiter.try_acquire() is True
    assert limiter.try_acquire() is False and limiter.acquire(timeout=0) is False
    assert r.get("{api}:value") == b"0" and limiter.available_permits() == 0
    scores = [s for _, s in r.zrange("{api}:permits", 0, -1, withscores=True)]
    assert sum(grants(r, "{api}:permits")) == 3 and all(before - 1 <= s <= server_ms(r) for s in scores), "server time"
    with pytest.raises(redis.ResponseError, match="cannot exceed defined rate"):
        limiter.try_acquire(4)
    assert limiter.release(2) == 2, "given back: taken off the newest grants"
    assert sum(grants(r, "{api}:permits")) == 1 and r.get("{api}:value") == b"2"
    assert limiter.release(5) == 3, "never above the rate"
    assert r.zcard("{api}:permits") == 0 and limiter.available_permits() == 3
    kept = RateLimiter(r, "kept")
    assert kept.try_set_rate("overall", 1, 1_000, keep_alive_ms=30_000)
    assert kept.try_acquire()
    for key in ("kept", "{kept}:value", "{kept}:permits"):
        assert 29_000 < r.pttl(key) <= 30_000, f"{key} lives keepAliveTime after its last use"


def test_per_client_windows_are_the_client_ids_and_the_id_is_the_client_uuid(server, r: redis.Redis) -> None:
    mine = RateLimiter(r, "pc")
    assert mine.client_id == Lock(r, "any").owner.rsplit(":", 1)[0], "one uuid per client, as Redisson's instance id"
    other_client = server.client()
    theirs = RateLimiter(other_client, "pc")
    assert theirs.client_id != mine.client_id
    assert mine.try_set_rate(RateType.PER_CLIENT, 2, 60_000)
    assert mine.try_acquire(2) and not mine.try_acquire()
    assert RateLimiter(r, "pc").try_acquire() is False, "one window per client, not per object"
    assert theirs.try_acquire(2) is True, "another client id: another window"
    assert r.get(f"{{pc}}:value:{mine.client_id}") == b"0" and r.get(f"{{pc}}:value:{theirs.client_id}") == b"0"
    assert sum(grants(r, f"{{pc}}:permits:{mine.client_id}")) == 2
    assert r.exists("{pc}:value", "{pc}:permits") == 0, "no overall window"
    java = RateLimiter(r, "pc", client_id="java-instance-id")
    assert java.available_permits() == 2 and r.get("{pc}:value:java-instance-id") == b"2"
    other_client.close()


def test_a_window_is_shared_with_redissons_own_body_by_client_id(r: redis.Redis) -> None:
    body = r.register_script(redisson_body(TRY_ACQUIRE))
    limiter = RateLimiter(r, "shared")
    limiter.try_set_rate(RateType.PER_CLIENT, 3, 60_000)
    mine = f"{{shared}}:value:{limiter.client_id}", f"{{shared}}:permits:{limiter.client_id}"
    keys = ["shared", "{shared}:value", mine[0], "{shared}:permits", mine[1]]
    # A Java client whose instance id is this library's client uuid takes 2 of the window.
    assert body(keys=keys, args=[2, server_ms(r), os.urandom(16)]) is None
    assert limiter.available_permits() == 1
    assert limiter.try_acquire(2) is False and limiter.try_acquire(1) is True
    wait = body(keys=keys, args=[1, server_ms(r), os.urandom(16)])
    assert isinstance(wait, int) and 59_000 < wait <= 60_003, "the Java client sees the library's grant"
    assert sum(grants(r, mine[1])) == 3, "one zset (a grant in the body's millisecond joins its member)"


def test_set_rate_starts_afresh_or_keeps_the_window(r: redis.Redis) -> None:
    limiter = RateLimiter(r, "reset")
    assert limiter.set_rate(RateType.OVERALL, 5, 1_000, xx=True) is False, "XX: Redisson's updateRate"
    assert r.exists("reset") == 0, "nothing written"
    assert limiter.set_rate(RateType.OVERALL, 10, 60_000) is True
    assert limiter.try_acquire(4)
    assert limiter.set_rate(RateType.OVERALL, 6, 60_000, keep_state=True, xx=True) is True
    assert r.hget("reset", "rate") == b"6" and limiter.available_permits() == 2, "the 4 granted still count"
    assert limiter.set_rate(RateType.OVERALL, 6, 60_000) is True
    assert r.exists("{reset}:value", "{reset}:permits") == 0 and limiter.available_permits() == 6
    assert limiter.set_rate(RateType.OVERALL, 6, 60_000, keep_alive_ms=90_000)
    assert 89_000 < r.pttl("reset") <= 90_000 and limiter.get_config().keep_alive_ms == 90_000


# -- waiting -------------------------------------------------------------------------------------
def test_a_waiting_acquire_parks_until_its_permits_fit_in_the_window(r: redis.Redis) -> None:
    limiter = RateLimiter(r, "wait")
    limiter.try_set_rate(RateType.OVERALL, 1, 400)
    assert limiter.try_acquire()
    start = time.monotonic()
    t, out = in_thread(lambda: RateLimiter(r, "wait").acquire(timeout=10))
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter parked")
    t.join(10)
    assert out == {"v": True} and 0.25 < time.monotonic() - start < 5, "granted when the first grant left"
    assert blocked_clients(r) == 0 and limiter.available_permits() == 0
    start = time.monotonic()
    assert limiter.acquire(timeout=0.1) is False, "the window is full for 0.4 s"
    assert 0.08 < time.monotonic() - start < 5 and blocked_clients(r) == 0


def test_waiters_are_served_in_arrival_order_and_a_release_wakes_them(r: redis.Redis) -> None:
    limiter = RateLimiter(r, "fifo")
    limiter.try_set_rate(RateType.OVERALL, 2, 3_600_000)
    assert limiter.try_acquire(2)
    order: List[int] = []

    def waiter(i: int, n: int):
        def run() -> bool:
            ok = RateLimiter(r, "fifo").acquire(n, timeout=10)
            order.append(i)
            return ok

        return run

    first, got2 = in_thread(waiter(0, 2))
    wait_until(lambda: blocked_clients(r) == 1, message="the waiter for 2 parked")
    second, got1 = in_thread(waiter(1, 1))
    wait_until(lambda: blocked_clients(r) == 2, message="the waiter for 1 parked")
    limiter.release(1)
    time.sleep(0.1)
    assert order == [] and blocked_clients(r) == 2, "1 permit must not overtake the waiter for 2"
    assert limiter.try_acquire() is False, "nor a new caller while anyone waits"
    limiter.release(1)
    first.join(10)
    assert got2 == {"v": True} and blocked_clients(r) == 1
    limiter.release(1)
    second.join(10)
    assert got1 == {"v": True} and order == [0, 1] and limiter.available_permits() == 0


def test_a_change_whose_reply_is_lost_is_never_sent_again(server, r: redis.Redis) -> None:
    limiter = RateLimiter(r, "lost", command_timeout=0.25)
    limiter.try_set_rate(RateType.OVERALL, 10, 3_600_000)  # also opens the library's connection
    r.config_resetstat()
    with server_asleep(server, 1.2):
        with pytest.raises((redis.TimeoutError, redis.ConnectionError)):
            limiter.try_acquire(3)
    wait_until(lambda: r.ping(), message="the server awake")
    stats = {k.lower(): v for k, v in r.info("commandstats").items()}
    calls = stats.get("cmdstat_ratelimiter.acquire", {}).get("calls", 0)
    assert calls == 1, "sent once (the server ran it when it woke): never re-sent"
    assert limiter.available_permits() == 7


# -- asyncio -------------------------------------------------------------------------------------
def test_asyncio_rate_limiter(server) -> None:
    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        limiter = alocks.RateLimiter(r, "aapi")
        assert await limiter.try_set_rate(RateType.OVERALL, 2, 3_600_000)
        assert await limiter.get_config() == RateLimiterConfig(RateType.OVERALL, 2, 3_600_000, 0)
        assert await limiter.try_acquire(2) and not await limiter.try_acquire()
        waiting = asyncio.create_task(limiter.acquire(timeout=10))
        await parked_async(r, 1)
        assert await limiter.release(1) == 1
        assert await waiting is True and await limiter.available_permits() == 0
        assert await limiter.acquire(timeout=0.05) is False
        assert await limiter.set_rate("overall", 5, 3_600_000, keep_state=True) and await limiter.available_permits() == 3
        await alocks.close(r)
        await r.aclose()

    asyncio.run(main())


def test_a_cancelled_asyncio_wait_leaves_the_queue_and_a_raced_grant_is_given_back(server, caplog) -> None:
    caplog.set_level(logging.INFO, "redis_lockmod")

    async def main() -> None:
        r = aredis.Redis(port=server.port)
        await r.flushall()
        limiter = alocks.RateLimiter(r, "acancel")
        await limiter.try_set_rate(RateType.OVERALL, 2, 3_600_000)
        assert await limiter.try_acquire(2)
        task = asyncio.create_task(limiter.acquire(timeout=10))
        await parked_async(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await parked_async(r, 0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(limiter.acquire(), 0.1)
        await parked_async(r, 0)
        await alocks.close(r)
        assert await limiter.release(2) == 2, "the cancelled waiters took nothing"

        # The race made certain: the grant (a release serves the waiter) happens after the task
        # was cancelled and before its CLIENT UNBLOCK reaches the server.
        limiter = alocks.RateLimiter(r, "acancel")  # on the client's new session
        assert await limiter.try_acquire(2)
        transport = limiter._session.transport
        unblock = transport.unblock

        async def grant_first(*args):
            await r.execute_command("RATELIMITER.RELEASE", "acancel", 2)
            return await unblock(*args)

        transport.unblock = grant_first
        task = asyncio.create_task(limiter.acquire(2))
        await parked_async(r, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await alocks.close(r)  # waits for the background settling
        transport.unblock = unblock
        assert await limiter.available_permits() == 2 and await r.zcard("{acancel}:permits") == 0, "given back"
        await r.aclose()

    asyncio.run(main())
    assert "granted to a cancelled acquire" in caplog.text
