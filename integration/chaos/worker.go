package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// ConfigEnv is the environment variable carrying a worker's Config (JSON).
const ConfigEnv = "HOLDFAST_CHAOS_CONFIG"

// Planted client bugs (Config.Planted): test doubles of buggy clients, each
// a worker mode the checker must catch. The library is not changed.
const (
	// PlantDelRelease releases with a plain DEL of the lock: no owner check.
	PlantDelRelease = "del-release"
	// PlantRenewAfterLoss renews its hold by itself (HSET its field and
	// PEXPIRE) without checking that it still holds, and trusts that renewal
	// instead of Lease.Err.
	PlantRenewAfterLoss = "renew-after-loss"
	// PlantPastDeadline never checks Err or Done: it writes until its section
	// is over and believes every release.
	PlantPastDeadline = "past-deadline"
)

// Config is what a worker process does.
type Config struct {
	Deploy       string        // "standalone" (Addrs[0]), "sentinel" (Addrs: Sentinels), "cluster"
	Addrs        []string      // where the objects live
	ResourceAddr string        // the Resource's server, also used for coordination
	Prefix       string        // object names' prefix
	Kinds        []string      // the kinds each goroutine picks from
	Names        int           // objects per kind
	Goroutines   int           // goroutines in the process
	Until        int64         // CLOCK_MONOTONIC time at which to stop starting operations
	Lease        time.Duration // watchdog timeout of the client
	FixedLease   time.Duration // > 0: locks and permits taken with this fixed lease
	Work         time.Duration // longest critical section
	WaitBound    time.Duration // each acquire's and await's ctx timeout
	CancelStorm  bool          // waits cancelled after 1-30 ms instead of WaitBound
	Planted      string        // a Plant* mode, or ""
	ReadTimeout  time.Duration // go-redis read timeout (0: its default)
	Acks         int           // replica acknowledgements of every lock acquisition and release (WithReplicaAcks; 0: none)
	// ReleaseTimeout > 0 bounds releases (WithReleaseTimeout) and makes
	// go-redis apply every call's deadline to its socket
	// (ContextTimeoutEnabled), as the holdfast command does.
	ReleaseTimeout time.Duration
	CloseKey       string // a list on the resource server: BLPOP it before closing
	NoTracking     bool   // WithTracking(false): losses learnt at renewals only
	// Pinned: goroutine g always uses kind Kinds[g % len(Kinds)], object
	// (g / len(Kinds)) % Names, instead of random ones.
	Pinned bool
	// Hold > 0 makes every critical section hold as long as it can: a write
	// every 50 ms, each after a check of the lease, until the hold is lost,
	// Hold has passed or Until (the partition tier's holders).
	Hold time.Duration
	// NoFollowers: no follower records the elections' views (a follower cut
	// off with a stale primary reads that primary's leader, by design).
	NoFollowers bool
	// StopKey, when set, is a list on the resource server: a word pushed to
	// it brings Until forward to that moment (the parent has seen enough).
	StopKey string
}

// worker is one process's state.
type worker struct {
	cfg   Config
	until atomic.Int64 // cfg.Until, or sooner (StopKey)
	rec   *Recorder
	c     *rlock.Client
	rdb   redis.UniversalClient
	res   Resource
}

// ConfigFromEnv reads the worker's Config from ConfigEnv.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	err := json.Unmarshal([]byte(os.Getenv(ConfigEnv)), &cfg)
	return cfg, err
}

// dial returns the client of cfg's deployment.
func dial(cfg Config) redis.UniversalClient {
	ctxTimeout := cfg.ReleaseTimeout > 0
	switch cfg.Deploy {
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "holdfast", SentinelAddrs: cfg.Addrs,
			ReadTimeout: cfg.ReadTimeout, ContextTimeoutEnabled: ctxTimeout})
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: cfg.Addrs, ReadTimeout: cfg.ReadTimeout, ContextTimeoutEnabled: ctxTimeout})
	}
	return redis.NewClient(&redis.Options{Addr: cfg.Addrs[0], ReadTimeout: cfg.ReadTimeout, ContextTimeoutEnabled: ctxTimeout})
}

