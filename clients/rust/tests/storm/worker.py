"""A Python side of the storm (clients/rust/tests/storm.rs): workers that take one lock, through
the repository's library (clients/python), over and over until the storm ends.

    python worker.py sync|asyncio

`sync`: STORM_WORKERS threads share two `redis_lockmod.Lock` objects (one fenced), as threads
share a lock in application code; `asyncio`: as many tasks share two `redis_lockmod.asyncio.Lock`
objects. Each acquire waits a random time (none, once, ms to s); asyncio tasks also cancel a
quarter of their acquires at a random moment (`asyncio.timeout`). Inside the critical section
a worker runs STORM_ENTER (claims the holder key, checks the fencing token) and STORM_LEAVE.
The storm's nemesis kills and unblocks the waits' connections (they carry STORM_CLIENT_NAME):
the library settles those lost replies, which it logs, and which are counted here.

Prints one line `counts k=v ...` and exits 0; any unexpected error is printed and exits 1.
"""

import asyncio
import collections
import logging
import os
import random
import sys
import threading
import time
import traceback

import redis
import redis.asyncio
from redis.exceptions import ConnectionError as LostConnection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as LostTimeout

import redis_lockmod
import redis_lockmod.asyncio

NAME = "storm"
KEYS = ("storm:holder", "storm:fence", "storm:violations", "storm:log")
ENTER = os.environ["STORM_ENTER"]
LEAVE = os.environ["STORM_LEAVE"]
PORT = int(os.environ["PORT"])
#: When the storm ends (wall clock, seconds), the same for every side.
END = int(os.environ["STORM_END_MS"]) / 1000
WORKERS = int(os.environ["STORM_WORKERS"])
CLIENT_NAME = os.environ["STORM_CLIENT_NAME"]

counts = collections.Counter()
counts_mutex = threading.Lock()
errors = []


def count(what, n=1):
    with counts_mutex:
        counts[what] += n


#: What a warning of the library may say in a storm: a lost reply settled, a wait lost and
#: waited again, an unlock's lost reply sent again with its latch.
EXPECTED_WARNINGS = ("settled with", "waiting again", "re-sending the same LATCH request")


class SettleCounter(logging.Handler):
    """Counts what the library logs: `settles` (lost replies, from the nemesis' kills, settled
    by asking), `settled_granted` (of those, granted after all), `cancel_settles` (a cancelled
    wait settled by asking), `cancel_give_backs` (a cancelled wait's grant given back). Any
    other warning is an error, but one: a cancelled asyncio wait that the nemesis killed at the
    same moment says it "ended without an outcome" when the library settled the lost reply as
    not granted (`cancel_lost`, as a cancelled wait the nemesis unblocked with ``ERROR``, which
    the library logs as not granted)."""

    def __init__(self, level):
        super().__init__(level)
        #: Per owner, the verdict of its last settle, until its acquire ends (`acquire_ended`).
        self.verdicts = {}

    def emit(self, record):
        msg = record.getMessage()
        if "settled with" in msg:
            granted = msg.endswith(": granted")
            if "reply lost" in msg:
                count("settles")
                count("settled_granted", int(granted))
                self.verdicts[record.args[2]] = granted
            else:
                count("cancel_settles")
        elif "gave back the grant of a cancelled acquire" in msg:
            count("cancel_give_backs")
        elif "cancelled acquire" in msg and "was not granted" in msg:
            count("cancel_lost")  # an UNBLOCKED error met the cancellation: not granted
            return
        elif "ended without an outcome" in msg and self.not_granted(*record.args[1:]):
            count("cancel_lost")
            return
        if record.levelno >= logging.WARNING and not any(w in msg for w in EXPECTED_WARNINGS):
            detail = f" ({record.args[-1]})" if record.args else ""
            errors.append(f"library: {msg}{detail}")

    def not_granted(self, owner, error):
        """Whether the outcome of a cancelled acquire that ended with `error` is known: not
        granted."""
        if is_unblocked(error):
            return True
        return isinstance(error, (LostConnection, LostTimeout)) and self.verdicts.get(owner) is False

    def acquire_ended(self, owner):
        self.verdicts.pop(owner, None)


SETTLES = SettleCounter(logging.INFO)


