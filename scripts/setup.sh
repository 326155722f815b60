#!/usr/bin/env bash
# Installs what the tests need on a Debian machine: redis-server (and redis-cli), and, for
# the network-namespace tests of integration/redistest (root only), ip and nft.
# Idempotent: does nothing when they are already there.
set -euo pipefail
# have NAME: NAME is on PATH, or in an sbin directory a non-root PATH may lack.
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
packages=()
if ! have redis-server; then packages+=(redis-server); fi
# The network-namespace tests need root: install their tools only for root (CI), never
# through sudo on a developer's machine, where those tests are skipped anyway.
if [ "$(id -u)" = 0 ] && [ "$(uname -s)" = Linux ]; then
  if ! have nft; then packages+=(nftables); fi
  if ! have ip; then packages+=(iproute2); fi
fi
if [ ${#packages[@]} = 0 ]; then
  echo "setup: $(redis-server --version)"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  if ! have redis-server; then
    echo "setup: redis-server is missing and apt-get is not available; install Redis >= 7 by hand" >&2
    exit 1
  fi
  echo "setup: ${packages[*]} missing and apt-get is not available: the network-namespace tests will be skipped" >&2
  echo "setup: $(redis-server --version)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# Debian's package may start a system service on 6379; the tests never use it.
echo "setup: $(redis-server --version)"
