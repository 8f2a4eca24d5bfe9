"""A fenced store under a nemesis (issue 35, item 6).

Clients loop: acquire a fenced lock (the Python library's ``Lock(..., fenced=True)`` through
Sentinel), write ``(token, value)`` to a store that refuses any token below the highest it has
accepted, write again a moment later, release. Meanwhile a nemesis kills, pauses (SIGSTOP) and
partitions (cuts the proxy everyone reaches it through) the primary in turn, the sentinels fail
over to the replica, and the old primary comes back as a replica. For about a minute
(``FENCED_STORE_SECONDS``).

What must hold: no token is ever granted twice (the module's guarantee, across failovers, the
split brain a pause makes and lost grants); so every token the store accepted belongs to one
grant, and accepted writes come in token order; a write of a holder whose lock had passed on
(a larger token accepted) is refused. The closing line reports grants, failovers and refused
stale writes. On a module without issue 35 the first failover repeats tokens.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from typing import Dict, List, Tuple

from redis.sentinel import Sentinel

from harness import Node, Sentinels, remove, scratch, wait_until
from redis_lockmod import Lock

SECONDS = float(os.environ.get("FENCED_STORE_SECONDS", "60"))
NAME = "store"
CLIENTS = 4
LEASE_S = 1.5
KINDS = ("kill", "pause", "partition")
# How long the pair may take to settle again after a fault: a primary the sentinels name, the
# other node its replica. The sentinels demote the old primary at their own pace: after they see
# it answer as a primary they wait 8 s of it never down, checking by INFO every 10 s (a
# replica's period); any 1 s it misses a PING (down-after 1000 ms, a loaded 2-core CI machine)
# starts the 8 s again, and a stall of the machine over 2 s puts every sentinel in TILT, doing
# nothing for 30 s. They may also fail back: one sentinel that misses the new primary's first
# PINGs for 1 s counts the others' "down" votes about the old one, up to 5 s old, as votes about
# the new one (seen on Valkey 9.1, where the healed old primary is promoted again). 10 s here.
COMEBACK_S = 90


class FencedStore:
    """The protected resource: refuses a token below the highest it has accepted."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.highest = 0
        self.accepted: List[Tuple[int, Tuple[int, int], int]] = []
        self.refused = 0

    def write(self, token: int, grant: Tuple[int, int], n: int) -> bool:
        with self.mutex:
            if token < self.highest:
                self.refused += 1
                return False
            self.highest = token
            self.accepted.append((token, grant, n))
            return True


def holder(i: int, sentinels: Sentinels, store: FencedStore, grants: List, stop: threading.Event) -> None:
    client = Sentinel(sentinels.addresses, socket_timeout=1).master_for(NAME, socket_timeout=1)
    # No wait for a replica: grants the replica never gets are what the test is about.
    lock = Lock(client, "ledger", fenced=True, lease_ms=int(LEASE_S * 1000), sync_replicas=False, command_timeout=1)
    seq = 0
    while not stop.is_set():
        try:
            if not lock.acquire(timeout=1):
                continue
        except Exception:  # a failover under way: the library says so in many ways
            time.sleep(0.05)
            continue
        seq += 1
        grant = (i, seq)
        token = lock.token
        grants.append((token, grant, time.monotonic()))
        store.write(token, grant, 1)
        # Now and then the holder stalls past its lease (a GC pause): the lock passes on, and
        # its second write comes after the next holder's.
        time.sleep(LEASE_S + 0.3 if random.random() < 0.02 else random.uniform(0, 0.02))
        store.write(token, grant, 2)
        try:
            lock.release()
        except Exception:
            pass


def primary_of(sentinels: Sentinels, nodes: List[Node]) -> Node:
    port = sentinels.primary_proxy_port()
    return next(n for n in nodes if n.proxy.port == port)


def settled(sentinels: Sentinels, nodes: List[Node]) -> bool:
    """The sentinels name a primary that is one, and the other node replicates it."""
    port = sentinels.primary_proxy_port()
    primary = next((n for n in nodes if n.proxy.port == port), None)
    if primary is None or primary.role() != "master":
        return False
    return all(n.synced(primary) for n in nodes if n is not primary)


