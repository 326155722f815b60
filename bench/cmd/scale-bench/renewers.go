package main

import (
	"context"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
)

// renewers opens, per library with a renewal of its own, a client that
// renews its holds. redsync and redislock have none: their holders call
// Extend themselves.
var renewers = map[string]func(addr string, o options) (*renewer, error){
	libs.Holdfast: openHoldfastRenewer,
	"rueidislock": openRueidisRenewer,
}

// roundObserver counts the watchdog's rounds that renewed holds.
type roundObserver struct{ rounds *countedRounds }

func (roundObserver) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (roundObserver) End(context.Context, observe.Call, observe.Result)         {}

// Renewed counts a round when it renewed holds.
func (o roundObserver) Renewed(outcome observe.RenewOutcome, _ int) {
	if outcome == observe.RenewOK {
		o.rounds.add(1)
	}
}

// openHoldfastRenewer opens an rlock.Client whose watchdog gives a lease of
// three renew intervals, with client tracking off (the renewals then go
// through the go-redis client, whose hook counts them; with tracking they go
// through the tracker's connections, the same pipelines), and TryLock as the
// acquire.
func openHoldfastRenewer(addr string, o options) (*renewer, error) {
	rdb, count := libs.NewGoRedis(addr)
	rounds := newCountedRounds()
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(3*o.renewInterval), rlock.WithRenewInterval(o.renewInterval),
		rlock.WithTracking(false), rlock.WithObserver(roundObserver{rounds}))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &renewer{
		acquire: func(ctx context.Context, names []string) error {
			return acquireAll(ctx, names, func(ctx context.Context, name string) error {
				_, err := c.NewMutex(name).TryLock(ctx)
				return err
			})
		},
		rounds:     rounds.load,
		wait:       rounds.wait,
		roundTrips: count,
		close: func() error {
			err := c.Close()
			return cmpErr(err, rdb.Close())
		},
	}, nil
}

// openRueidisRenewer opens a rueidislock.Locker with the settings of
// libs' rueidislock: each held lock has a goroutine of its own that extends
// it every ExtendInterval (2.5 s), one script call per lock. A round is one
// extension of every hold: its rounds are the client's calls since the last
// acquisition ÷ the holds (the timers drift apart, so the clock would cut
// rounds short).
func openRueidisRenewer(addr string, _ options) (*renewer, error) {
	l, cnt, err := libs.NewRueidisLocker(addr)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		cancels []context.CancelFunc
		base    int64 // calls at the end of the acquisitions
	)
	rounds := func() float64 {
		mu.Lock()
		defer mu.Unlock()
		if len(cancels) == 0 {
			return 0
		}
		return float64(cnt.Load()-base) / float64(len(cancels))
	}
	return &renewer{
		acquire: func(ctx context.Context, names []string) error {
			err := acquireAll(ctx, names, func(ctx context.Context, name string) error {
				_, cancel, err := l.WithContext(context.Background(), name)
				if err == nil {
					mu.Lock()
					cancels = append(cancels, cancel)
					mu.Unlock()
				}
				return err
			})
			mu.Lock()
			base = cnt.Load()
			mu.Unlock()
			return err
		},
		rounds: rounds,
		wait: func(ctx context.Context, r float64) error {
			for rounds() < r {
				select {
				case <-time.After(250 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		},
		roundTrips: cnt.Load,
		close: func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, cancel := range cancels {
				cancel()
			}
			l.Close()
			return nil
		},
	}, nil
}
