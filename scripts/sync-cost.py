#!/usr/bin/env python3
"""What the replicas' wait costs the Python library (issue 29): time per acquire + release of a
lock, with `sync_replicas` on and off, on a server without replicas and on a primary with one
(all local, so a replica's acknowledgement is one loopback round trip), and what the server ran
for it (`INFO commandstats`: the lock commands, `INFO`, `WAIT`).

Usage: .venv/bin/python scripts/sync-cost.py [N]   (N acquire + release pairs per row, 5000)
Needs the package in .venv (make python-env) and the debug module (cargo build --lib);
REDIS_SERVER / SERVER=redis|redis8|valkey pick the server as for the tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))

from conftest import Server  # noqa: E402  (the tests' harness: module loaded, killed at stop)

import redis  # noqa: E402
from redis_lockmod import Lock  # noqa: E402


def calls(r: redis.Redis, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def row(what: str, r: redis.Redis, n: int, sync: bool) -> None:
    lock = Lock(r, f"cost:{what}", lease_ms=30_000, sync_replicas=sync)
    lock.acquire(blocking=False)  # connections made, replicas counted
    lock.release()
    before = {c: calls(r, c) for c in ("info", "wait", "lock.acquire")}
    start = time.perf_counter()
    for _ in range(n):
        lock.acquire(blocking=False)
        lock.release()
    us = (time.perf_counter() - start) / n * 1e6
    after = {c: calls(r, c) - before[c] for c in before}
    info = after["info"] - 3  # the three INFO commandstats of `before`
    print(f"| {what} | sync {'on' if sync else 'off'} | {us:7.1f} | {after['wait'] / n:.2f} | {info} |")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    os.environ.setdefault("LOCKMOD_MODULE", str(ROOT / "target" / "debug" / "libredis_lockmod.so"))
    version = subprocess.run([os.environ.get("REDIS_SERVER") or "redis-server", "--version"], capture_output=True, text=True)
    print(f"{n} acquire + release pairs per row; {version.stdout.strip()}")
    print("| server | option | us per pair | WAIT per pair | INFO in all |")
    print("|---|---|---|---|---|")
    solo = Server()
    primary = Server()
    replica = primary.replica()
    try:
        r = solo.client()
        row("no replica", r, n, True)
        row("no replica", r, n, False)
        p = primary.client()
        row("one replica", p, n, True)
        row("one replica", p, n, False)
    finally:
        replica.stop()
        primary.stop()
        solo.stop()


if __name__ == "__main__":
    main()
