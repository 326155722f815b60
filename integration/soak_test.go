//go:build soak

package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The soak test runs only with the soak build tag (make soak): several
// processes hammer a few locks for minutes with cancellations, timed waits and
// reentrant holds while the parent kills client and pub/sub connections, and
// the test checks that no two critical sections overlapped and nothing was left
// behind. HOLDFAST_SOAK_DURATION sets the length (default 2m).

const (
	soakRole       = "soak"
	soakNames      = 3
	soakGoroutines = 6
	soakWorkers    = 3
)

func soakDuration(t testing.TB) time.Duration {
	d := 2 * time.Minute
	if s := os.Getenv("HOLDFAST_SOAK_DURATION"); s != "" {
		var err error
		d, err = time.ParseDuration(s)
		require.NoError(t, err)
	}
	return d
}

// soakStats counts what one process did.
type soakStats struct {
	sections, notAcquired, lost, errs atomic.Int64
}

// soakRun loops goroutines over random operations on the names until stop, and
// returns the intervals of critical sections whose lease was still open at
// their end.
func soakRun(rdb *redis.Client, c *rlock.Client, prefix, who string, stop time.Time, st *soakStats, report func(string)) []waitInterval {
	var mu sync.Mutex
	var ivs []waitInterval
	var wg sync.WaitGroup
	for g := range soakGoroutines {
		wg.Go(func() {
			for time.Now().Before(stop) {
				n := rand.IntN(soakNames)
				name := prefix + strconv.Itoa(n)
				m := c.NewMutex(name)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+rand.IntN(200))*time.Millisecond)
				octx := rlock.WithOwner(ctx)
				var l *rlock.Lease
				var err error
				switch rand.IntN(3) {
				case 0:
					l, err = m.Lock(octx)
				case 1:
					l, err = m.TryLock(octx, rlock.WithWaitTime(time.Duration(rand.IntN(50))*time.Millisecond))
				default:
					l, err = m.TryLock(octx, rlock.WithWaitTime(100*time.Millisecond), rlock.WithLeaseTime(5*time.Second))
				}
				if err != nil {
					if errors.Is(err, rlock.ErrNotAcquired) {
						st.notAcquired.Add(1)
					} else {
						st.errs.Add(1)
						report(fmt.Sprintf("ERR %s/g%d lock: %v", who, g, err))
					}
					cancel()
					continue
				}
				work := context.Background()
				var inner *rlock.Lease
				if rand.IntN(4) == 0 { // re-enter
					inner, err = m.TryLock(rlock.WithOwner(work))
					if err == nil {
						report(fmt.Sprintf("ERR %s/g%d: a second owner got a held lock", who, g))
					}
					inner, _ = m.TryLock(octx)
				}
				start := waitMono()
				if err := waitIncr(work, rdb, name+":counter"); err != nil {
					report(fmt.Sprintf("UNCERTAIN %s/g%d increment: %v", who, g, err))
				}
				end := waitMono()
				if inner != nil {
					_ = inner.Unlock(work)
				}
				lost := l.Err() != nil
				if err := l.Unlock(work); err != nil && !errors.Is(err, rlock.ErrNotHeld) {
					report(fmt.Sprintf("ERR %s/g%d unlock: %v", who, g, err))
					st.errs.Add(1)
				} else if errors.Is(err, rlock.ErrLockLost) {
					lost = true
				}
				cancel()
				if lost {
					st.lost.Add(1)
					continue
				}
				st.sections.Add(1)
				mu.Lock()
				ivs = append(ivs, waitInterval{start, end, fmt.Sprintf("%s/g%d/n%d", who, g, n)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return ivs
}

func soakWorker(t *testing.T) {
	rdb := waitWorkerClient(t)
	c, err := rlock.New(rdb, rlock.WithWatchdogTimeout(2*time.Second))
	require.NoError(t, err)
	defer c.Close()
	stop, err := time.Parse(time.RFC3339Nano, os.Getenv("SOAK_STOP"))
	require.NoError(t, err)
	var st soakStats
	var out sync.Mutex
	report := func(s string) { out.Lock(); fmt.Println(s); out.Unlock() }
	ivs := soakRun(rdb, c, os.Getenv("SOAK_PREFIX"), "w", stop, &st, report)
	for _, iv := range ivs {
		report(fmt.Sprintf("IV %d %d %s", iv.start, iv.end, strings.TrimPrefix(iv.who, "w/")))
	}
	report(fmt.Sprintf("STATS %d %d %d %d", st.sections.Load(), st.notAcquired.Load(), st.lost.Load(), st.errs.Load()))
}

func TestSoakMutualExclusionUnderFaults(t *testing.T) {
	if redistest.WorkerRole() == soakRole {
		soakWorker(t)
		return
	}
	d := soakDuration(t)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	admin := srv.Client(t)
	c := newClient(t, rdb, rlock.WithWatchdogTimeout(2*time.Second))
	prefix := redistest.Name(t) + ":"
	stop := time.Now().Add(d)
	ws := redistest.RunWorkers(t, t.Name(), soakRole, soakWorkers,
		"WAIT_ADDR="+srv.Addr, "SOAK_PREFIX="+prefix, "SOAK_STOP="+stop.Format(time.RFC3339Nano))

	// Faults: every 1-3 s kill the pub/sub connections or all normal client
	// connections (go-redis retries: the scripts must stay idempotent).
	faults := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for time.Now().Add(3 * time.Second).Before(stop) {
			select {
			case <-time.After(time.Duration(1000+rand.IntN(2000)) * time.Millisecond):
			}
			kind := "pubsub"
			if rand.IntN(2) == 0 {
				kind = "normal"
			}
			if admin.Do(context.Background(), "CLIENT", "KILL", "TYPE", kind, "SKIPME", "yes").Err() == nil {
				faults++
			}
		}
	}()

	var st soakStats
	var out sync.Mutex
	var uncertain []string
	report := func(s string) {
		out.Lock()
		defer out.Unlock()
		if strings.HasPrefix(s, "UNCERTAIN") {
			uncertain = append(uncertain, s)
			return
		}
		t.Error(s)
	}
	ivs := soakRun(rdb, c, prefix, "parent", stop, &st, report)
	<-done

	totals := [4]int64{st.sections.Load(), st.notAcquired.Load(), st.lost.Load(), st.errs.Load()}
	for _, w := range ws {
		for line := range w.Lines() {
			switch {
			case strings.HasPrefix(line, "IV "):
				iv, _, err := waitParseInterval(line, fmt.Sprintf("w%d", w.Index))
				require.NoError(t, err)
				ivs = append(ivs, iv)
			case strings.HasPrefix(line, "STATS "):
				f := strings.Fields(line)
				for i := range 4 {
					n, err := strconv.ParseInt(f[i+1], 10, 64)
					require.NoError(t, err)
					totals[i] += n
				}
			case strings.HasPrefix(line, "UNCERTAIN"):
				uncertain = append(uncertain, line)
			case strings.HasPrefix(line, "ERR"):
				t.Error(line)
			}
		}
		require.NoError(t, w.Wait(), w.Output())
	}
	// Critical sections of one name must not overlap; the name is the last
	// element of each interval's label.
	byName := map[string][]waitInterval{}
	for _, iv := range ivs {
		name := iv.who[strings.LastIndex(iv.who, "/")+1:]
		byName[name] = append(byName[name], iv)
	}
	require.Len(t, byName, soakNames)
	var bad []string
	for _, part := range byName {
		bad = append(bad, waitOverlaps(part)...)
	}
	t.Logf("soak %v, %d processes x %d goroutines, %d names, %d connection kills: %d critical sections, "+
		"%d not acquired (wait or ctx ended), %d holds lost, %d errors, %d uncertain increments, %d overlaps",
		d, soakWorkers+1, soakGoroutines, soakNames, faults, totals[0], totals[1], totals[2], totals[3],
		len(uncertain), len(bad))
	for i, b := range bad {
		if i < 10 {
			t.Log(b)
		}
	}
	require.Zero(t, len(bad), "critical sections of one lock overlapped")
	ctx := testCtx(t, time.Minute)
	var counted int64
	for i := range soakNames {
		n, err := admin.Get(ctx, prefix+strconv.Itoa(i)+":counter").Int64()
		require.NoError(t, err)
		counted += n
	}
	// Every section incremented its lock's counter once (GET then SET, so an
	// overlap would lose updates), lost holds included; an uncertain increment
	// may or may not have happened.
	require.InDelta(t, totals[0]+totals[2], counted, float64(len(uncertain)), "lost updates")
	for i := range soakNames {
		name := prefix + strconv.Itoa(i)
		require.Eventually(t, func() bool { return admin.Exists(ctx, name).Val() == 0 }, 10*time.Second, 50*time.Millisecond,
			"lock %s left behind: %v", name, holders(t, admin, name))
	}
	require.Eventually(t, func() bool { return len(waitChannels(t, admin, "redisson_lock__channel:*")) == 0 },
		10*time.Second, 50*time.Millisecond, "channels left subscribed")
}

// TestSoakReplicaAcksNoFalseLoss: with WithReplicaAcks on a healthy primary
// and two replicas, renewals that must be acknowledged never cost a hold.
// One client holds 50 of each leased kind (locks, read holds, permits,
// leaderships) under a 1 s watchdog (a renewal round every 333 ms) for the
// soak's duration, while 8 goroutines take and give back other locks in a
// loop (write traffic for the replicas to acknowledge); no hold may be lost
// and no round may go unacknowledged (make soak; HOLDFAST_SOAK_DURATION).
func TestSoakReplicaAcksNoFalseLoss(t *testing.T) {
	d := soakDuration(t)
	ctx := testCtx(t, d+time.Minute)
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(primary.Addr)
	for range 2 {
		rc := redistest.Start(t, "--replicaof", host, port).Client(t)
		require.Eventually(t, func() bool {
			info, err := rc.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "master_link_status:up")
		}, 10*time.Second, 10*time.Millisecond)
	}
	rdb := primary.Client(t)
	require.Eventually(t, func() bool {
		n, err := rdb.Do(ctx, "wait", 2, 100).Int()
		return err == nil && n == 2
	}, 10*time.Second, 10*time.Millisecond, "both replicas acknowledge")
	obs := newRenewLog()
	c := newClient(t, rdb, rlock.WithReplicaAcks(1, 500*time.Millisecond), rlock.WithWatchdogTimeout(time.Second),
		rlock.WithObserver(obs))
	name := redistest.Name(t)
	var holds []handle
	for i := range 50 {
		for _, l := range takeLeased(t, ctx, c, fmt.Sprintf("%s:%d", name, i)) {
			holds = append(holds, l.h)
		}
	}
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	var cycles, errs int64
	var mu sync.Mutex
	for g := range 8 {
		wg.Go(func() {
			m := c.NewMutex(fmt.Sprintf("%s:churn:%d", name, g%4))
			for time.Now().Before(stop) {
				l, err := m.Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				mu.Lock()
				cycles++
				if err != nil {
					errs++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, h := range holds {
		require.NoError(t, h.Err(), "hold %d", i)
	}
	require.Empty(t, obs.lost(), "holds lost")
	require.Zero(t, obs.count(observe.RenewUnreplicated), "renewals not acknowledged")
	require.Zero(t, errs, "churn errors")
	t.Logf("%v: %d renewals acknowledged, 0 unacknowledged, 0 holds lost of %d; %d churn cycles", d,
		obs.count(observe.RenewOK), len(holds), cycles)
}
