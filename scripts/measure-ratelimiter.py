#!/usr/bin/env python3
"""Interim measurements of the rate limiter (issue 30) against Redisson's bodies, until `make
bench` has its rows: usec per call from `INFO commandstats`, one server, the same run.

1. a grant and a refusal: RATELIMITER.ACQUIRE against tryAcquire's 3.38+ body;
2. the acquire after a release with N = 1k / 10k / 100k grants in the window: Redisson's body
   (its release brings the count to the rate, so the next tryAcquire recomputes over every
   member), the module (RELEASE then ACQUIRE), and the module on grants Redisson's bodies made
   (the first call sums the zset once);
3. the module's grants at any rate (three per ms, folded) on a 1 s and a 60 s window, and the
   one call that finds the whole window gone.

Usage: .venv/bin/python scripts/measure-ratelimiter.py [MODULE.so]   (default: the release build;
`cargo build --release --lib` first). Redisson's bodies are read from
../shared/redisson-ratelimiter-scripts/ (or $LOCKMOD_REDISSON_RATELIMITER_SCRIPTS).
"""

import os
import random
import subprocess
import sys
import tempfile
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SO = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/libredis_lockmod.so")
SHARED = os.environ.get("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS", os.path.join(ROOT, "../shared/redisson-ratelimiter-scripts"))
ACQ = "861d9229367b5aa9889ee26c5c31be7baeba2153"  # tryAcquireAsync, 3.38.0-HEAD
REL = "fbec405e63ce6ca39accbc290ded190da3cad1cf"  # releaseAsync, 3.52.0-HEAD
TSR = "38980404d0f647f699e5bd8082405d06ec0fef92"  # trySetRateAsync, 3.38.0-HEAD
T = 1_000_000_000


def start():
    port = random.randint(20000, 40000)
    d = tempfile.mkdtemp()
    p = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--dir", d, "--loadmodule", SO],
                         stdout=subprocess.DEVNULL)
    c = redis.Redis(port=port)
    for _ in range(200):
        try:
            c.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    for sha in (ACQ, REL, TSR):
        with open(os.path.join(SHARED, "scripts", sha + ".lua")) as f:
            assert c.script_load(f.read()) == sha
    return p, c


def keys(n):
    return [n, "{%s}:value" % n, "{%s}:value:id" % n, "{%s}:permits" % n, "{%s}:permits:id" % n]


def usec(c, cmd):
    s = c.info("commandstats").get("cmdstat_" + cmd)
    return s["usec_per_call"] if s else None


def lua_acquire(c, name, n, t):
    return c.evalsha(ACQ, 5, *keys(name), n, t, os.urandom(16))


def grant_and_refusal(c):
    for kind, rate, interval in (("grant", 10**12, 1000), ("refusal", 1, 10**9)):
        for native in (False, True):
            name = "%s_%s" % (kind, native)
            c.evalsha(TSR, 1, name, rate, interval, 0, 0)
            c.config_resetstat()
            for i in range(20000):
                if native:
                    c.execute_command("RATELIMITER.ACQUIRE", name, 1, "NOW", T + i)
                else:
                    lua_acquire(c, name, 1, T + i)
            print("%-8s %-6s %6.2f us/call" % (kind, "module" if native else "lua",
                                                usec(c, "ratelimiter.acquire" if native else "evalsha")))


def refill(c):
    for n in (1000, 10000, 100000):
        for mode in ("lua", "module", "lua-made"):
            name = "r%d_%s" % (n, mode)
            c.evalsha(TSR, 1, name, n, n, 0, 0)
            p = c.pipeline(transaction=False)
            for i in range(n):
                if mode == "module":
                    p.execute_command("RATELIMITER.ACQUIRE", name, 1, "NOW", T + i)
                else:
                    p.evalsha(ACQ, 5, *keys(name), 1, T + i, os.urandom(16))
                if i % 1000 == 999:
                    p.execute()
            p.execute()
            iters, t, wall, first = (100 if n < 100000 else 20), T + n, [], None
            c.config_resetstat()
            for _ in range(iters):
                t += 1
                if mode == "lua":
                    c.evalsha(REL, 5, *keys(name), n)
                    s = time.perf_counter()
                    lua_acquire(c, name, 1, t)
                elif mode == "module":
                    c.execute_command("RATELIMITER.RELEASE", name, 1, "NOW", t)
                    s = time.perf_counter()
                    c.execute_command("RATELIMITER.ACQUIRE", name, 1, "NOW", t)
                else:
                    c.evalsha(REL, 5, *keys(name), 1)
                    s = time.perf_counter()
                    c.execute_command("RATELIMITER.ACQUIRE", name, 1, "NOW", t)
                w = time.perf_counter() - s
                if mode == "lua-made" and first is None:
                    first = w
                else:
                    wall.append(w)
            wall.sort()
            line = "refill n=%-6d %-8s acquire wall median %9.0f us" % (n, mode, wall[len(wall) // 2] * 1e6)
            if mode == "module":
                line += "; ACQUIRE %.2f us/call, RELEASE %.2f us/call" % (
                    usec(c, "ratelimiter.acquire"), usec(c, "ratelimiter.release"))
            elif mode == "lua":
                line += "; release + tryAcquire bodies %.0f us/call on average" % usec(c, "evalsha")
            else:
                line += "; the first call (sums the zset) %.0f us" % (first * 1e6)
            print(line)


def any_rate(c):
    for interval in (1000, 60000):
        name = "m%d" % interval
        c.execute_command("RATELIMITER.TRYSETRATE", name, "OVERALL", 10**12, interval)
        c.config_resetstat()
        t, p = T, c.pipeline(transaction=False)
        for i in range(200000):
            if i % 3 == 0:
                t += 1
            p.execute_command("RATELIMITER.ACQUIRE", name, 5, "NOW", t)
            if i % 1000 == 999:
                p.execute()
        p.execute()
        members = c.zcard("{%s}:permits" % name)
        s = time.perf_counter()
        c.execute_command("RATELIMITER.ACQUIRE", name, 1, "NOW", t + interval + 1)
        w = time.perf_counter() - s
        print("window %5d ms: %.2f us/call over 200,000 grants, %d members, the call after the whole "
              "window left: %.0f us" % (interval, usec(c, "ratelimiter.acquire"), members, w * 1e6))


def main():
    proc, c = start()
    try:
        grant_and_refusal(c)
        refill(c)
        any_rate(c)
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
