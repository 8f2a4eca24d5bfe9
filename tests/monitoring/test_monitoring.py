"""The monitoring of issue 37, run for real: ``make test-monitoring`` (part of ``make test``).

A server with the module; Debian's ``prometheus-redis-exporter`` running
monitoring/redis_exporter.lua as the ACL user docs/operations.md creates (that very line);
Debian's ``prometheus`` scraping it every second with monitoring/prometheus.yml's job and
monitoring/alerts.yml (their ``for:`` shortened to a few seconds: the expressions are the
file's). Everything binds 127.0.0.1 on free ports and is stopped at the end, even on failure.

The test drives contention (a hot name with twelve parked clients, hand-offs, timeouts, a lease
that runs out under its holder, EVAL and EVALSHA calls), then checks through Prometheus' HTTP
API: every numeric field of ``INFO lockmod`` as a series with the same value, the wait-time
histograms, the hot name with its waiters and holder, the alerts that must fire
(LockWaitersPilingUp on the hot name, LockExpiredWhileHeld), and that every query of
monitoring/dashboard.json returns data and names only metrics the exporter really exports.
Then the hot name is released: twelve hand-offs show in the histogram and the name leaves the
per-name series.

Nothing is skipped: a missing binary fails. The server is ``$REDIS_SERVER``, else the one
``SERVER=redis|redis8|valkey`` names (scripts/server-bin.sh); the module ``$LOCKMOD_MODULE``,
else target/debug.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
import redis

from harness import (DEADLINE, MON, Processes, Prometheus, pings, acl_recipe, binary, free_port, info_lockmod,
                     module_path, parked, prometheus_config, server_binary, until)

HOT = "orders:hot"
WAITERS = 12


@pytest.fixture(scope="module")
def stack():
    workdir = Path(tempfile.mkdtemp(prefix="lockmod-monitoring-"))
    procs = Processes(workdir)
    started = time.monotonic()
    try:
        port, exporter_port, prom_port = free_port(), free_port(), free_port()
        procs.start("redis", [server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--dir", str(workdir), "--loadmodule", module_path()])
        admin = redis.Redis(port=port, decode_responses=True)
        until("the server answers", lambda: pings(admin))
        recipe = acl_recipe()
        admin.execute_command(*recipe)
        password = next(rule[1:] for rule in recipe if rule.startswith(">"))
        exporter = f"127.0.0.1:{exporter_port}"
        procs.start("exporter", [
            binary("prometheus-redis-exporter"), f"--redis.addr=redis://127.0.0.1:{port}",
            "--redis.user=lockmod-exporter", f"--redis.password={password}",
            f"--script={MON / 'redis_exporter.lua'}", f"--web.listen-address={exporter}",
        ])
        config = prometheus_config(workdir, exporter)
        procs.start("prometheus", [
            binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ])
        prom = Prometheus(f"127.0.0.1:{prom_port}")
        until("Prometheus is ready", prom.ready)
        yield {"port": port, "admin": admin, "prom": prom, "instance": exporter, "procs": procs}
    finally:
        procs.stop()
        print(f"monitoring run: {time.monotonic() - started:.1f} s")
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def contention(stack):
    """The steady state the checks read: HOT held by holder-1 with WAITERS parked clients, after
    a read-lock hand-off, three timeouts, a lease run out under its holder and EVAL/EVALSHA."""
    port, admin, prom = stack["port"], stack["admin"], stack["prom"]
    # Prometheus has scraped the server once before anything happens, so every change after
    # shows in rate() and increase().
    until("Prometheus scrapes the exporter",
          lambda: prom.value(f'lockmod_module_loaded{{instance="{stack["instance"]}"}}') == 1)
    admin.execute_command("RWLOCK.WLOCK", "catalog", "writer", 60000)
    reader = threading.Thread(target=lambda: redis.Redis(port=port).execute_command(
        "RWLOCK.RLOCK", "catalog", "reader", 60000, "BLOCK", 0))
    reader.start()
    until("the reader parks", lambda: parked(admin) == 1)
    time.sleep(0.05)
    admin.execute_command("RWLOCK.UNLOCK", "catalog", "writer", "WRITE", 60000)
    reader.join(timeout=DEADLINE)
    assert admin.hgetall("catalog") == {"mode": "read", "reader": "1"}

    admin.execute_command("LOCK.ACQUIRE", HOT, "holder-1", 600000)
    for i in range(3):
        assert admin.execute_command("LOCK.ACQUIRE", HOT, f"impatient-{i}", 600000, "BLOCK", 20) > 0
    granted: list[str] = []

    def wait_then_release(i: int):
        c = redis.Redis(port=port, socket_timeout=DEADLINE * 2)
        owner = f"waiter-{i}"
        assert c.execute_command("LOCK.ACQUIRE", HOT, owner, 600000, "BLOCK", 0) is None
        granted.append(owner)
        c.execute_command("LOCK.UNLOCK", HOT, owner, 600000)

    threads = [threading.Thread(target=wait_then_release, args=(i,)) for i in range(WAITERS)]
    for t in threads:
        t.start()
    until(f"{WAITERS} clients park on {HOT}", lambda: parked(admin) == WAITERS)

    admin.execute_command("LOCK.ACQUIRE", "short-lease", "sleepy", 50)
    until("the short lease expires under its holder", lambda: admin.exists("short-lease") == 0)
    sha = admin.script_load("return 1")
    assert admin.evalsha(sha, 0) == 1
    assert admin.eval("return 2", 0) == 2
    yield {"threads": threads, "granted": granted}
    # Whatever a check did, nobody is left parked when the stack stops.
    if admin.exists(HOT) and admin.hexists(HOT, "holder-1"):
        admin.execute_command("LOCK.FORCEUNLOCK", HOT)
    for t in threads:
        t.join(timeout=DEADLINE)


def series_of(prom: Prometheus, instance: str) -> set[str]:
    return {r["metric"]["__name__"] for r in prom.query(f'{{instance="{instance}", __name__=~"lockmod_.*"}}')}


def test_every_info_field_is_a_series_with_the_value_info_gives(stack, contention):
    prom, admin, inst = stack["prom"], stack["admin"], stack["instance"]

    wrong: dict[str, tuple] = {}

    def matches():
        ints, _ = info_lockmod(admin)
        wrong.clear()
        for field, value in ints.items():
            if field == "memory_bytes":  # the module's own memory moves with every reply it builds
                continue
            got = prom.value(f'lockmod_{field}{{instance="{inst}"}}')
            if got != value:
                wrong[field] = (got, value)
        return not wrong

    until("every INFO lockmod field equals its Prometheus series", matches, show=lambda: wrong)
    ints, _ = info_lockmod(admin)
    exported = series_of(prom, inst)
    assert {f"lockmod_{f}" for f in ints} <= exported
    assert prom.value(f'lockmod_memory_bytes{{instance="{inst}"}}') > 0
    assert prom.value(f'lockmod_module_loaded{{instance="{inst}"}}') == 1
    assert prom.value(f'lockmod_script_errors{{instance="{inst}"}}') == 0
    assert prom.value(f'redis_up{{instance="{inst}"}}') == 1
    assert ints["expired_while_held"] == 1 and ints["block_timeouts"] == 3 and ints["blocked_now"] == WAITERS
    # The exporter ran as the documented user and was refused nothing.
    log = stack["procs"].log("exporter")
    assert "level=error" not in log and "level=fatal" not in log, log
    assert admin.acl_log() == [], "the ACL recipe lacks something the exporter runs"


def test_the_wait_histograms_are_prometheus_histograms(stack, contention):
    prom, admin, inst = stack["prom"], stack["admin"], stack["instance"]
    _, dicts = info_lockmod(admin)
    for request in ["lock", "read", "write", "fair", "semaphore", "psemaphore", "countdown", "ratelimiter"]:
        h = dicts[f"waits_{request}"]
        sel = f'instance="{inst}", request="{request}"'
        assert prom.value(f"lockmod_wait_seconds_count{{{sel}}}") == h["count"], request
        assert prom.value(f'lockmod_wait_seconds_bucket{{{sel}, le="+Inf"}}') == h["le_inf"] == h["count"]
        assert prom.value(f"lockmod_wait_seconds_sum{{{sel}}}") == pytest.approx(h["sum_ms"] / 1000)
        assert prom.value(f"lockmod_wait_gave_up{{{sel}}}") == h["gave_up"], request
        les = sorted(float(r["metric"]["le"]) for r in prom.query(f"lockmod_wait_seconds_bucket{{{sel}}}"))
        assert les[0] == 0.001 and les[-1] == float("inf") and len(les) == 17, les
    assert dicts["waits_read"]["count"] == 1 and dicts["waits_lock"]["gave_up"] == 3
    p99 = prom.query(f'histogram_quantile(0.99, sum by (le) (rate(lockmod_wait_seconds_bucket{{instance="{inst}", request="read"}}[5m])))')
    assert len(p99) == 1 and 0 < float(p99[0]["value"][1]) <= 300, p99


def test_the_hot_name_shows_its_waiters_and_its_holder(stack, contention):
    prom, inst = stack["prom"], stack["instance"]
    sel = f'instance="{inst}", db="0", kind="reentrant", name="{HOT}"'
    assert until("the hot name's waiters", lambda: prom.value(f"lockmod_contended_waiters{{{sel}}}") == WAITERS)
    holds = prom.query(f"lockmod_contended_holds{{{sel}}}")
    assert [(r["metric"]["holder"], r["value"][1]) for r in holds] == [("holder-1", "1")]
    assert prom.value(f"lockmod_contended_holders{{{sel}}}") == 1
    oldest = prom.value(f"lockmod_contended_oldest_wait_seconds{{{sel}}}")
    held = prom.value(f"lockmod_contended_held_seconds{{{sel}}}")
    assert 0 < oldest <= held, (oldest, held)
    assert 0 < prom.value(f"lockmod_contended_lease_remaining_seconds{{{sel}}}") <= 600
    assert prom.value(f'lockmod_contended_names{{instance="{inst}"}}') == 1
    assert prom.query(f'lockmod_contended_waiters{{instance="{inst}", name!="{HOT}"}}') == []


def test_the_alerts_fire(stack, contention):
    prom, inst = stack["prom"], stack["instance"]

    def firing():
        alerts = prom.get("/api/v1/alerts")["alerts"]
        return {a["labels"]["alertname"]: a for a in alerts if a["state"] == "firing"}

    got = until("LockWaitersPilingUp and LockExpiredWhileHeld fire",
                lambda: (lambda f: f if {"LockWaitersPilingUp", "LockExpiredWhileHeld"} <= f.keys() else None)(firing()))
    piling = got["LockWaitersPilingUp"]
    assert {k: piling["labels"][k] for k in ("instance", "db", "kind", "name", "severity")} == {
        "instance": inst, "db": "0", "kind": "reentrant", "name": HOT, "severity": "warning"}
    assert piling["annotations"]["summary"] == f"{WAITERS} clients wait on reentrant lock {HOT} (db 0) on {inst}"
    assert piling["annotations"]["runbook"] == "docs/operations.md#lockwaiterspilingup"
    assert got["LockExpiredWhileHeld"]["labels"]["severity"] == "critical"
    quiet = {"LockReplicaLagging", "LockReplicaLinkDown", "LockmodMetricsIncomplete", "LockGrantsGivenBack"}
    assert not quiet & got.keys(), got.keys()


def dashboard_queries() -> list[str]:
    dash = json.loads((MON / "dashboard.json").read_text())
    assert dash["uid"] and dash["title"] and dash["panels"], "a Grafana dashboard"
    exprs = []
    for panel in dash["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        exprs += [t["expr"] for t in panel["targets"]]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    exprs += [a["expr"] for a in dash["annotations"]["list"]]
    return exprs


def test_every_dashboard_query_returns_data_from_metrics_the_exporter_exports(stack, contention):
    prom, inst = stack["prom"], stack["instance"]
    names = set(prom.get("/api/v1/label/__name__/values"))
    exprs = dashboard_queries()
    assert len(exprs) >= 20
    for expr in exprs:
        for metric in re.findall(r"\b((?:lockmod|redis)_[a-z0-9_]+)\b", expr):
            assert metric in names, f"{metric} (dashboard: {expr}) is not exported"
        m = re.fullmatch(r"label_values\((\w+), (\w+)\)", expr)
        if m:
            values = {r["metric"][m[2]] for r in prom.query(m[1])}
            assert inst in values, (expr, values)
            continue
        # The instance as its own regex: its dots match themselves too.
        q = expr.replace("$instance", inst).replace("$__rate_interval", "1m")
        assert "$" not in q, q
        # Hand-offs, calls and waits happened within the minute; let a scrape or two see them.
        until(f"the dashboard's query returns data: {q}", lambda: prom.query(q))


def test_a_released_hot_name_hands_off_to_every_waiter_and_leaves_the_per_name_view(stack, contention):
    prom, admin, inst = stack["prom"], stack["admin"], stack["instance"]
    before = info_lockmod(admin)[1]["waits_lock"]["count"]
    admin.execute_command("LOCK.UNLOCK", HOT, "holder-1", 600000)
    for t in contention["threads"]:
        t.join(timeout=DEADLINE)
        assert not t.is_alive()
    assert sorted(contention["granted"]) == sorted(f"waiter-{i}" for i in range(WAITERS))
    assert admin.exists(HOT) == 0
    count = info_lockmod(admin)[1]["waits_lock"]["count"]
    assert count == before + WAITERS
    sel = f'instance="{inst}", request="lock"'
    until("Prometheus sees the hand-offs", lambda: prom.value(f"lockmod_wait_seconds_count{{{sel}}}") == count)
    until("the hot name leaves the per-name series",
          lambda: prom.query(f'lockmod_contended_waiters{{instance="{inst}", name="{HOT}"}}') == [])
    p50 = prom.value(f"histogram_quantile(0.5, sum by (le) (rate(lockmod_wait_seconds_bucket{{{sel}}}[5m])))")
    assert p50 is not None and p50 > 0
