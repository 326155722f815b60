package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/harness"
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

// cycles times, interleaved op by op (harness.TimeInterleaved), TryLock +
// Unlock of a free Mutex on a client with tracking on and one with it off,
// and PING: o.Rounds rounds of o.Cycles ops per row.
func cycles(ctx context.Context, addr string, o options) ([]cycleRow, error) {
	var closers harness.Closers
	defer closers.Close()
	var ops []harness.Op
	for _, track := range []bool{true, false} {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		closers.Add(rdb.Close)
		c, err := rlock.New(rdb, rlock.WithTracking(track))
		if err != nil {
			return nil, err
		}
		closers.Add(c.Close)
		m := c.NewMutex(fmt.Sprintf("cycle:%v", track))
		ops = append(ops, harness.Op{Name: fmt.Sprintf("TryLock + Unlock, tracking %s", onOff(track)), Run: func(ctx context.Context) error {
			l, err := m.TryLock(ctx)
			if err != nil {
				return err
			}
			return l.Unlock(ctx)
		}})
	}
	ping := redis.NewClient(&redis.Options{Addr: addr})
	closers.Add(ping.Close)
	ops = append(ops, harness.Op{Name: "PING", Run: func(ctx context.Context) error { return ping.Ping(ctx).Err() }})
	for _, op := range ops {
		if err := op.Repeat(ctx, 50); err != nil { // warm-up
			return nil, err
		}
	}
	lat, err := harness.TimeInterleaved(ctx, ops, o.Rounds, o.Cycles, 1)
	if err != nil {
		return nil, err
	}
	out := make([]cycleRow, len(ops))
	for i, op := range ops {
		out[i].name = op.Name
		for r := range o.Rounds {
			var sum int64
			for _, d := range lat[i][r*o.Cycles : (r+1)*o.Cycles] {
				sum += d
			}
			out[i].rounds = append(out[i].rounds, time.Duration(sum/int64(o.Cycles)))
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
