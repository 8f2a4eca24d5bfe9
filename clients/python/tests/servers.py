"""Finding the server and the module, free ports, waiting: what every Python harness of the
project shares (this folder's conftest.py, and tests/nemesis/harness.py, which puts this folder
on its path). A plain module, not a conftest, so another suite can import it.

``REDIS_SERVER`` names the server binary (else ``SERVER=redis|redis8|valkey`` picks it the way
scripts/server-bin.sh does); ``LOCKMOD_MODULE`` the module (else the debug build, which
``cargo build --lib`` makes). A missing server or module fails loudly: a skipped suite proves
nothing.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Set

ROOT = Path(__file__).resolve().parents[3]


def server_binary() -> str:
    if os.environ.get("REDIS_SERVER"):
        return os.environ["REDIS_SERVER"]
    which = os.environ.get("SERVER") or "redis"
    out = subprocess.run(["bash", str(ROOT / "scripts" / "server-bin.sh"), which], capture_output=True, text=True)
    binary = out.stdout.strip()
    if out.returncode != 0 or not binary:
        raise RuntimeError(f"SERVER={which}: no server binary found (run scripts/install-deps.sh)")
    return binary


def module_path() -> str:
    path = os.environ.get("LOCKMOD_MODULE") or str(ROOT / "target" / "debug" / "libredis_lockmod.so")
    if not Path(path).is_file():
        raise RuntimeError(f"no module at {path}: run `cargo build --lib` in {ROOT}")
    return path


HANDED_OUT: Set[int] = set()


def free_port() -> int:
    """A port nobody listens on and this process has not handed out yet: two servers (or a
    server and a proxy) made before either binds would otherwise be told the same freed port."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in HANDED_OUT:
            HANDED_OUT.add(port)
            return port


def wait_until(what, timeout: float = 5.0, message: str = "condition", every: float = 0.005) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout} s")
        time.sleep(every)
