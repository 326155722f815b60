#!/usr/bin/env bash
# make release-check: can a user consume holdfast's modules once they are tagged? It applies
# scripts/release.sh to a copy of the tree (the files git tracks or would track), publishes the
# modules users reach (holdfast, holdfastotel, holdfastgocron, holdfastasynq, integration/redistest) at
# $RELEASE_CHECK_VERSION
# (default v0.99.0) into a local module proxy, and runs what a new user runs, in a new module
# outside the repository: go get, go mod tidy, go build, go vet, go install …/cmd/holdfast@VERSION
# and `holdfast version`.
#
# The proxy serves every module that build reaches, third-party ones included, from the file
# system: a first pass fetches what the steps need through the usual proxy into a scratch
# module cache and copies it into the local proxy; the second pass, the check, runs with
# GOPROXY=file://… only and a fresh GOMODCACHE, so that a requirement on a version nobody
# publishes (v0.0.0-00010101000000-000000000000, a module that is not released) fails it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
GO="${GO:-go}"
version="${RELEASE_CHECK_VERSION:-v0.99.0}"
published=(. holdfastotel holdfastgocron holdfastasynq integration/redistest)
upstream="$("$GO" env GOPROXY)"

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
say() { echo "release-check: $*"; }

say "copying the tree and applying scripts/release.sh $version"
mkdir -p "$work/tree"
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work/tree"
(cd "$work/tree" && bash scripts/release.sh "$version" | sed 's/^/  /')

"$GO" build -o "$work/modproxy" ./scripts/modproxy
(cd "$work/tree" && "$work/modproxy" -out "$work/ours" -version "$version" "${published[@]}" | sed 's/^/  /')

# The user's program: a lock with the OpenTelemetry observer, gocron's Locker and an asynq
# middleware on it.
userModule() {
  mkdir -p "$1"
  cat >"$1/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/holdfastasynq"
	"github.com/holdfast-go/holdfast/holdfastgocron"
	"github.com/holdfast-go/holdfast/holdfastotel"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

func main() {
	obs, err := holdfastotel.NewObserver()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	c, err := rlock.New(rdb, rlock.WithObserver(obs))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println("a client, with its observer:", c.NewMutex("orders:42").Name())
	if _, err := holdfastgocron.NewLocker(c, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("and a gocron Locker on it")
	mux := asynq.NewServeMux()
	mux.Use(holdfastasynq.Serialize(c, func(t *asynq.Task) string { return string(t.Payload()) }))
	fmt.Println("and an asynq middleware")
}
EOF
}

# steps runs the user's steps in directory $1 with the environment given after it.
steps() {
  local dir=$1
  shift
  (
    cd "$dir"
    export GOFLAGS= GOWORK=off GOTOOLCHAIN=local GOSUMDB=off GOBIN="$dir/bin" "$@"
    run() { echo "  \$ $*"; "$@" 2>&1 | sed 's/^/    /'; return "${PIPESTATUS[0]}"; }
    run "$GO" mod init example.com/newuser
    run "$GO" get "github.com/holdfast-go/holdfast@$version" "github.com/holdfast-go/holdfast/holdfastotel@$version" "github.com/holdfast-go/holdfast/holdfastgocron@$version" "github.com/holdfast-go/holdfast/holdfastasynq@$version"
    run "$GO" mod tidy
    run "$GO" build ./...
    run "$GO" vet ./...
    run ./newuser
    run "$GO" install "github.com/holdfast-go/holdfast/cmd/holdfast@$version"
    run "$dir/bin/holdfast" version
    [ "$("$dir/bin/holdfast" version | cut -d' ' -f2)" = "$version" ] || { echo "  holdfast version does not say $version"; exit 1; }
  )
}

say "first pass: what the steps reach, through $upstream"
userModule "$work/fetch"
steps "$work/fetch" GOMODCACHE="$work/fetchcache" GOPROXY="file://$work/ours,$upstream" >"$work/fetch.log" 2>&1 || {
  cat "$work/fetch.log"
  say "FAIL: the steps fail even with the usual proxy"
  exit 1
}
mkdir -p "$work/proxy"
cp -R "$work/fetchcache/cache/download/." "$work/proxy/"
cp -R "$work/ours/." "$work/proxy/"

say "the check: a new module, a fresh module cache, GOPROXY=file://… only ($(find "$work/proxy" -name '*.zip' | wc -l) module versions)"
userModule "$work/user"
if steps "$work/user" GOMODCACHE="$work/modcache" GOPROXY="file://$work/proxy"; then
  say "ok: holdfast, holdfastotel, holdfastgocron and holdfastasynq $version can be got, tidied, built, vetted and installed"
else
  say "FAIL: a user cannot consume the modules at $version (above: the step that failed)"
  exit 1
fi
