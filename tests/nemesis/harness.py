"""The fenced-store test's cluster: two Redis nodes with the module, each reached only through
a TCP proxy the test can cut (clients, the replica's link and the sentinels all go through it:
each node announces its proxy's port), and three sentinels watching them. ``make
test-fenced-store`` runs it (tests/nemesis/test_fenced_store.py)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional

import redis

ROOT = Path(__file__).resolve().parents[2]
# The Python client suite's harness helpers (server and module lookup, free ports, waiting).
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))
from servers import free_port, module_path, server_binary  # noqa: E402
from servers import wait_until as wait_every_5ms  # noqa: E402


def wait_until(what, timeout: float, message: str) -> None:
    """servers.wait_until every 20 ms: the nemesis' checks open connections and ask sentinels."""
    wait_every_5ms(what, timeout, message, every=0.02)


class Proxy:
    """Forwards a local port to ``target``; ``cut`` closes every connection and refuses new
    ones (a partition), ``heal`` lets them through again."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = free_port()  # not 0: the kernel could pick a node's port, handed out, not bound yet
        self.listener.bind(("127.0.0.1", self.port))
        self.listener.listen(128)
        self.listener.settimeout(0.05)
        self.is_cut = False
        self.closed = False
        self.open: List[socket.socket] = []
        self.mutex = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            if self.is_cut:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=1)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.settimeout(None)
            with self.mutex:
                if self.is_cut:  # cut while this one connected: it must not outlive the cut
                    client.close()
                    server.close()
                    continue
                self.open += [client, server]
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.is_cut:
                data = src.recv(65536)
                if not data or self.is_cut:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        self.is_cut = True
        with self.mutex:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open.clear()

    def heal(self) -> None:
        self.is_cut = False

    def close(self) -> None:
        self.closed = True
        self.cut()
        self.listener.close()


class Node:
    """A redis-server with the module on its own port, reached by everyone through its proxy
    (it announces the proxy's port when it replicates)."""

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.port = free_port()
        self.dir = root / name
        self.dir.mkdir()
        self.proxy = Proxy(self.port)
        self.proc: Optional[subprocess.Popen] = None

    def start(self, replica_of: Optional["Node"] = None) -> None:
        args = [
            server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "server.log"),
            "--loadmodule", module_path(), "--repl-diskless-sync-delay", "0",
            "--replica-announce-ip", "127.0.0.1", "--replica-announce-port", str(self.proxy.port),
        ]
        if replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(replica_of.proxy.port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(self._pings, 10, f"{self.name} answering")
        except AssertionError as e:
            raise AssertionError(f"{e} (exit status {self.proc.poll()})\n{self.log_tail()}") from None

    def _pings(self) -> bool:
        try:
            return redis.Redis(port=self.port, socket_timeout=0.5).ping()
        except redis.RedisError:
            return False

    def direct(self) -> redis.Redis:
        """A connection that bypasses the proxy (the test's own look, never cut)."""
        return redis.Redis(port=self.port, socket_timeout=2)

    def role(self) -> str:
        try:
            return self.direct().info("replication")["role"]
        except redis.RedisError:
            return "down"

    def synced(self, primary: Optional["Node"] = None) -> bool:
        """A replica with its link up (to ``primary``, through its proxy, when given)."""
        try:
            info = self.direct().info("replication")
        except redis.RedisError:
            return False
        if primary is not None and int(info.get("master_port", 0)) != primary.proxy.port:
            return False
        return info["role"] == "slave" and info.get("master_link_status") == "up"

    def log_tail(self, last: int = 15) -> str:
        try:
            lines = (self.dir / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(f"{self.name} {line}" for line in lines[-last:])

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGCONT)
        self.kill()
        self.proxy.close()


EVENTS = ("+sdown", "-sdown", "+odown", "+switch-master", "+convert-to-slave", "+tilt", "-tilt", "-failover-abort")


class Sentinels:
    """Three sentinels watching ``primary`` (through its proxy) as ``name``: down after 1 s."""

    def __init__(self, root: Path, primary: Node, name: str) -> None:
        self.name = name
        self.root = root
        self.procs: List[subprocess.Popen] = []
        self.ports: List[int] = []
        for i in range(3):
            port = free_port()
            conf = root / f"sentinel-{i}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {root}\nlogfile {root}/sentinel-{i}.log\n"
                f"sentinel monitor {name} 127.0.0.1 {primary.proxy.port} 2\n"
                f"sentinel down-after-milliseconds {name} 1000\n"
                f"sentinel failover-timeout {name} 3000\n"
                f"sentinel parallel-syncs {name} 1\n"
            )
            self.procs.append(
                subprocess.Popen([server_binary(), str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            self.ports.append(port)

    @property
    def addresses(self) -> List[tuple]:
        return [("127.0.0.1", p) for p in self.ports]

    def primary_proxy_port(self) -> int:
        """The primary's (proxy) port as a sentinel names it now (0 if none answers)."""
        for port in self.ports:
            try:
                addr = redis.Redis(port=port, socket_timeout=0.5).sentinel_get_master_addr_by_name(self.name)
            except redis.RedisError:
                continue
            if addr:
                return int(addr[1])
        return 0

    def ready(self, replicas: int) -> bool:
        for port in self.ports:
            try:
                m = redis.Redis(port=port, socket_timeout=1, decode_responses=True).execute_command(
                    "SENTINEL", "MASTER", self.name
                )
            except redis.RedisError:
                return False
            info = m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
            if int(info["num-other-sentinels"]) != 2 or int(info["num-slaves"]) < replicas:
                return False
        return True

    def events(self, last: int = 40) -> str:
        """The sentinels' decisions (down, failover, demotion, TILT), oldest first: what a
        failing nemesis step prints, since the scratch folder with the logs is removed."""
        lines: List[str] = []
        for i in range(len(self.procs)):
            try:
                text = (self.root / f"sentinel-{i}.log").read_text(errors="replace")
            except OSError:
                continue
            lines += [f"sentinel-{i} {line}" for line in text.splitlines() if any(e in line for e in EVENTS)]
        # "pid:X 28 Nov 2026 15:05:20.494 # +sdown ...": sort on the time after the pid.
        lines.sort(key=lambda line: line.split(" ", 2)[2][:30])
        return "\n".join(lines[-last:])

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="lockmod-nemesis-"))


def remove(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
