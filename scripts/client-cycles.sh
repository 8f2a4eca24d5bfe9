#!/usr/bin/env bash
# What an uncontended lock/unlock cycle costs the Python (sync, asyncio) and Node libraries:
# wall time and the client's own CPU per cycle over N cycles (default 10,000), against one
# server with the module, for this worktree's libraries and, given REF (a git ref), for that
# ref's too, alternating, ROUNDS times (default 3). Also prints the keys a run leaves behind.
#
#   bash scripts/client-cycles.sh [REF]        # e.g. main
#   SERVER=redis|redis8|valkey  LOCKMOD_MODULE=path.so  N=10000  ROUNDS=3
#
# The machine is shared: compare the two sides of one run, never runs of different days.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REF=${1:-}
N=${N:-10000}
ROUNDS=${ROUNDS:-3}
BIN=$(bash "$ROOT/scripts/server-bin.sh" "${SERVER:-redis}")
MODULE=${LOCKMOD_MODULE:-$ROOT/target/debug/libredis_lockmod.so}
PY="$ROOT/.venv/bin/python"
WORK=$(mktemp -d)
PORT=$("$PY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$BIN" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" --loadmodule "$MODULE" >"$WORK/log" 2>&1 &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null; wait $SERVER_PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do "$PY" -c "import redis; redis.Redis(port=$PORT).ping()" 2>/dev/null && break; sleep 0.1; done

sides=("here:$ROOT/clients")
if [ -n "$REF" ]; then
  git -C "$ROOT" archive "$REF" clients/python/src clients/node/lib clients/node/index.js clients/node/package.json | tar -x -C "$WORK"
  ln -s "$ROOT/clients/node/node_modules" "$WORK/clients/node/node_modules"
  sides+=("$REF:$WORK/clients")
fi

cat >"$WORK/cycles.py" <<'EOF'
import asyncio, os, time
import redis, redis.asyncio as aredis
from redis_lockmod import Lock
from redis_lockmod import asyncio as alocks

port, n = int(os.environ["PORT"]), int(os.environ["N"])
r = redis.Redis(port=port)
r.flushall()
lock = Lock(r, "cycles-sync", lease_ms=30_000)
for _ in range(500):
    lock.acquire(blocking=False); lock.release()
t, c = time.perf_counter(), time.process_time()
for _ in range(n):
    lock.acquire(blocking=False); lock.release()
sync = ((time.perf_counter() - t) / n * 1e6, (time.process_time() - c) / n * 1e6)
time.sleep(0.2)
left = r.dbsize()

async def main():
    ar = aredis.Redis(port=port)
    lock = alocks.Lock(ar, "cycles-async", lease_ms=30_000)
    for _ in range(500):
        await lock.acquire(); await lock.release()
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        await lock.acquire(); await lock.release()  # async with's form: BLOCK 0
    out = ((time.perf_counter() - t) / n * 1e6, (time.process_time() - c) / n * 1e6)
    await alocks.close(ar); await ar.aclose()
    return out

a = asyncio.run(main())
print(f"  python sync     wall {sync[0]:4.0f} us  cpu {sync[1]:4.0f} us  keys left {left}")
print(f"  python asyncio  wall {a[0]:4.0f} us  cpu {a[1]:4.0f} us")
EOF
cat >"$WORK/cycles.js" <<'EOF'
const Redis = require(process.env.LIB + '/node_modules/ioredis');
const { LockClient } = require(process.env.LIB);
(async () => {
  const n = Number(process.env.N);
  const r = new Redis({ port: Number(process.env.PORT) });
  await r.flushall();
  const locks = new LockClient(r);
  const lock = locks.lock('cycles-node', { lease: 30000 });
  for (let i = 0; i < 500; i++) { await lock.acquire(); await lock.release(); }
  const t = process.hrtime.bigint();
  const c = process.cpuUsage();
  for (let i = 0; i < n; i++) { await lock.acquire(); await lock.release(); }
  const wall = Number(process.hrtime.bigint() - t) / 1000 / n;
  const cu = process.cpuUsage(c);
  await new Promise((res) => setTimeout(res, 200));
  const left = await r.dbsize();
  console.log(`  node            wall ${wall.toFixed(0).padStart(4)} us  cpu ${((cu.user + cu.system) / n).toFixed(0).padStart(4)} us  keys left ${left}`);
  await locks.quit({ client: true });
})();
EOF

for round in $(seq "$ROUNDS"); do
  for side in "${sides[@]}"; do
    name=${side%%:*}; dir=${side#*:}
    echo "round $round, $name:"
    PORT=$PORT N=$N PYTHONPATH="$dir/python/src" "$PY" "$WORK/cycles.py"
    PORT=$PORT N=$N LIB="$dir/node" node "$WORK/cycles.js"
  done
done
