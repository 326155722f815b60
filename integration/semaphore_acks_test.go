package integration

// Tests of replica acknowledgements (WithReplicaAcks) on the semaphores
// (docs/design.md, "The synchronizers"): every acquisition and release sends
// WAIT behind its script in its one round trip; an acquisition that fewer
// replicas acknowledged is undone and fails with ErrNotReplicated; a release
// hands nothing to this client's waiters, which take the permits with
// acquisitions of their own. The replica replicates through a
// redistest.Proxy whose SetDropAll black-holes the replication stream, as in
// TestReplicaAcksPreventDoubleGrant.

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// ackTimeout is the WAIT timeout of the tests' clients.
const ackTimeout = 200 * time.Millisecond

// tripLog records a client's round trips: the commands of each, in order
// (a pipeline is one round trip), and whether its script was a release
// (isRelease).
type tripLog struct {
	mu    sync.Mutex
	trips []trip
}

type trip struct {
	cmds    []string
	release bool
}

func (h *tripLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.add([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *tripLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.add(cmds)
		return next(ctx, cmds)
	}
}

func (h *tripLog) add(cmds []redis.Cmder) {
	if name := cmds[0].Name(); name == "hello" || name == "client" {
		return // a new connection's set-up, not a call's
	}
	tr := trip{}
	for _, c := range cmds {
		tr.cmds = append(tr.cmds, c.Name())
		tr.release = tr.release || isRelease(c)
	}
	h.mu.Lock()
	h.trips = append(h.trips, tr)
	h.mu.Unlock()
}

// mark returns the number of round trips so far.
func (h *tripLog) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.trips)
}

// since returns the round trips made since mark.
func (h *tripLog) since(mark int) []trip {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]trip(nil), h.trips[mark:]...)
}

// acquisitions returns how many round trips since mark ran a script that
// is not a release (an acquisition, in the tests' steady state).
func (h *tripLog) acquisitions(mark int) int {
	n := 0
	for _, tr := range h.since(mark) {
		if (tr.cmds[0] == "evalsha" || tr.cmds[0] == "eval") && !tr.release {
			n++
		}
	}
	return n
}

// ackedClient returns an rlock.Client on the pair's primary whose round trips
// log records, with opts; its waiters look again once a minute only, so that
// only messages move them, and it keeps no client tracking (whose reads
// would mix with the counts).
func (p replicated) ackedClient(t *testing.T, opts ...rlock.ClientOption) (*rlock.Client, *tripLog) {
	t.Helper()
	rdb := p.primary.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })
	log := &tripLog{}
	rdb.AddHook(log)
	opts = append([]rlock.ClientOption{rlock.WithRecheckInterval(time.Minute), rlock.WithTracking(false)}, opts...)
	return newClient(t, rdb, opts...), log
}

// monitorLine reads a MONITOR line: the client ("lua" for a script's
// commands) and the command.
var monitorLine = regexp.MustCompile(`^\+?[0-9.]+ \[\d+ ([^\]]+)\] "([^"]*)"`)

// serverCommands runs op and returns the commands the primary at addr
// executed meanwhile (MONITOR), those of clients (top, by name) and those
// of their scripts (inner), between two ECHO marks of admin's.
func serverCommands(t *testing.T, addr string, admin *redis.Client, op func()) (top, inner []string) {
	t.Helper()
	ctx := context.Background()
	m := waitStartMonitor(t, addr)
	require.NoError(t, admin.Echo(ctx, "holdfast-mark-start").Err())
	op()
	require.NoError(t, admin.Echo(ctx, "holdfast-mark-end").Err())
	require.Eventually(t, func() bool { return waitFirst(m.lines(), "holdfast-mark-end") >= 0 },
		5*time.Second, time.Millisecond, "MONITOR saw the end mark")
	lines := m.stop()
	start, end := waitFirst(lines, "holdfast-mark-start"), waitFirst(lines, "holdfast-mark-end")
	require.True(t, start >= 0 && start < end)
	for _, l := range lines[start+1 : end] {
		g := monitorLine.FindStringSubmatch(l)
		require.NotNil(t, g, "MONITOR line %q", l)
		switch cmd := strings.ToLower(g[2]); {
		case g[1] == "lua":
			inner = append(inner, cmd)
		case cmd != "ping": // a connection's health check, if one falls in the window
			top = append(top, cmd)
		}
	}
	return top, inner
}

