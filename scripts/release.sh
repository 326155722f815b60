#!/usr/bin/env bash
# Prepares a release: sets the version every module of the repository requires of holdfast's
# other modules to VERSION, as go-redis' scripts/release.sh does, and lists the tags to make.
# It edits go.mod files; it does not commit, tag or push.
#
#   scripts/release.sh VERSION        e.g. scripts/release.sh v0.9.0
#
# Published modules (what a user's `go get` and `go mod tidy` reach):
#   github.com/holdfast-go/holdfast                          tag VERSION
#   github.com/holdfast-go/holdfast/holdfastotel             tag holdfastotel/VERSION
#   github.com/holdfast-go/holdfast/holdfastgocron           tag holdfastgocron/VERSION
#   github.com/holdfast-go/holdfast/holdfastasynq            tag holdfastasynq/VERSION
#   github.com/holdfast-go/holdfast/integration/redistest    tag integration/redistest/VERSION
#     (the test harness: holdfastotel's tests start real servers with it)
# The other modules (integration, examples/otel, bench, the harness's containers helper) are
# the repository's own tests, example and tools; their requirements are set too, so that the
# tree at the tag is consistent, and they are tagged alike, as go-redis tags every module.
# Inside the repository the replace directives keep pointing at the checkout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

version="${1:-}"
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'
if ! [[ "$version" =~ $semver ]]; then
  echo "usage: scripts/release.sh VERSION   (a semantic version: v0.9.0, v1.2.0-rc.1)" >&2
  exit 2
fi
own="github.com/holdfast-go/holdfast"

# requires lists the module paths a go.mod requires (single-line and block forms).
requires() {
  awk '/^require \(/ {block = 1; next}
       block && /^\)/ {block = 0; next}
       block && NF >= 2 {print $1}
       /^require [^(]/ {print $2}' "$1"
}

mods=$(find . -name go.mod -not -path './.cache/*' -not -path './.git/*' | sort)
for gomod in $mods; do
  dir="$(dirname "$gomod")"
  for path in $(requires "$gomod" | grep -E "^${own}(/|$)" || true); do
    go mod edit -require="$path@$version" "$gomod"
    echo "release: ${dir#./}: requires $path $version"
  done
done

echo "release: the tags to make, after committing:"
for gomod in $mods; do
  dir="$(dirname "$gomod")"
  if [ "$dir" = "." ]; then
    echo "  $version"
  else
    echo "  ${dir#./}/$version"
  fi
done
