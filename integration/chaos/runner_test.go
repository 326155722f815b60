package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// workerRole is the role of every chaos worker process.
const workerRole = "chaos-worker"

// scenario is one run: worker processes on some kinds under one fault.
type scenario struct {
	Name        string
	Fault       string   // a key of faults
	Kinds       []string // what the workers use
	Deploy      string   // "" (standalone), "sentinel", "cluster"
	Proxy       bool     // workers reach the server through a redistest.Proxy
	Procs       int
	Goroutines  int // per process
	Names       int // per kind
	Permits     int
	Dur         time.Duration
	Every       time.Duration // between faults
	Lease       time.Duration // watchdog timeout
	FixedLease  time.Duration
	Work        time.Duration
	WaitBound   time.Duration
	CancelStorm bool
	Planted     string
	ReadTimeout time.Duration
	Acks        int // replica acknowledgements (WithReplicaAcks) of the workers' locks
	// ReleaseTimeout, when set, is the workers' release timeout, with
	// go-redis applying deadlines to its sockets (Config.ReleaseTimeout).
	ReleaseTimeout time.Duration

	// The partition tier (partition_test.go): the servers, the Sentinels,
	// the resource and every worker in a network namespace of its own
	// (redistest.Net); Fault is a key of partitions, applied once for Cut;
	// worker 0 holds (Hold), the others wait.
	Net         bool
	Cut         time.Duration // how long the partition lasts
	MinReplicas bool          // the servers refuse writes without a replica (min-replicas-to-write 1, max-lag 2)
	Hold        time.Duration // worker 0's critical sections: as long as it can, up to Hold
	Strict      bool          // two handles valid at one moment is a violation, whatever the fault
}

// withDefaults fills the zero fields.
func (s scenario) withDefaults() scenario {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Procs, 3)
	def(&s.Goroutines, 4)
	def(&s.Names, 2)
	def(&s.Permits, 2)
	defD(&s.Dur, 6*time.Second)
	defD(&s.Every, time.Second)
	defD(&s.Lease, time.Second)
	defD(&s.Work, 30*time.Millisecond)
	defD(&s.WaitBound, 5*time.Second)
	return s
}

// result is the one machine-readable line of a scenario.
type result struct {
	Scenario string   `json:"scenario"`
	Fault    string   `json:"fault"`
	Kinds    []string `json:"kinds"`
	Report
	Orphans       int      `json:"orphans"`
	OrphanSubs    int      `json:"orphan_subscriptions"`
	LeakedGor     int      `json:"leaked_goroutines"`
	Verdict       string   `json:"verdict"`
	Classified    string   `json:"classification"`
	WorkerKilled  int      `json:"workers_killed"`
	WallSeconds   int      `json:"wall_s"`
	FirstProblems []string `json:"problems,omitempty"`
}

// TestWorker is the body of every worker process; in the parent it passes
// at once, doing nothing (a skip would count as a skipped test in CI).
func TestWorker(t *testing.T) {
	if redistest.WorkerRole() != workerRole {
		return
	}
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.NoError(t, RunWorker(cfg, redistest.WorkerIndex(), os.Stdout))
}

// run runs scenario s, prints its line and returns it.
func run(t *testing.T, s scenario) result {
	s = s.withDefaults()
	begin := time.Now()
	e := newEnv(t, s)
	if s.Net {
		e.partition()
	} else {
		e.start()
		e.injectUntilStop()
	}
	subs := e.finish()
	res := e.check(subs)
	res.WallSeconds = int(time.Since(begin).Seconds())
	b, err := json.Marshal(res)
	require.NoError(t, err)
	fmt.Println("CHAOS", string(b))
	for _, d := range res.Details {
		if !strings.HasPrefix(d, "inherent") || testing.Verbose() {
			t.Log(d)
		}
	}
	return res
}

// env is the parent's side of one scenario.
type env struct {
	t     *testing.T
	s     scenario
	ctx   context.Context
	cfg   Config
	srv   *redistest.Server   // standalone
	proxy *redistest.Proxy    // when s.Proxy
	fo    *redistest.Failover // sentinel
	cl    *redistest.Cluster  // cluster
	admin redis.UniversalClient
	c     *rlock.Client // the parent's client: latch counts, semaphore set-up
	res   Resource

	mu      sync.Mutex
	ops     []Op
	workers []*redistest.Worker
	readers sync.WaitGroup
	idle    chan int
	leaked  int
	killed  int
	dead    map[*redistest.Worker]bool
	open    map[int]int // holds open per worker index, by its history so far
	next    int         // next worker index
	stop    int64
	started map[int]bool // workers whose goroutines run (STARTED)
	lab     *netEnv      // the network lab of a partition scenario
	window  *Window      // the partition's times, once over
}

// configOf returns the Config of worker idx: worker 0 of a partition
// scenario holds long (Hold), the others as the scenario says.
func (e *env) configOf(idx int) Config {
	cfg := e.cfg
	if idx == 0 {
		cfg.Hold = e.s.Hold
	}
	return cfg
}

// newEnv starts the servers of s.
func newEnv(t *testing.T, s scenario) *env {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	e := &env{t: t, s: s, ctx: ctx, idle: make(chan int, 1000), dead: map[*redistest.Worker]bool{}, open: map[int]int{},
		started: map[int]bool{}}
	if s.Net {
		e.startLab()
		return e
	}
	resSrv := redistest.Start(t)
	e.res = Resource{resSrv.Client(t)}
	e.cfg = Config{Deploy: s.Deploy, ResourceAddr: resSrv.Addr, Prefix: "chaos:" + s.Name + ":", Kinds: s.Kinds,
		Names: s.Names, Goroutines: s.Goroutines, Lease: s.Lease, FixedLease: s.FixedLease, Work: s.Work,
		WaitBound: s.WaitBound, CancelStorm: s.CancelStorm, Planted: s.Planted, ReadTimeout: s.ReadTimeout,
		Acks: s.Acks, ReleaseTimeout: s.ReleaseTimeout, CloseKey: "chaos:close:" + s.Name,
		NoTracking: os.Getenv("HOLDFAST_CHAOS_TRACKING") == "off"}
	switch s.Deploy {
	case "sentinel":
		e.fo = redistest.StartFailover(t, 2, 3)
		e.cfg.Addrs = e.fo.SentinelAddrs()
		e.admin = e.fo.Client(t)
	case "cluster":
		e.cl = redistest.StartCluster(t, 3, 1)
		e.cfg.Addrs = e.cl.Addrs()
		e.admin = e.cl.Client(t)
	default:
		e.srv = redistest.Start(t)
		e.cfg.Addrs = []string{e.srv.Addr}
		e.admin = e.srv.Client(t)
		if s.Proxy {
			e.proxy = redistest.NewProxy(t, e.srv.Addr)
			e.cfg.Addrs = []string{e.proxy.Addr}
		}
	}
	c, err := rlock.New(e.admin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	e.c = c
	require.NoError(t, setUp(ctx, c, e.cfg.Prefix, s.Kinds, s.Names, s.Permits))
	return e
}
