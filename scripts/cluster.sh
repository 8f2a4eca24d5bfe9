#!/usr/bin/env bash
# A local Redis Cluster to try the module on: 3 primaries with one replica each, on free
# 127.0.0.1 ports, the module loaded on every node.
#
#   scripts/cluster.sh start  [--module PATH] [--dir DIR]   prints the six ports
#   scripts/cluster.sh status [--dir DIR]                   CLUSTER NODES of the first node
#   scripts/cluster.sh stop   [--dir DIR]                   kills exactly its pids, removes DIR
#
# The server is redis-server, or the one SERVER=redis|redis8|valkey names (REDIS_SERVER=path wins), as
# in the test harness. DIR (default target/cluster) holds one directory per node plus `ports`
# and `pids`; the integration tests (tests/common/cluster.rs) drive this script with their own
# DIR. The cluster-node-timeout is short (2 s) so that failover tests do not wait long.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

cmd="${1:-}"
shift || true
module="$root/target/debug/libredis_lockmod.so"
dir="$root/target/cluster"
while [ $# -gt 0 ]; do
  case "$1" in
    --module) module="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

server="${REDIS_SERVER:-$(bash "$root/scripts/server-bin.sh" "${SERVER:-redis}")}"
cli="$(command -v redis-cli || true)"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port whose cluster bus port (+10000) is free too, and not already chosen.
pick_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((15000 + RANDOM % 15000))
    if port_free "$p" && port_free $((p + 10000)) && ! grep -qx "$p" "$dir/ports" 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  echo "cluster.sh: no free port" >&2
  return 1
}

stop() {
  if [ -f "$dir/pids" ]; then
    while read -r pid; do
      kill "$pid" 2>/dev/null || true
    done <"$dir/pids"
    # Wait for exactly these processes, so the ports are free when stop returns.
    while read -r pid; do
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
      kill -9 "$pid" 2>/dev/null || true
    done <"$dir/pids"
  fi
  rm -rf "$dir"
}

# Starts one node on a free port and waits until it answers as itself (its INFO's process_id:
# tests run side by side, so another test's server may answer on a port found free); another
# process may take the port between the check and the bind, so a node that exits at once is
# retried on a new port.
start_node() {
  local p pid
  for _ in 1 2 3 4 5; do
    p=$(pick_port)
    mkdir -p "$dir/$p"
    "$server" --port "$p" --bind 127.0.0.1 --daemonize no --save "" --appendonly no \
      --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
      --enable-debug-command yes --enable-module-command yes \
      --dir "$dir/$p" --logfile "$dir/$p/server.log" --loadmodule "$module" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 200); do
      kill -0 "$pid" 2>/dev/null || break
      "$cli" -p "$p" INFO server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$pid" \
        && [ "$("$cli" -p "$p" PING 2>/dev/null)" = PONG ] && { echo "$p" >>"$dir/ports"; echo "$pid" >>"$dir/pids"; return 0; }
      sleep 0.05
    done
    kill "$pid" 2>/dev/null || true
    echo "cluster.sh: node on $p did not start: $(tail -2 "$dir/$p/server.log")" >&2
    rm -rf "${dir:?}/$p"
  done
  return 1
}

start() {
  [ -n "$server" ] || { echo "cluster.sh: ${SERVER:-redis} server not installed (scripts/install-deps.sh)" >&2; exit 1; }
  [ -n "$cli" ] || { echo "cluster.sh: redis-cli not installed (scripts/install-deps.sh)" >&2; exit 1; }
  [ -f "$module" ] || { echo "cluster.sh: no module at $module (cargo build --lib)" >&2; exit 1; }
  if [ -f "$dir/pids" ]; then echo "cluster.sh: $dir already holds a cluster (stop it first)" >&2; exit 1; fi
  mkdir -p "$dir"
  : >"$dir/ports"
  : >"$dir/pids"
  # On any failure below, leave nothing running.
  trap 'stop; exit 1' ERR
  for _ in 1 2 3 4 5 6; do start_node; done
  nodes=()
  for p in $(cat "$dir/ports"); do nodes+=("127.0.0.1:$p"); done
  "$cli" --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; false; }
  for p in $(cat "$dir/ports"); do
    for _ in $(seq 1 400); do
      "$cli" -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' && break
      sleep 0.05
    done
    "$cli" -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || { echo "cluster.sh: node $p not ok" >&2; false; }
  done
  # Every node must also know every other node's role before clients rely on CLUSTER SLOTS.
  for p in $(cat "$dir/ports"); do
    for _ in $(seq 1 400); do
      [ "$("$cli" -p "$p" CLUSTER NODES | grep -c ' connected')" -ge 6 ] &&
        [ "$("$cli" -p "$p" CLUSTER NODES | grep -c 'slave')" -ge 3 ] && break
      sleep 0.05
    done
  done
  # Replicas in sync, so that a first WAIT or failover does not wait for the initial full sync.
  for p in $(cat "$dir/ports"); do
    for _ in $(seq 1 400); do
      info=$("$cli" -p "$p" INFO replication)
      echo "$info" | grep -q '^role:master' && break
      echo "$info" | grep -q '^master_link_status:up' && break
      sleep 0.05
    done
  done
  trap - ERR
  cat "$dir/ports"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status)
    [ -f "$dir/ports" ] || { echo "cluster.sh: no cluster in $dir" >&2; exit 1; }
    "$cli" -p "$(head -1 "$dir/ports")" CLUSTER NODES ;;
  *) echo "usage: scripts/cluster.sh start|stop|status [--module PATH] [--dir DIR]" >&2; exit 2 ;;
esac
