#!/usr/bin/env bash
# Starts redis-server in the foreground with the module loaded.
# Usage: scripts/run-server.sh MODULE_PATH [PORT] [extra redis-server arguments...]
set -euo pipefail
module=${1:?usage: run-server.sh MODULE_PATH [PORT] [args...]}
port=${2:-6379}
shift $(( $# >= 2 ? 2 : 1 ))
echo "redis-server on 127.0.0.1:$port with $module (Ctrl-C stops it)" >&2
exec redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
  --loadmodule "$(realpath "$module")" "$@"
