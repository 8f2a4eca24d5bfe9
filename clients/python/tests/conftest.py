"""The test harness: a real redis-server (or Valkey) with the module, on a free 127.0.0.1 port,
always stopped, as the Rust harness (tests/common/mod.rs) starts it.

Which server and module (``REDIS_SERVER``, ``SERVER``, ``LOCKMOD_MODULE``): see servers.py,
which this suite shares with tests/nemesis.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, List

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from servers import ROOT, free_port, module_path, server_binary, wait_until  # noqa: F401 (tests import them from here)


class Server:
    """A running server with the module, stopped by `stop` (the fixture always calls it);
    `extra` arguments are appended to its command line."""

    def __init__(self, *extra: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="lockmod-pytest-"))
        last = ""
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--enable-debug-command", "yes", "--dir", str(self.dir),
                    "--logfile", str(self.dir / "server.log"), "--loadmodule", module_path(),
                    "--repl-diskless-sync-delay", "0", *extra,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._ready():
                return
            last = self.log()
            self.proc.kill()
            self.proc.wait()
        pytest.fail(f"the server did not start: {last}")

    def _ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            # The server answering must be this one: tests run side by side (pytest-xdist), and
            # a port found free may be taken by another test's server before this one binds
            # it (this one then exits, and the next try takes another port).
            try:
                # Then it must be done loading: INFO answers while it loads, PING does not.
                with redis.Redis(port=self.port, socket_timeout=1) as probe:
                    if probe.info("server").get("process_id") == self.proc.pid and probe.ping():
                        return True
            except redis.exceptions.ConnectionError:  # BusyLoadingError (loading) is one
                pass
            time.sleep(0.02)
        return False

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)

    def replica(self) -> "Server":
        """A replica of this server (module loaded), once it is in sync."""
        replica = Server("--replicaof", "127.0.0.1", str(self.port))
        c = replica.client()
        wait_until(lambda: c.info("replication").get("master_link_status") == "up", 10, "replica in sync")
        c.close()
        p = self.client()
        wait_until(lambda: streaming(p), 10, "the primary streaming to the replica")
        p.close()
        return replica

    def signal(self, sig: int) -> None:
        """Sends `sig` to the server (SIGSTOP: a replica that acknowledges nothing more)."""
        os.kill(self.proc.pid, sig)

    def log(self) -> str:
        try:
            return (self.dir / "server.log").read_text()
        except OSError:
            return ""

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Sentinels:
    """Three sentinels (the server binary with ``--sentinel``) watching `primary` as
    ``name``, with fast timings (down after 1 s), ready once each knows the other two and the
    replica. Stopped by `stop`."""

    def __init__(self, primary: Server, name: str = "lockmod", replicas: int = 1) -> None:
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix="lockmod-pytest-sentinel-"))
        self.procs: List[subprocess.Popen] = []
        self.ports: List[int] = []
        try:
            for i in range(3):
                port = free_port()
                conf = self.dir / f"sentinel-{i}.conf"
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir}/sentinel-{i}.log\n"
                    f"sentinel monitor {name} 127.0.0.1 {primary.port} 2\n"
                    f"sentinel down-after-milliseconds {name} 1000\n"
                    f"sentinel failover-timeout {name} 5000\n"
                    f"sentinel parallel-syncs {name} 1\n"
                )
                self.procs.append(
                    subprocess.Popen([server_binary(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                )
                self.ports.append(port)

            def ready() -> bool:
                for port in self.ports:
                    try:
                        m = redis.Redis(port=port, socket_timeout=1, decode_responses=True).execute_command(
                            "SENTINEL", "MASTER", name
                        )
                    except redis.exceptions.RedisError:
                        return False
                    info = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
                    if int(info["num-other-sentinels"]) != 2 or int(info["num-slaves"]) != replicas:
                        return False
                return True

            wait_until(ready, 30, "three sentinels that know each other and the replica")
        except BaseException:
            self.stop()
            raise

    @property
    def addresses(self) -> List[tuple]:
        return [("127.0.0.1", p) for p in self.ports]

    def primary_port(self) -> int:
        """The primary's port as the first sentinel names it now."""
        return int(redis.Redis(port=self.ports[0], socket_timeout=1).sentinel_get_master_addr_by_name(self.name)[1])

    def master(self):
        """A Sentinel-managed client of the primary (``Sentinel(...).master_for``)."""
        from redis.sentinel import Sentinel

        return Sentinel(self.addresses, socket_timeout=2).master_for(self.name, socket_timeout=5)

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def watched() -> Iterator[tuple]:
    """A primary with one replica, watched by three sentinels: ``(primary, replica,
    sentinels)``, all stopped after the test."""
    primary = Server()
    replica = sentinels = None
    try:
        replica = primary.replica()
        sentinels = Sentinels(primary)
        yield primary, replica, sentinels
    finally:
        for each in (sentinels, replica, primary):
            if each is not None:
                each.stop()


