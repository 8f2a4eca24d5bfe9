#!/usr/bin/env python3
"""Server instructions per critical section of a contended BLOCK hand-off, under callgrind.

K clients (threads, one connection each) take one lock with BLOCK 0, run a non-atomic GET/SET
increment, and release it, N times each. The whole server process is counted (commands, timers,
the event loop; not the kernel) from the first acquire to the last release, so work moved from a
command into a timer (or back) still counts. Far steadier than the time-based part 4 of `make
bench` on a shared machine, but not exact: timers that run by the clock (the 5 ms poll of parked
locks) run more often per critical section when the machine is slower, which moves the figure by
a few percent with the load. Compare two builds back to back.

usage: [REDIS_SERVER=path] .venv/bin/python bench/tools/handoff_callgrind.py MODULE.so lock|rw|fair [K] [N]
(needs valgrind and redis-py: `make test-python` installs it into .venv)
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import redis

ACQUIRE = {
    "lock": lambda o: ["LOCK.ACQUIRE", "k", o, "30000", "BLOCK", "0"],
    "rw": lambda o: ["RWLOCK.WLOCK", "k", o, "30000", "BLOCK", "0"],
    "fair": lambda o: ["FAIRLOCK.ACQUIRE", "k", o, "30000", "60000", "BLOCK", "0"],
}
RELEASE = {
    "lock": lambda o: ["LOCK.UNLOCK", "k", o, "30000"],
    "rw": lambda o: ["RWLOCK.UNLOCK", "k", o, "WRITE", "30000"],
    "fair": lambda o: ["FAIRLOCK.UNLOCK", "k", o, "30000"],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    module, kind = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    port = free_port()
    out = os.path.join(tempfile.mkdtemp(prefix="handoff-cg-"), "cg.out")
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--instr-atstart=no",
         os.environ.get("REDIS_SERVER", "redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--loadmodule", os.path.abspath(module)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    admin = redis.Redis(port=port)
    for _ in range(600):
        try:
            admin.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.1)

    def client(i):
        c, owner = redis.Redis(port=port), f"o{i}"
        for _ in range(n):
            c.execute_command(*ACQUIRE[kind](owner))
            c.set("c", int(c.get("c") or 0) + 1)
            c.execute_command(*RELEASE[kind](owner))

    control = lambda flag: subprocess.run(["callgrind_control", "-i", flag, str(server.pid)],
                                          stdout=subprocess.DEVNULL, check=True)
    control("on")
    threads = [threading.Thread(target=client, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    control("off")
    sections = int(admin.get("c"))
    assert sections == k * n, f"mutual exclusion broken: {sections} != {k * n}"
    info = admin.info("lockmod")
    try:
        admin.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    server.wait()
    # The instructions counted while instrumentation was on (the `summary:` line counts none
    # when instrumentation starts off).
    totals = [int(l.split()[1]) for l in open(out) if l.startswith("totals:")]
    os.remove(out)
    os.rmdir(os.path.dirname(out))
    print(f"{os.path.basename(module)} {kind} K={k}: {totals[0] / sections:.0f} instructions per critical "
          f"section (handoffs {info.get('lockmod_handoffs')}, serve_timers {info.get('lockmod_serve_timers', '-')})")


if __name__ == "__main__":
    main()
