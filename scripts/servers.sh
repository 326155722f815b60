#!/usr/bin/env bash
# Builds the servers of the compatibility matrix from source tarballs, into a git-ignored
# cache, and prints one line per server: its name and the path of its server binary.
#
#   scripts/servers.sh            build what is missing, then list every server
#   scripts/servers.sh --list     list what is built, build nothing
#
# The matrix is Debian's redis-server (on PATH, installed by scripts/setup.sh) plus the
# tarballs found in $HOLDFAST_SERVER_SOURCES, by default ../shared/servers beside the
# repository when it exists: redis-6.2.16, redis-7.4.1, valkey-7.2.7, valkey-8.0.1
# (each `git archive` of its release tag). A tarball is checked against SHA256SUMS when
# the directory has one. Each builds with `make -j2 MALLOC=libc BUILD_TLS=no` (gcc, make,
# libc6-dev) in about a minute on 2 cores, into $HOLDFAST_SERVER_CACHE (default
# .cache/servers in the repository); a server already built from the same tarball is
# not built again. Build logs are kept beside each build (build.log).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${HOLDFAST_SERVER_CACHE:-$root/.cache/servers}"
list_only=0
[ "${1:-}" = "--list" ] && list_only=1

sources="${HOLDFAST_SERVER_SOURCES:-}"
if [ -z "$sources" ] && [ -d "$root/../shared/servers" ]; then
  sources="$(cd "$root/../shared/servers" && pwd)"
fi

# debian: the redis-server on PATH is the matrix's Redis 7.0.
if command -v redis-server >/dev/null 2>&1; then
  echo "debian-$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p') $(command -v redis-server)"
else
  echo "servers: no redis-server on PATH: run scripts/setup.sh (make setup)" >&2
  exit 1
fi

if [ -z "$sources" ] || ! ls "$sources"/*.tar.gz >/dev/null 2>&1; then
  cat >&2 <<MSG
servers: no server sources: the matrix needs the tarballs of Redis 6.2.16, 7.4.1 and
Valkey 7.2.7, 8.0.1. Put them in a directory and set HOLDFAST_SERVER_SOURCES to it
(default: ../shared/servers beside the repository, which is ${sources:-missing} here).
No machine of this project can download them: copy them from shared/servers.
MSG
  exit 1
fi

if [ -f "$sources/SHA256SUMS" ] && [ "$list_only" = 0 ]; then
  (cd "$sources" && sha256sum --quiet -c SHA256SUMS) || {
    echo "servers: a tarball in $sources does not match SHA256SUMS" >&2
    exit 1
  }
fi

mkdir -p "$cache"
for tarball in "$sources"/*.tar.gz; do
  name="$(basename "$tarball" .tar.gz)"
  dir="$cache/$name"
  sum="$(sha256sum "$tarball" | cut -d' ' -f1)"
  bin="$dir/src/redis-server"
  case "$name" in valkey-*) bin="$dir/src/valkey-server" ;; esac
  if [ "$(cat "$dir/.built" 2>/dev/null)" != "$sum" ]; then
    if [ "$list_only" = 1 ]; then
      continue
    fi
    echo "servers: building $name (about a minute; log in $dir/build.log)" >&2
    rm -rf "$dir"
    tar -xzf "$tarball" -C "$cache"
    start=$SECONDS
    if ! make -C "$dir" -j"$(nproc)" MALLOC=libc BUILD_TLS=no >"$cache/$name.log" 2>&1; then
      tail -30 "$cache/$name.log" >&2
      echo "servers: building $name failed (whole log: $cache/$name.log)" >&2
      exit 1
    fi
    mv "$cache/$name.log" "$dir/build.log"
    echo "servers: built $name in $((SECONDS - start)) s" >&2
    echo "$sum" >"$dir/.built"
  fi
  echo "$name $bin"
done
