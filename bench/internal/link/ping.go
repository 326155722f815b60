package link

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/redis/go-redis/v9"
)

// Info is a run's link and the PING measured through it, for the reports'
// headers and JSON.
type Info struct {
	// Profile is the profile's name, OneWay its added delay each way.
	Profile string        `json:"profile"`
	About   string        `json:"about"`
	OneWay  time.Duration `json:"one_way_delay_ns"`
	// Pings is how many PINGs one client sent through the link, one at a
	// time; PingP50 and PingP99 their round trips.
	Pings   int           `json:"pings"`
	PingP50 time.Duration `json:"ping_p50_ns"`
	PingP99 time.Duration `json:"ping_p99_ns"`
}

// Line renders the info for a report's header: "link: slow (1 ms each way),
// PING p50 2.54 ms, p99 2.80 ms".
func (i Info) Line() string {
	return fmt.Sprintf("link: %s, PING p50 %s, p99 %s (%d PINGs through the link at the start)",
		i.About, report.Duration(i.PingP50), report.Duration(i.PingP99), i.Pings)
}

// Measure sends n PINGs, one at a time, on one go-redis client to addr
// (after a few unmeasured ones) and returns the info of profile p.
func Measure(ctx context.Context, p Profile, addr string, n int) (Info, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer rdb.Close()
	for range 10 {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return Info{}, fmt.Errorf("PING through link %s: %w", p.Name, err)
		}
	}
	rts := make([]time.Duration, n)
	for k := range rts {
		t0 := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			return Info{}, fmt.Errorf("PING through link %s: %w", p.Name, err)
		}
		rts[k] = time.Since(t0)
	}
	slices.Sort(rts)
	at := func(q float64) time.Duration { return rts[min(len(rts)-1, int(q*float64(len(rts))))] }
	return Info{Profile: p.Name, About: p.String(), OneWay: p.Delay, Pings: n, PingP50: at(0.5), PingP99: at(0.99)}, nil
}