@contextmanager
def stopped(server: Server) -> Iterator[None]:
    """The server is stopped (SIGSTOP) inside the block, and continued after it."""
    server.signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.signal(signal.SIGCONT)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def r(server: Server) -> Iterator[redis.Redis]:
    """A client on a freshly flushed server."""
    c = server.client()
    c.flushall()
    yield c
    c.close()


def blocked_clients(r: redis.Redis) -> int:
    return int(r.info("clients")["blocked_clients"])


def in_thread(fn):
    """Starts `fn` in a thread; returns the thread and where its result (``v``) or exception
    (``e``) lands."""
    out: dict = {}

    def run() -> None:
        try:
            out["v"] = fn()
        except BaseException as e:  # reported by the test
            out["e"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


async def parked_async(r, n: int) -> None:
    """Waits (asyncio) until `n` clients are blocked on `r`'s server."""
    deadline = time.monotonic() + 10
    while int((await r.info("clients"))["blocked_clients"]) != n:
        assert time.monotonic() < deadline, f"never {n} parked"
        await asyncio.sleep(0.005)


def streaming(primary: redis.Redis) -> bool:
    """True once a replica acknowledged a write of ``primary``'s connection.

    A primary lists a new replica online, and streams to it, only after the replica's first
    acknowledgement, sent from its once-a-second cron: until then a library counting replicas
    sees none, and a WAIT waits up to a second. The write is FUNCTION FLUSH (no function is
    loaded here): it replicates and touches no key; a WAIT after no write returns at once.
    """
    primary.execute_command("FUNCTION", "FLUSH")
    return primary.execute_command("WAIT", 1, 100) >= 1


@contextmanager
def server_asleep(server: Server, seconds: float) -> Iterator[None]:
    """Keeps the server busy (``DEBUG SLEEP``) from another connection; yields once it is."""
    sleeper = threading.Thread(
        target=lambda: server.client(socket_timeout=seconds + 10).execute_command("DEBUG", "SLEEP", seconds)
    )
    sleeper.start()
    probe = server.client(socket_timeout=0.05, retry=Retry(NoBackoff(), 0))
    deadline = time.monotonic() + 5
    try:
        while time.monotonic() < deadline:
            try:
                probe.ping()
            except redis.exceptions.TimeoutError:
                break
            time.sleep(0.01)
        else:
            raise AssertionError("the server never went to sleep")
        yield
    finally:
        sleeper.join()
        probe.close()


class Cluster:
    """3 primaries and 3 replicas with the module, by scripts/cluster.sh (as the Rust tests)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="lockmod-pytest-cluster-"))
        shutil.rmtree(self.dir)
        env = dict(os.environ, REDIS_SERVER=server_binary())
        out = subprocess.run(
            ["bash", str(ROOT / "scripts" / "cluster.sh"), "start", "--module", module_path(), "--dir", str(self.dir)],
            capture_output=True,
            text=True,
            env=env,
        )
        if out.returncode != 0:
            self.stop()
            pytest.fail(f"scripts/cluster.sh start failed: {out.stdout}{out.stderr}")
        self.ports: List[int] = [int(p) for p in out.stdout.split()]

    def stop(self) -> None:
        subprocess.run(["bash", str(ROOT / "scripts" / "cluster.sh"), "stop", "--dir", str(self.dir)], capture_output=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()
