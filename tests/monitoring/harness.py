"""The harness of tests/monitoring/test_monitoring.py: the processes it starts, Prometheus'
HTTP API, the configuration it derives from monitoring/ and docs/operations.md, and reading
`INFO lockmod` as the server writes it."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
MON = ROOT / "monitoring"
# Every condition is waited for with this deadline (s): a loaded machine is slow, never wrong.
DEADLINE = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed (scripts/install-deps.sh installs it)"
    return path


def server_binary() -> str:
    if os.environ.get("REDIS_SERVER"):
        return os.environ["REDIS_SERVER"]
    which = os.environ.get("SERVER") or "redis"
    out = subprocess.run(["bash", str(ROOT / "scripts/server-bin.sh"), which], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip(), f"SERVER={which} is not installed: {out.stderr}"
    return out.stdout.strip()


def module_path() -> str:
    path = os.environ.get("LOCKMOD_MODULE") or str(ROOT / "target/debug/libredis_lockmod.so")
    assert Path(path).exists(), f"no module at {path} (cargo build --lib)"
    return path


def until(what: str, check, deadline: float = DEADLINE, show=None):
    """Polls `check` until it returns something truthy; fails naming `what` and the last value
    (or what `show` says)."""
    end = time.monotonic() + deadline
    last = None
    while time.monotonic() < end:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"{what}: not within {deadline} s (last: {show() if show else last!r})")


class Processes:
    """Every process the test starts, stopped (TERM, then KILL) in reverse order at the end."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True)
        self.started.append((name, p))
        return p

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def stop(self):
        for _, p in reversed(self.started):
            if p.poll() is None:
                p.terminate()
        for _, p in reversed(self.started):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def acl_recipe() -> list[str]:
    """The `redis> ACL SETUSER lockmod-exporter ...` line of docs/operations.md, as arguments."""
    for line in (ROOT / "docs/operations.md").read_text().splitlines():
        line = line.strip()
        if line.startswith("redis> ACL SETUSER lockmod-exporter "):
            return shlex.split(line[len("redis> "):])
    pytest.fail("docs/operations.md has no `redis> ACL SETUSER lockmod-exporter` line")


def prometheus_config(workdir: Path, exporter: str) -> Path:
    """monitoring/prometheus.yml with the test's exporter as target and 1 s intervals, beside a
    copy of monitoring/alerts.yml whose `for:` durations are 3 s."""
    config = (MON / "prometheus.yml").read_text()
    assert "'localhost:9121'" in config and "scrape_interval: 15s" in config and "evaluation_interval: 15s" in config
    config = config.replace("'localhost:9121'", f"'{exporter}'")
    config = config.replace("scrape_interval: 15s", "scrape_interval: 1s")
    config = config.replace("evaluation_interval: 15s", "evaluation_interval: 1s")
    (workdir / "prometheus.yml").write_text(config)
    rules = re.sub(r"(?m)^(\s+for: )\d+[smh]$", r"\g<1>3s", (MON / "alerts.yml").read_text())
    (workdir / "alerts.yml").write_text(rules)
    return workdir / "prometheus.yml"


class Prometheus:
    def __init__(self, address: str):
        self.base = f"http://{address}"

    def get(self, path: str, **params):
        url = f"{self.base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.get("/api/v1/query", query=expr)["result"]

    def value(self, expr: str):
        """The single sample of `expr` now, as a float (None when there is none)."""
        result = self.query(expr)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False


def info_lockmod(c: redis.Redis) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """`INFO lockmod`: the integer fields, and the dictionary fields (the wait histograms)."""
    # The reply as the server wrote it, not redis-py's parse of it.
    c.set_response_callback("INFO", lambda reply, **_: reply)
    text = c.execute_command("INFO", "lockmod")
    if isinstance(text, bytes):
        text = text.decode()
    ints, dicts = {}, {}
    for line in text.splitlines():
        if not line.startswith("lockmod_") or ":" not in line:
            continue
        field, value = line[len("lockmod_"):].split(":", 1)
        if re.fullmatch(r"-?\d+", value.strip()):
            ints[field] = int(value)
        elif "=" in value:
            dicts[field] = {k: int(v) for k, v in (kv.split("=") for kv in value.strip().split(","))}
    return ints, dicts


def pings(c: redis.Redis) -> bool:
    try:
        return c.ping()
    except redis.ConnectionError:
        return False


def parked(c: redis.Redis) -> int:
    return int(c.info("clients")["blocked_clients"])