def nemesis(
    sentinels: Sentinels, nodes: List[Node], stop: threading.Event, failovers: Dict[str, int], comebacks: List[float]
) -> None:
    k = 0
    while not stop.wait(random.uniform(2, 3)):
        old = primary_of(sentinels, nodes)
        other = next(n for n in nodes if n is not old)
        kind = KINDS[k % len(KINDS)]
        k += 1
        if kind == "kill":
            old.kill()
        elif kind == "pause":
            old.signal(signal.SIGSTOP)
        else:
            old.proxy.cut()
        wait_until(lambda: sentinels.primary_proxy_port() == other.proxy.port, 30, f"a failover after a {kind}")
        failovers[kind] += 1
        if kind == "kill":
            old.start(replica_of=other)
        elif kind == "pause":
            old.signal(signal.SIGCONT)
        else:
            old.proxy.heal()
        # The sentinels demote the old primary (or fail back to it: see COMEBACK_S); the replica
        # takes the primary's history.
        back = time.monotonic()
        wait_until(lambda: settled(sentinels, nodes), COMEBACK_S, f"a primary and its replica again after a {kind}")
        comebacks.append(time.monotonic() - back)
        if primary_of(sentinels, nodes) is old:
            failovers["fail-back"] += 1


def test_a_fenced_store_accepts_writes_in_token_order_through_kills_pauses_and_partitions() -> None:
    root = scratch()
    a, b = Node(root, "a"), Node(root, "b")
    nodes = [a, b]
    sentinels = None
    stop = threading.Event()
    threads: List[threading.Thread] = []
    try:
        a.start()
        b.start(replica_of=a)
        wait_until(lambda: b.synced(a), 20, "b replicating a")
        sentinels = Sentinels(root, a, NAME)
        wait_until(lambda: sentinels.ready(1), 30, "sentinels that know each other and the replica")
        store = FencedStore()
        grants: List[Tuple[int, Tuple[int, int], float]] = []
        failovers = {"kill": 0, "pause": 0, "partition": 0, "fail-back": 0}
        comebacks: List[float] = []
        threads = [
            threading.Thread(target=holder, args=(i, sentinels, store, grants, stop), daemon=True)
            for i in range(CLIENTS)
        ]
        for t in threads:
            t.start()
        errors: List[BaseException] = []

        def run_nemesis() -> None:
            try:
                nemesis(sentinels, nodes, stop, failovers, comebacks)
            except BaseException as e:  # reported below, with what the sentinels and nodes logged
                logs = "\n".join(node.log_tail() for node in nodes)
                errors.append(AssertionError(f"{e}\nthe sentinels' events:\n{sentinels.events()}\nthe nodes' logs:\n{logs}"))
                stop.set()

        n = threading.Thread(target=run_nemesis, daemon=True)
        n.start()
        stop.wait(SECONDS)
        stop.set()
        n.join(COMEBACK_S + 30)
        for t in threads:
            t.join(30)
        assert not errors, "\n".join(map(str, errors))

        tokens = [t for t, _, _ in grants]
        repeated = {t for t in tokens if tokens.count(t) > 1}
        assert not repeated, f"tokens granted twice: {sorted(repeated)[:10]}"
        by_token: Dict[int, set] = {}
        for token, grant, _ in store.accepted:
            by_token.setdefault(token, set()).add(grant)
        assert all(len(g) == 1 for g in by_token.values()), "a token accepted for two grants"
        accepted = [t for t, _, _ in store.accepted]
        assert accepted == sorted(accepted), "accepted writes out of token order"
        eras = sorted({t >> 32 for t in tokens})
        total = sum(failovers.values())
        print(
            f"\nfenced store: {len(grants)} grants, {total} failovers ({failovers}), "
            f"{len(store.accepted)} writes accepted, {store.refused} stale writes refused, "
            f"eras {eras}, highest token {max(tokens, default=0)}, "
            f"settled again in {', '.join(f'{s:.1f}' for s in comebacks)} s"
        )
        assert total >= 3 and all(failovers[k] for k in KINDS), f"the nemesis did too little: {failovers}"
        assert len(grants) > 100, f"too few grants to say anything: {len(grants)}"
        assert len(eras) > 1, "no failover started an era"
        assert store.refused > 0, "no stale write was ever tried: the test proves nothing about them"
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        if sentinels is not None:
            sentinels.stop()
        for node in nodes:
            node.stop()
        remove(root)
