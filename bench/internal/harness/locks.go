package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
)

// Modes of a lock command's workers (Config.Mode): what the goroutines
// lock.
const (
	// ModeShared: every goroutine on the lock Key.
	ModeShared = ""
	// ModeDistinct: goroutine g on the lock Key:g.
	ModeDistinct = "distinct"
	// ModeRead: every goroutine on the read side of Key (NewReadLocker).
	ModeRead = "read"
	// modeNames: see NamesMode.
	modeNames = "names="
)

// NamesMode is the mode in which every Lock call picks one of n names,
// Key:0 … Key:n−1, at random.
func NamesMode(n int) string { return modeNames + strconv.Itoa(n) }

// ServeLocks is the worker process of a lock command: it opens the library
// cfg.Lib, checks it with a PING, takes and releases a lock nobody else uses
// (connections, scripts, subscriptions), and serves the run with Lock as the
// acquire and its unlock as the release, on the locks cfg.Mode says.
func ServeLocks(cfg Config) error {
	lib, ok := libs.ByName(cfg.Lib)
	if !ok {
		return fmt.Errorf("unknown library %q", cfg.Lib)
	}
	inst, err := lib.Open(cfg.Addr)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err = inst.Ping(pctx)
	cancel()
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	newLocker, acquire, err := lockMode(inst, cfg)
	if err != nil {
		return err
	}
	w := &Worker{Config: cfg, Warm: newLocker(fmt.Sprintf("%s:warm:%d", cfg.Key, cfg.Proc)).Lock, Acquire: acquire,
		RoundTrips: inst.RoundTrips, Close: inst.Close, Verbs: LockVerbs}
	return w.Serve()
}

// lockMode returns the lockers cfg.Mode asks for and the acquire of
// goroutine g.
func lockMode(inst libs.Instance, cfg Config) (func(name string) libs.Locker, func(g int) Acquire, error) {
	shared := func(int) Acquire { return inst.NewLocker(cfg.Key).Lock }
	switch cfg.Mode {
	case ModeShared:
		return inst.NewLocker, shared, nil
	case ModeDistinct:
		return inst.NewLocker, func(g int) Acquire { return inst.NewLocker(cfg.Key + ":" + strconv.Itoa(g)).Lock }, nil
	case ModeRead:
		ri, ok := inst.(libs.ReadLockInstance)
		if !ok {
			return nil, nil, fmt.Errorf("%s has no read lock", cfg.Lib)
		}
		return ri.NewReadLocker, func(int) Acquire { return ri.NewReadLocker(cfg.Key).Lock }, nil
	}
	s, ok := strings.CutPrefix(cfg.Mode, modeNames)
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 1 {
		return nil, nil, fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	lockers := make([]libs.Locker, n)
	for i := range lockers {
		lockers[i] = inst.NewLocker(cfg.Key + ":" + strconv.Itoa(i))
	}
	return inst.NewLocker, func(int) Acquire {
		return func(ctx context.Context) (func(context.Context) error, error) { return lockers[rand.IntN(n)].Lock(ctx) }
	}, nil
}