// RunWorker runs one worker process: cfg.Goroutines goroutines loop over
// random operations on random objects until cfg.Until, recording each on out
// (see Recorder), and prints "STARTED" once they run; then it prints "IDLE", waits for the parent's word on
// cfg.CloseKey, closes its clients and prints "LEAKED <n>": goroutines still
// running 5 s after Close beyond those running before the clients existed.
func RunWorker(cfg Config, proc int, out io.Writer) error {
	before := baseline()
	rdb := dial(cfg)
	opts := []rlock.ClientOption{rlock.WithWatchdogTimeout(cfg.Lease), rlock.WithTracking(!cfg.NoTracking)}
	if cfg.Acks > 0 {
		opts = append(opts, rlock.WithReplicaAcks(cfg.Acks, time.Second))
	}
	if cfg.ReleaseTimeout > 0 {
		opts = append(opts, rlock.WithReleaseTimeout(cfg.ReleaseTimeout))
	}
	c, err := rlock.New(rdb, opts...)
	if err != nil {
		return err
	}
	res := redis.NewClient(&redis.Options{Addr: cfg.ResourceAddr})
	w := &worker{cfg: cfg, rec: NewRecorder(proc, out), c: c, rdb: rdb, res: Resource{res}}
	w.until.Store(cfg.Until)
	var wg sync.WaitGroup
	if cfg.StopKey != "" {
		wg.Go(w.stopEarly)
	}
	for g := range cfg.Goroutines {
		wg.Go(func() { w.loop(g) })
	}
	w.followers(&wg)
	fmt.Fprintln(out, "STARTED")
	if !waitGroup(&wg, time.Until(monoTime(cfg.Until))+cfg.WaitBound+cfg.Work+20*time.Second) {
		n := w.rec.FlushPending()
		return fmt.Errorf("chaos: %d calls never returned", n)
	}
	fmt.Fprintln(out, "IDLE")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = res.BLPop(ctx, time.Minute, cfg.CloseKey).Err()
	_ = c.Close()
	_ = rdb.Close()
	_ = res.Close()
	fmt.Fprintln(out, "LEAKED", leaked(before, 5*time.Second))
	return nil
}

// stopEarly brings Until forward when the parent pushes to StopKey before it.
func (w *worker) stopEarly() {
	d := max(time.Until(monoTime(w.cfg.Until)), time.Second)
	if w.res.rdb.BLPop(context.Background(), d, w.cfg.StopKey).Err() == nil {
		w.until.Store(min(Mono(), w.cfg.Until))
	}
}

// monoTime converts a CLOCK_MONOTONIC time to a wall-clock time of this process.
func monoTime(mono int64) time.Time { return time.Now().Add(time.Duration(mono - Mono())) }

// waitGroup waits for wg for at most d.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// loop is one goroutine: random operations until Until (or, Pinned, one
// object's).
func (w *worker) loop(g int) {
	for Mono() < w.until.Load() {
		k, i := rand.IntN(len(w.cfg.Kinds)), rand.IntN(w.cfg.Names)
		if w.cfg.Pinned {
			k, i = g%len(w.cfg.Kinds), g/len(w.cfg.Kinds)%w.cfg.Names
		}
		kind := w.cfg.Kinds[k]
		name := objectName(w.cfg.Prefix, kind, i)
		if kind == KindLatch {
			w.latchOp(g, name)
			continue
		}
		w.holdOnce(g, kind, name)
	}
}

// bound is the wait bound of the next call.
func (w *worker) bound() time.Duration {
	if w.cfg.CancelStorm {
		return time.Duration(1+rand.IntN(30)) * time.Millisecond
	}
	return w.cfg.WaitBound
}

// latchOp counts name down or awaits it (bounded), recording the call.
func (w *worker) latchOp(g int, name string) {
	b := w.bound()
	ctx, cancel := context.WithTimeout(context.Background(), b)
	defer cancel()
	l := w.c.NewCountDownLatch(name)
	op := Op{G: g, Kind: KindLatch, Name: name, Op: OpCountDown, Call: Mono()}
	if rand.IntN(2) == 0 {
		op.Op, op.Bound = OpWait, int64(b)
	}
	key := w.rec.Begin(op)
	var err error
	if op.Op == OpWait {
		err = l.Await(ctx)
	} else {
		err = l.CountDown(ctx)
	}
	op.Ret, op.OK = Mono(), err == nil
	if err != nil {
		op.Err = err.Error()
	}
	w.rec.End(key, op)
	if op.Op == OpCountDown {
		<-time.After(time.Duration(rand.IntN(20)) * time.Millisecond) // pacing, not synchronisation
	}
}