// TestSemaphoreReplicaAcksHealthy: with a replica in sync and
// WithReplicaAcks(1, 200 ms), both kinds acquire and release as without,
// each acquisition and release in one round trip: the script, the PEXPIRE
// of its request record when it has one, and WAIT, pipelined. The commands
// the server runs are logged beside those of a client without
// acknowledgements.
func TestSemaphoreReplicaAcksHealthy(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	p := startReplicated(t)
	acked, alog := p.ackedClient(t, rlock.WithReplicaAcks(1, ackTimeout))
	plain, plog := p.ackedClient(t)
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			name := redistest.Name(t)
			answer(k.set(ctx, acked, name, 2)).is(t, true)
			require.NoError(t, k.cycle(ctx, acked, name, 1)) // loads the scripts
			require.NoError(t, k.cycle(ctx, plain, name, 1))

			for _, c := range []struct {
				what string
				c    *rlock.Client
				log  *tripLog
			}{{"with acks", acked, alog}, {"without", plain, plog}} {
				mark := c.log.mark()
				for range 5 {
					require.NoError(t, k.cycle(ctx, c.c, name, 1))
					release := answer(k.try(ctx, c.c, name, 1, 0)).value(t, "TryAcquire")
					require.NoError(t, release(ctx))
				}
				require.Len(t, c.log.since(mark), 20, "%s: one round trip per acquisition and per release", c.what)
				require.EqualValues(t, 2, permitsLeft(t, p.rdb, name))

				var release func(context.Context) error
				mark = c.log.mark()
				top, inner := serverCommands(t, p.primary.Addr, p.rdb, func() {
					release = answer(k.acquire(ctx, c.c, name, 1)).value(t)
				})
				t.Logf("%s, acquisition: round trips %v; server commands %v, in the script %v", c.what, c.log.since(mark), top, inner)
				require.Len(t, c.log.since(mark), 1)
				mark = c.log.mark()
				rtop, rinner := serverCommands(t, p.primary.Addr, p.rdb, func() { require.NoError(t, release(ctx)) })
				t.Logf("%s, release: round trips %v; server commands %v, in the script %v", c.what, c.log.since(mark), rtop, rinner)
				require.Len(t, c.log.since(mark), 1)
				if c.c == acked {
					if k.kind == "Semaphore" {
						require.Equal(t, []string{"evalsha", "pexpire", "wait"}, top, "the script, its record's PEXPIRE, WAIT")
					} else {
						require.Equal(t, []string{"evalsha", "wait"}, top, "the script (no record: its ids are one), WAIT")
					}
					require.Equal(t, []string{"evalsha", "pexpire", "wait"}, rtop)
				} else {
					require.Equal(t, []string{"evalsha"}, top)
					require.Equal(t, []string{"evalsha"}, rtop)
				}
			}
		})
	}
}

// requireNotReplicated checks that err is a *NotReplicatedError of the
// semaphore name that no replica acknowledged, of the kind of call the
// check says.
func requireNotReplicated(t *testing.T, err error, name string, check func(*rlock.NotReplicatedError) bool, what string) {
	t.Helper()
	require.ErrorIs(t, err, rlock.ErrNotReplicated, what)
	var nr *rlock.NotReplicatedError
	require.True(t, errors.As(err, &nr), "%s: %v", what, err)
	require.Equal(t, name, nr.Semaphore, what)
	require.Equal(t, 0, nr.Acked, what)
	require.Equal(t, 1, nr.Wanted, what)
	require.Equal(t, ackTimeout, nr.Timeout, what)
	require.True(t, check(nr), "%s: %+v", what, nr)
	require.Contains(t, err.Error(), "0 of 1 replicas acknowledged within 200ms", what)
}

