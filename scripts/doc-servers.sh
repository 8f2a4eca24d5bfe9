#!/usr/bin/env bash
# Runs a command with test servers for the Rust examples of the docs (the crate's doctests):
# a server with the module (REDIS_URL), a Sentinel watching it (REDIS_SENTINEL_URL,
# REDIS_SENTINEL_SERVICE) and a Redis Cluster by scripts/cluster.sh (REDIS_CLUSTER_NODES,
# comma-separated), on free 127.0.0.1 ports; everything is stopped when the command ends.
#
#   scripts/doc-servers.sh CMD [ARGS...]
#
# The server is $REDIS_SERVER, else the one SERVER=redis|redis8|valkey names (scripts/server-bin.sh);
# the module $LOCKMOD_MODULE, else target/debug. A missing one fails loudly.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
server="${REDIS_SERVER:-$(bash "$root/scripts/server-bin.sh" "${SERVER:-redis}")}"
module="${LOCKMOD_MODULE:-$root/target/debug/libredis_lockmod.so}"
[ -n "$server" ] || { echo "doc-servers: SERVER=${SERVER:-redis} is not installed (scripts/install-deps.sh)" >&2; exit 1; }
[ -f "$module" ] || { echo "doc-servers: no module at $module (cargo build --lib)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "doc-servers: no redis-cli (scripts/install-deps.sh)" >&2; exit 1; }

dir="$(mktemp -d "${TMPDIR:-/tmp}/lockmod-doc-servers.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -d "$dir/cluster" ] && REDIS_SERVER="$server" bash "$root/scripts/cluster.sh" stop --dir "$dir/cluster" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ping() {
  for _ in $(seq 1 500); do
    [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
    sleep 0.02
  done
  echo "doc-servers: nothing answers on port $1" >&2; return 1
}

port="$(free_port)"
"$server" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  --dir "$dir" --logfile "$dir/server.log" --loadmodule "$module" &
pids+=($!)
wait_ping "$port"

sport="$(free_port)"
cat > "$dir/sentinel.conf" <<CONF
port $sport
bind 127.0.0.1
dir $dir
logfile $dir/sentinel.log
sentinel monitor lockmod 127.0.0.1 $port 1
CONF
"$server" "$dir/sentinel.conf" --sentinel &
pids+=($!)
wait_ping "$sport"

ports="$(REDIS_SERVER="$server" bash "$root/scripts/cluster.sh" start --module "$module" --dir "$dir/cluster")"
nodes="$(for p in $ports; do printf 'redis://127.0.0.1:%s/,' "$p"; done)"

export REDIS_URL="redis://127.0.0.1:$port/"
export REDIS_SENTINEL_URL="redis://127.0.0.1:$sport/"
export REDIS_SENTINEL_SERVICE=lockmod
export REDIS_CLUSTER_NODES="${nodes%,}"
"$@"
