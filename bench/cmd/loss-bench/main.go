// Command loss-bench measures how soon a holder learns that its lock is gone
// from Redis, and what learning it costs, on a private redis-server, and
// writes loss.md.
//
// It measures, in one run:
//
//   - detection: the time from an outside DEL of a held lock to holdfast's
//     Lease.Done and to the cancellation of rueidislock's lock context
//     (WithContext), round by round in turns, idle and with other holds of
//     the same client open (-others, 1,000);
//   - the server's commands per acquisition, and per renewal round, with
//     holdfast's client tracking on and off;
//   - the uncontended TryLock+Unlock cycle with tracking on and off, and
//     PING, interleaved op by op.
//
// Usage (from bench/):
//
//	go run ./cmd/loss-bench -out out          # about a minute
//	go run ./cmd/loss-bench -quick -out /tmp/lb
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/cli"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/redis/go-redis/v9"
)

type options struct {
	cli.Flags
	deletions int
	others    int
	settle    time.Duration
	holds     int
}

func main() {
	var o options
	o.Setup("loss-bench", "loss.md", "fewer rounds and cycles", "", nil)
	o.Uncontended("cycle-rounds", "row and round", 1000, 300)
	o.IntVar(&o.deletions, "rounds", 100, 50, "deletions per library and scenario")
	flag.IntVar(&o.others, "others", 1000, "other holds open in the busy scenario")
	flag.DurationVar(&o.settle, "settle", 20*time.Millisecond, "how long each lock is held before its deletion")
	flag.IntVar(&o.holds, "holds", 1000, "acquisitions counted for the server's commands per acquisition")
	o.Run(func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	srv, err := cli.StartServer(&o.Flags)
	if err != nil {
		return err
	}
	defer srv.Stop()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer admin.Close()

	var r results
	for _, others := range []int{0, o.others} {
		log.Printf("detection, %d other holds: %d rounds per library", others, o.deletions)
		d, err := detection(ctx, srv.Addr, admin, others, o)
		if err != nil {
			return fmt.Errorf("detection with %d other holds: %w", others, err)
		}
		r.detect = append(r.detect, d)
	}
	log.Printf("server commands per acquisition and per renewal round")
	if r.costs, err = serverCosts(ctx, srv.Addr, admin, o); err != nil {
		return fmt.Errorf("server commands: %w", err)
	}
	log.Printf("uncontended cycle: %d rounds of %d cycles", o.Rounds, o.Cycles)
	if r.cycle, err = cycles(ctx, srv.Addr, o); err != nil {
		return fmt.Errorf("uncontended cycle: %w", err)
	}
	md := r.markdown(o, srv, started)
	path, err := o.Output().Write("loss.md", md)
	if err != nil {
		return err
	}
	fmt.Print(md)
	o.Output().Wrote(path, 0, time.Since(started))
	return nil
}

// results is everything the run measured.
type results struct {
	detect []detected
	costs  []cost
	cycle  []cycleRow
}

// markdown renders the report.
func (r results) markdown(o options, srv *cli.Server, started time.Time) string {
	s := report.Header("Loss detection", "`make bench-loss` (bench/cmd/loss-bench)", started.UTC(), time.Since(started), o.Quick)
	s += "\n" + srv.Link.Line() + ".\n"
	s += "\n" + srv.Env.Table()
	s += detectionTable(r.detect, o)
	s += costTable(r.costs, o)
	s += cycleTable(r.cycle, o)
	return s
}

// errNotLost: the handle of a deleted lock did not end in time.
var errNotLost = errors.New("the handle did not end within 30 s of the deletion")