// ackedAcquisition and ackedRelease tell the kind of call of a
// *NotReplicatedError: an acquisition (undone) or a release.
func ackedAcquisition(nr *rlock.NotReplicatedError) bool { return !nr.Unlock && nr.Op == "" }
func ackedRelease(nr *rlock.NotReplicatedError) bool     { return nr.Unlock && nr.Op == "" }

// TestSemaphoreReplicaAcksRefuseUnreplicated: with the replica's stream
// black-holed, every acquisition of both kinds (Acquire, TryAcquire, with
// and without a wait time) fails with ErrNotReplicated, no replica having
// acknowledged it, and leaves every permit in the pool; a release and
// AddPermits take effect on the primary and say they were not acknowledged.
func TestSemaphoreReplicaAcksRefuseUnreplicated(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	p := startReplicated(t)
	c, _ := p.ackedClient(t, rlock.WithReplicaAcks(1, ackTimeout))
	names := map[string]string{}
	held := map[string]func(context.Context) error{}
	for _, k := range syncKinds {
		name := redistest.Name(t) + ":" + k.name
		names[k.kind] = name
		answer(k.set(ctx, c, name, 3)).is(t, true) // acknowledged
		held[k.kind] = answer(k.acquire(ctx, c, name, 1)).value(t)
	}

	p.link.SetDropAll(true) // the replication stream stops reaching the replica
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			name := names[k.kind]
			for _, a := range []struct {
				what string
				call func() error
			}{
				{"Acquire", func() error { return errOf(k.acquire(ctx, c, name, 1)) }},
				{"Acquire of 2", func() error { return errOf(k.acquire(ctx, c, name, 2)) }},
				{"TryAcquire", func() error { return errOf(k.try(ctx, c, name, 1, 0)) }},
				{"TryAcquire with a wait time", func() error { return errOf(k.try(ctx, c, name, 1, 5*time.Second)) }},
			} {
				begin := time.Now()
				err := a.call()
				requireNotReplicated(t, err, name, ackedAcquisition, a.what)
				t.Logf("%s: refused after %v: %v", a.what, time.Since(begin).Round(time.Millisecond), err)
				require.EqualValues(t, 2, permitsLeft(t, p.rdb, name), "%s: its permits are back", a.what)
				if k.kind == "ExpirableSemaphore" {
					require.EqualValues(t, 1, syncZCard(t, p.rdb, syncTimeoutKey(name)), "%s: no id of it is left held", a.what)
				}
			}

			err := held[k.kind](ctx) // Release, Permits.Release
			requireNotReplicated(t, err, name, ackedRelease, "release")
			t.Logf("release: %v", err)
			require.EqualValues(t, 3, permitsLeft(t, p.rdb, name), "the release stands on the primary")
		})
	}
	sem := c.NewSemaphore(names["Semaphore"])
	requireNotReplicated(t, sem.AddPermits(ctx, -1), names["Semaphore"],
		func(nr *rlock.NotReplicatedError) bool { return nr.Op == "AddPermits" && !nr.Unlock }, "AddPermits")
	require.EqualValues(t, 2, permitsLeft(t, p.rdb, names["Semaphore"]), "AddPermits stands on the primary")
}

