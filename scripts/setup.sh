#!/usr/bin/env bash
# Installs what the tests need on a Debian machine: redis-server (and redis-cli).
# Idempotent: does nothing when redis-server is already on PATH.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  echo "setup: $(redis-server --version)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: redis-server is missing and apt-get is not available; install Redis >= 7 by hand" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
# Debian's package may start a system service on 6379; the tests never use it.
echo "setup: $(redis-server --version)"
