package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The floor of the uncontended cycle: what the server spends on one acquire and
// one release of a free lock, for holdfast's scripts and for the cheapest ways to
// do the same job. See docs/design.md, "The uncontended path".
var (
	// floorHashAcquire and floorHashRelease are the fewest calls a lock in
	// Redisson's layout (a hash, taken and released by scripts) can make: no
	// expected count, no hand-off, no unlock latch.
	floorHashAcquire = newScript(`if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return redis.status_reply('OK')
end
return redis.call('pttl', KEYS[1])`)
	floorHashRelease = newScript(`if redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('publish', KEYS[2], '0')
return 1`)
	// floorStringRelease is the release of a string lock taken with SET NX PX
	// (redsync's and bsm/redislock's shape, not Redisson's).
	floorStringRelease = newScript(`if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`)
)

// BenchmarkCycleFloor reports, per cycle (b.N cycles of each case), the server's
// execution time of the commands the client sent (INFO commandstats usec,
// scripts' inner calls included once) for:
//
//	holdfast:   lua.Acquire + lua.Release, the scripts rlock sends (latch included)
//	hash-floor: Redisson's layout with the fewest calls (no latch, no idempotency)
//	string:     SET NX PX + a GET/DEL script (a string lock, as redsync's)
//	ping:       two PINGs
//
// and the ratios between the first three. ns/op covers all four cases and the
// INFO probes. Run it alone, e.g. go test -run '^$' -bench CycleFloor -benchtime 20000x.
func BenchmarkCycleFloor(b *testing.B) {
	srv := redistest.Shared(b)
	rdb := srv.Client(b)
	admin := srv.Client(b)
	ctx := context.Background()
	name := redistest.Name(b)
	field := "3edaecd7-8b5a-4c47-bdc6-fff775044369:5577006791947779410"
	lk, ft := lua.NewLock(name+":hf"), lua.NewText(field)
	lease, latchTTL := lua.NewMillis(30*time.Second), lua.NewMillis(15*time.Second)
	cases := []struct {
		name string
		sent []string // the commands the client sends, as commandstats names them
		op   func() error
	}{
		{"holdfast", []string{"evalsha"}, func() error {
			if _, err := lua.Acquire(ctx, rdb, lua.AcquireArgs{Lock: lk, Field: ft, Lease: lease}); err != nil {
				return err
			}
			_, err := lua.Release(ctx, rdb, lua.ReleaseArgs{Lock: lk, Field: ft, Latch: lk.NewLatch(), Expected: 1, Levels: 1, LatchTTL: latchTTL})
			return err
		}},
		{"hash-floor", []string{"evalsha"}, func() error {
			key := name + ":hash"
			if err := floorHashAcquire.Run(ctx, rdb, []string{key}, 30000, field).Err(); err != nil {
				return err
			}
			return floorHashRelease.Run(ctx, rdb, []string{key, lua.ChannelName(key)}, field).Err()
		}},
		{"string", []string{"set", "evalsha"}, func() error {
			key := name + ":string"
			if err := rdb.SetNX(ctx, key, field, 30*time.Second).Err(); err != nil {
				return err
			}
			return floorStringRelease.Run(ctx, rdb, []string{key}, field).Err()
		}},
		{"ping", []string{"ping"}, func() error {
			if err := rdb.Ping(ctx).Err(); err != nil {
				return err
			}
			return rdb.Ping(ctx).Err()
		}},
	}
	// The cases run in turns of floorTurn cycles, in a rotating order, so that
	// the machine's drift hits them alike; each turn's usec goes to its case.
	usec := make([]float64, len(cases))
	for _, tc := range cases {
		require.NoError(b, tc.op(), tc.name) // loads the scripts
	}
	b.ResetTimer()
	for turn := 0; turn*floorTurn < b.N; turn++ {
		n := min(floorTurn, b.N-turn*floorTurn)
		for k := range cases {
			i := (k + turn) % len(cases)
			before := floorUsec(b, admin, cases[i].sent)
			for range n {
				if err := cases[i].op(); err != nil {
					b.Fatal(err)
				}
			}
			usec[i] += floorUsec(b, admin, cases[i].sent) - before
		}
	}
	b.StopTimer()
	for i, tc := range cases {
		b.ReportMetric(usec[i]/float64(b.N), tc.name+"-server-µs/op")
	}
	b.ReportMetric(usec[0]/usec[1], "holdfast/hash-floor")
	b.ReportMetric(usec[0]/usec[2], "holdfast/string")
	b.ReportMetric(usec[1]/usec[2], "hash-floor/string")
}

// floorTurn is how many cycles of one case run in a row.
const floorTurn = 200

// floorUsec returns the usec INFO commandstats reports for the commands names.
func floorUsec(tb testing.TB, rdb *redis.Client, names []string) float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(tb, err)
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || !contains(names, name) {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, err := strconv.ParseFloat(v, 64)
				require.NoError(tb, err)
				total += n
			}
		}
	}
	return total
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