// TestSemaphoreReplicaAcksNoHandOff: a waiter queues in the client that
// holds the only permit. With acknowledgements the release hands nothing
// over: it publishes the permit (a hand-off publishes nothing), and the
// waiter takes it with an acquisition of its own, acknowledged. With the
// stream black-holed when the release comes, the release stands but says
// it was not acknowledged, and the waiter's own acquisition is refused: it
// fails with ErrNotReplicated and the permit stays in the pool.
func TestSemaphoreReplicaAcksNoHandOff(t *testing.T) {
	for _, blackHoled := range []bool{false, true} {
		for _, k := range syncKinds {
			what := k.kind
			if blackHoled {
				what += "/black-holed"
			}
			t.Run(what, func(t *testing.T) {
				ctx := testCtx(t, 60*time.Second)
				p := startReplicated(t)
				c, log := p.ackedClient(t, rlock.WithReplicaAcks(1, ackTimeout), watchWaits())
				name := redistest.Name(t)
				answer(k.set(ctx, c, name, 1)).is(t, true)
				mark := log.mark()
				release := answer(k.acquire(ctx, c, name, 1)).value(t)
				got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, c, name, 1) })
				awaitSubscribersAtLeast(t, p.rdb, syncSemChannel(name), 1)
				require.Eventually(t, func() bool { return log.acquisitions(mark) >= 3 }, 5*time.Second, time.Millisecond,
					"the holder's acquisition, the waiter's own attempt and its attempt once subscribed")
				awaitLooked(t, name, observe.CauseSubscribed, 1)

				sub := p.rdb.Subscribe(ctx, syncSemChannel(name))
				t.Cleanup(func() { _ = sub.Close() })
				_, err := sub.Receive(ctx)
				require.NoError(t, err)
				if blackHoled {
					p.link.SetDropAll(true)
				}
				mark = log.mark()
				err = release(ctx)
				if blackHoled {
					requireNotReplicated(t, err, name, ackedRelease, "the holder's release")
				} else {
					require.NoError(t, err)
				}
				m, err := sub.ReceiveMessage(ctx)
				require.NoError(t, err)
				require.Equal(t, "1", m.Payload, "the release published the permit: it handed nothing over")

				g := awaitAsync(t, got, 10*time.Second, "the waiter")
				trips := log.since(mark)
				require.Equal(t, []string{"evalsha", "pexpire", "wait"}, trips[0].cmds, "the release, acknowledged")
				require.True(t, trips[0].release)
				require.GreaterOrEqual(t, log.acquisitions(mark), 1, "the waiter acquired by itself")
				for _, tr := range trips[1:] {
					if !tr.release {
						require.Equal(t, "wait", tr.cmds[len(tr.cmds)-1], "every acquisition waits for the replica: %v", tr.cmds)
					}
				}
				t.Logf("round trips from the release to the waiter's answer: %v", trips)
				if blackHoled {
					requireNotReplicated(t, g.err, name, ackedAcquisition, "the waiter")
					require.EqualValues(t, 1, permitsLeft(t, p.rdb, name), "the permit stays in the pool")
					if k.kind == "ExpirableSemaphore" {
						require.Zero(t, syncZCard(t, p.rdb, syncTimeoutKey(name)), "no id is left held")
					}
					return
				}
				require.NoError(t, g.err)
				require.Zero(t, permitsLeft(t, p.rdb, name), "the waiter holds the permit")
				require.NoError(t, g.v(ctx))
				require.EqualValues(t, 1, permitsLeft(t, p.rdb, name))
			})
		}
	}
}

// TestSemaphoreReplicaAcksPreventDoubleGrant plays the recipe of
// TestReplicaAcksPreventDoubleGrant on a semaphore of one permit: the
// primary grants the permit, its replica never receives the acquisition,
// the primary dies, the replica is promoted, and another client takes the
// permit there. Without acknowledgements both believe they hold the only
// permit; with WithReplicaAcks(1, 200 ms) the first acquisition is refused
// (and undone), so there is no double grant.
func TestSemaphoreReplicaAcksPreventDoubleGrant(t *testing.T) {
	for _, k := range syncKinds {
		for _, acks := range []bool{false, true} {
			double, refused := semaphoreReplicaRound(t, k, acks)
			t.Logf("%s, replica acks %v: double grant %v, first acquisition refused %v", k.kind, acks, double, refused)
			if acks {
				require.False(t, double, "%s: a double grant with replica acks", k.kind)
				require.True(t, refused)
			} else {
				require.True(t, double, "%s: the recipe reproduces the double grant", k.kind)
			}
		}
	}
}

