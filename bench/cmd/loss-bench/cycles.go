package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// cycleRow is one row of the uncontended comparison: its per-round means.
type cycleRow struct {
	name   string
	rounds []time.Duration // mean op time of each round
}

// median returns the median of the row's round means.
func (r cycleRow) median() time.Duration {
	s := slices.Clone(r.rounds)
	slices.Sort(s)
	return s[len(s)/2]
}

// cycles times, interleaved op by op, TryLock+Unlock of a free Mutex on a
// client with tracking on and one with it off, and PING: o.Rounds rounds of
// o.Cycles ops per row.
func cycles(ctx context.Context, addr string, o options) ([]cycleRow, error) {
	type row struct {
		name string
		op   func() error
	}
	var rows []row
	for _, track := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		defer rdb.Close()
		c, err := rlock.New(rdb, rlock.WithTracking(track))
		if err != nil {
			return nil, err
		}
		defer c.Close()
		m := c.NewMutex(fmt.Sprintf("cycle:%v", track))
		rows = append(rows, row{fmt.Sprintf("TryLock + Unlock, tracking %s", onOff(track)), func() error {
			l, err := m.TryLock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}})
	}
	ping := redis.NewClient(&redis.Options{Addr: addr})
	defer ping.Close()
	rows = append(rows, row{"PING", func() error { return ping.Ping(ctx).Err() }})

	out := make([]cycleRow, len(rows))
	for i, r := range rows {
		out[i].name = r.name
		for range 50 { // warm-up
			if err := r.op(); err != nil {
				return nil, err
			}
		}
	}
	for range o.Rounds {
		sums := make([]time.Duration, len(rows))
		for range o.Cycles {
			for i, r := range rows {
				start := time.Now()
				if err := r.op(); err != nil {
					return nil, err
				}
				sums[i] += time.Since(start)
			}
		}
		for i := range rows {
			out[i].rounds = append(out[i].rounds, sums[i]/time.Duration(o.Cycles))
		}
	}
	return out, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// cycleTable renders the uncontended comparison.
func cycleTable(rows []cycleRow, o options) string {
	var b report.MD
	b.P("\n## The uncontended cycle, tracking on and off\n\n"+
		"One goroutine, each row on a client of its own, interleaved op by op: %d rounds of %d ops per "+
		"row; the median of the rounds' means. A cycle shorter than the tracker's first look (2 ms) sends "+
		"nothing more to Redis: it costs an append to a slice and, while holds keep coming, the wake-up of the "+
		"tracker's 2 ms timer (a few µs of client CPU per cycle, measured with getrusage).\n\n", o.Rounds, o.Cycles)
	b.WriteString("| op | median of round means | ÷ tracking off | ÷ PING |\n| --- | ---: | ---: | ---: |\n")
	off, ping := rows[1].median(), rows[len(rows)-1].median()
	for _, r := range rows {
		m := r.median()
		b.P("| %s | %s | %s | %s |\n", r.name, report.Duration(m), report.DurationRatio(m, off), report.DurationRatio(m, ping))
	}
	return b.String()
}
