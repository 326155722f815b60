#!/usr/bin/env bash
# cycle-compare.sh REF [ROUNDS CYCLES]: the uncontended Lock+Unlock cycle of
# the working tree against the one of git revision REF, in one process and
# interleaved op by op, on a private redis-server: "before and after in one
# run". REF's root module is copied to a temporary directory under another
# module path, so that one binary links both versions.
set -euo pipefail
ref=${1:?usage: scripts/cycle-compare.sh REF [ROUNDS CYCLES]}
rounds=${2:-10}
cycles=${3:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/old" "$tmp/cmp"
git -C "$root" archive "$ref" | tar -x -C "$tmp/old"
(cd "$tmp/old" && rm -rf integration bench examples holdfastotel cmd scripts &&
	find . -name '*.go' -o -name go.mod | xargs sed -i 's#github.com/holdfast-go/holdfast#holdfastold#g')

cat > "$tmp/cmp/go.mod" <<MOD
module cyclecompare

go 1.26.0

require (
	github.com/holdfast-go/holdfast v0.0.0
	holdfastold v0.0.0
)

replace github.com/holdfast-go/holdfast => $root

replace holdfastold => $tmp/old
MOD
cat > "$tmp/cmp/main.go" <<'SRC'
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	newrlock "github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	oldrlock "holdfastold/rlock"
)

func main() {
	rounds, _ := strconv.Atoi(os.Args[1])
	cycles, _ := strconv.Atoi(os.Args[2])
	ref := os.Args[3]
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		bin = "/usr/bin/redis-server"
	}
	srv := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Process.Kill()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	ctx := context.Background()
	ping := redis.NewClient(&redis.Options{Addr: addr})
	for ping.Ping(ctx).Err() != nil {
		time.Sleep(10 * time.Millisecond)
	}
	newc, err := newrlock.New(redis.NewClient(&redis.Options{Addr: addr}))
	if err != nil {
		panic(err)
	}
	defer newc.Close()
	oldc, err := oldrlock.New(redis.NewClient(&redis.Options{Addr: addr}))
	if err != nil {
		panic(err)
	}
	defer oldc.Close()
	nm, om := newc.NewMutex("cycle:new"), oldc.NewMutex("cycle:old")
	ops := []struct {
		name string
		op   func() error
	}{
		{"before (" + ref + ")", func() error {
			l, err := om.TryLock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}},
		{"after (working tree)", func() error {
			l, err := nm.TryLock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}},
		{"PING", func() error { return ping.Ping(ctx).Err() }},
	}
	means := make([][]time.Duration, len(ops))
	for range 200 {
		for _, o := range ops {
			if err := o.op(); err != nil {
				panic(err)
			}
		}
	}
	for r := range rounds {
		sums := make([]time.Duration, len(ops))
		for i := range cycles {
			for j := range ops {
				k := (j + i + r) % len(ops) // rotate who goes first
				start := time.Now()
				if err := ops[k].op(); err != nil {
					panic(err)
				}
				sums[k] += time.Since(start)
			}
		}
		for k := range ops {
			means[k] = append(means[k], sums[k]/time.Duration(cycles))
		}
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	before := med(means[0])
	fmt.Printf("%d rounds of %d ops per row, interleaved; median of the rounds' means\n", rounds, cycles)
	for k, o := range ops {
		ratios := make([]float64, len(means[k]))
		for r := range means[k] {
			ratios[r] = float64(means[k][r]) / float64(means[0][r])
		}
		slices.Sort(ratios)
		fmt.Printf("%-28s %10v  ÷ before %.3f (per-round ratios %.3f–%.3f)\n", o.name, med(means[k]), float64(med(means[k]))/float64(before), ratios[0], ratios[len(ratios)-1])
	}
}
SRC
cp "$root/go.sum" "$tmp/cmp/go.sum"
cd "$tmp/cmp"
GOFLAGS=-mod=mod "$GO" mod tidy >/dev/null 2>&1
GOFLAGS=-mod=mod "$GO" run . "$rounds" "$cycles" "$ref"