// semaphoreReplicaRound runs the recipe once on a semaphore of kind k and
// reports whether two clients held its only permit at once, and whether the
// first acquisition was refused.
func semaphoreReplicaRound(t *testing.T, k syncKind, acks bool) (double, refused bool) {
	ctx := testCtx(t, 60*time.Second)
	p := startReplicated(t)
	var opts []rlock.ClientOption
	if acks {
		opts = append(opts, rlock.WithReplicaAcks(1, ackTimeout))
	}
	a, _ := p.ackedClient(t, opts...)
	name := redistest.Name(t) + ":" + k.name
	answer(k.set(ctx, a, name, 1)).is(t, true)
	rc := p.replica.Client(t)
	require.Eventually(t, func() bool { return rc.Get(ctx, name).Val() == "1" }, 10*time.Second, time.Millisecond,
		"the replica has the semaphore")

	p.link.SetDropAll(true) // the replication stream stops reaching the replica
	_, aErr := k.try(ctx, a, name, 1, 0)
	if acks {
		requireNotReplicated(t, aErr, name, ackedAcquisition, "the first acquisition")
		t.Logf("refused: %v", aErr)
		refused = true
	} else {
		require.NoError(t, aErr)
	}
	p.primary.Kill()
	require.NoError(t, rc.ReplicaOf(ctx, "NO", "ONE").Err())

	b := newClient(t, rc)
	release, err := k.try(ctx, b, name, 1, 0)
	require.NoError(t, err, "the promoted replica never had the acquisition")
	require.NoError(t, release(ctx))
	return aErr == nil, refused
}

// TestSemaphoreReplicaAcksCluster: on a Redis Cluster with a replica per
// primary, the scripts and their WAIT go to the primary of the semaphore's
// shard in one pipeline: with WithReplicaAcks(1, ...) both kinds acquire,
// wait and release in every shard (names with and without a hash tag), a
// waiter of the releasing client taking the permit with an acquisition of
// its own; with WithReplicaAcks(2, ...), more replicas than a shard has,
// every acquisition is refused with 1 of 2 acknowledgements and undone.
func TestSemaphoreReplicaAcksCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	ctx := testCtx(t, 90*time.Second)
	rdb := cl.Client(t)
	byShard := clusterNames(t, cl, rdb, redistest.Name(t))
	for _, names := range byShard { // until each shard's replica acknowledges (its first REPLCONF ACK)
		node, err := rdb.MasterForKey(ctx, names[1])
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			wait := redis.NewIntCmd(ctx, "wait", 1, 100)
			_, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Incr(ctx, names[1]+":probe")
				return p.Process(ctx, wait)
			})
			return err == nil && wait.Val() == 1
		}, 10*time.Second, time.Millisecond, "the replica of %s acknowledges", node.Options().Addr)
	}
	one := newClient(t, cl.Client(t), rlock.WithReplicaAcks(1, time.Second), rlock.WithRecheckInterval(time.Minute), watchWaits())
	two := newClient(t, cl.Client(t), rlock.WithReplicaAcks(2, ackTimeout))
	for _, k := range syncKinds {
		t.Run(k.kind, func(t *testing.T) {
			for shard, names := range byShard {
				for _, base := range names {
					name := base + ":" + k.name
					answer(k.set(ctx, one, name, 1)).is(t, true)
					release := answer(k.acquire(ctx, one, name, 1)).value(t, "%s on %s", name, shard)
					got := queueParked(t, name, func() (func(context.Context) error, error) { return k.acquire(ctx, one, name, 1) })
					require.NoError(t, release(ctx), "%s on %s", name, shard)
					g := awaitAsync(t, got, 10*time.Second, "the waiter")
					require.NoError(t, g.err, "%s on %s", name, shard)
					require.NoError(t, g.v(ctx))

					_, err := k.try(ctx, two, name, 1, 0)
					require.ErrorIs(t, err, rlock.ErrNotReplicated, "%s on %s", name, shard)
					var nr *rlock.NotReplicatedError
					require.True(t, errors.As(err, &nr))
					require.Equal(t, 1, nr.Acked, "the shard's replica acknowledged")
					require.Equal(t, 2, nr.Wanted)
					require.EqualValues(t, 1, answer(rdb.Get(ctx, name).Int64()).value(t), "%s: the refused acquisition was undone", name)
				}
			}
		})
	}
}
