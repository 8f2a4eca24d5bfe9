#!/usr/bin/env bash
# Installs what building and testing need, and only what is missing: redis-server and
# redis-tools (the oldest supported server, Debian's 7.0), and clang/libclang for bindgen.
# Idempotent: a second run installs nothing. Uses apt-get (Debian/Ubuntu).
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-benchmark >/dev/null 2>&1 || need+=(redis-tools)
command -v clang >/dev/null 2>&1 || need+=(clang)
# bindgen loads libclang at run time; any libclang-*.so will do.
if ! ls /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi

if [ ${#need[@]} -eq 0 ]; then
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
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "install-deps: done" >&2