def pick_timeout(rng):
    """Seconds to wait: 0 tries once, None waits without limit."""
    x = rng.random()
    if x < 0.1:
        return 0
    if x < 0.2:
        return None
    if x < 0.6:
        return rng.uniform(0.005, 0.2)
    return rng.uniform(0.2, 1.5)


def is_unblocked(e):
    return isinstance(e, ResponseError) and str(e).startswith("UNBLOCKED")


def sync_worker(i, r, lock):
    rng = random.Random()
    n = 0
    try:
        while time.time() < END:
            n += 1
            t = pick_timeout(rng)
            try:
                ok = lock.acquire(blocking=t != 0, timeout=t if t else None)
            except ResponseError as e:
                if not is_unblocked(e):
                    raise
                count("unblocked")
                continue
            except (LostConnection, LostTimeout):
                count("lost")  # killed, settled as not granted, no time left to wait again
                continue
            if not ok:
                count("timeouts")
                continue
            count("grants")
            me = f"py-sync:{i}:{n}:{lock.owner}"
            token = lock.token
            count("fenced", int(token is not None))
            r.eval(ENTER, len(KEYS), *KEYS, me, "" if token is None else str(token))
            time.sleep(rng.uniform(0.001, 0.004))
            r.eval(LEAVE, 1, KEYS[0], me)
            lock.release()
    except BaseException:
        errors.append(f"py-sync worker {i}: {traceback.format_exc()}")


def run_sync():
    r = redis.Redis(port=PORT, client_name=CLIENT_NAME)
    locks = (redis_lockmod.Lock(r, NAME), redis_lockmod.Lock(r, NAME, fenced=True, lease_ms=60_000))
    threads = [threading.Thread(target=sync_worker, args=(i, r, locks[i % 2])) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    redis_lockmod.close(r)
    r.close()


async def async_worker(i, r, lock):
    rng = random.Random()
    n = 0
    try:
        while time.time() < END:
            n += 1
            t = pick_timeout(rng)
            cancel_after = rng.uniform(0.001, 0.3) if rng.random() < 0.25 else None
            try:
                if cancel_after is None:
                    ok = await lock.acquire(blocking=t != 0, timeout=t if t else None)
                else:
                    async with asyncio.timeout(cancel_after):
                        ok = await lock.acquire(blocking=t != 0, timeout=t if t else None)
            except TimeoutError:
                count("cancels")
                continue
            except ResponseError as e:
                if not is_unblocked(e):
                    raise
                count("unblocked")
                continue
            except (LostConnection, LostTimeout):
                count("lost")
                continue
            finally:
                SETTLES.acquire_ended(lock.owner)
            if not ok:
                count("timeouts")
                continue
            count("grants")
            me = f"py-asyncio:{i}:{n}:{lock.owner}"
            token = lock.token
            count("fenced", int(token is not None))
            await r.eval(ENTER, len(KEYS), *KEYS, me, "" if token is None else str(token))
            await asyncio.sleep(rng.uniform(0.001, 0.004))
            await r.eval(LEAVE, 1, KEYS[0], me)
            await lock.release()
    except BaseException:
        errors.append(f"py-asyncio worker {i}: {traceback.format_exc()}")


async def run_asyncio():
    r = redis.asyncio.Redis(port=PORT, client_name=CLIENT_NAME)
    Lock = redis_lockmod.asyncio.Lock
    locks = (Lock(r, NAME), Lock(r, NAME, fenced=True, lease_ms=60_000))
    await asyncio.gather(*(async_worker(i, r, locks[i % 2]) for i in range(WORKERS)))
    await redis_lockmod.asyncio.close(r)
    await r.aclose()


def uncaught_in_thread(args):
    errors.append(f"uncaught in thread {args.thread.name}: {args.exc_type.__name__}: {args.exc_value}")


def uncaught_in_loop(loop, context):
    errors.append(f"uncaught in the event loop: {context.get('message')}: {context.get('exception')!r}")


async def run_asyncio_checked():
    asyncio.get_running_loop().set_exception_handler(uncaught_in_loop)
    await run_asyncio()


def main():
    threading.excepthook = uncaught_in_thread
    log = logging.getLogger("redis_lockmod")
    log.setLevel(logging.INFO)
    log.addHandler(SETTLES)
    if sys.argv[1] == "sync":
        run_sync()
    else:
        asyncio.run(run_asyncio_checked())
    print("counts " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
