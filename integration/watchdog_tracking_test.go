package integration

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Loss known at once (client tracking): a hold learns within a round trip that
// its key was deleted, cut short, replaced or flushed, or that a restart or a
// broken connection lost it, and nothing else ends it. The clients here keep
// the default watchdog (30 s lease, renewed every 10 s) unless a test says
// otherwise, so a hold that ends within trackBound was ended by tracking.

// trackBound is how soon a hold must learn of its loss: generous for a loaded
// 2-core machine, and far below the first renewal (10 s).
const trackBound = 2 * time.Second

// lossLog is an observer that keeps the ends of holds and the tracking modes.
type lossLog struct {
	mu    sync.Mutex
	ends  []holdEvent
	modes map[string][]observe.TrackingMode
}

func newLossLog() *lossLog { return &lossLog{modes: map[string][]observe.TrackingMode{}} }

func (*lossLog) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (*lossLog) End(context.Context, observe.Call, observe.Result)         {}
func (*lossLog) HoldStart(observe.Hold)                                    {}
func (l *lossLog) HoldEnd(h observe.Hold, o observe.HoldOutcome, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, holdEvent{h, o, err})
}
func (l *lossLog) Tracking(node string, m observe.TrackingMode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.modes[node] = append(l.modes[node], m)
}

// lost returns the ends of lost holds.
func (l *lossLog) lost() []holdEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []holdEvent
	for _, e := range l.ends {
		if e.outcome == observe.HoldLost {
			out = append(out, e)
		}
	}
	return out
}

// requireCause waits, at most 2 s, for the observer to hear of the loss of
// the hold of name (a hold's Done closes before its end is reported), and
// requires that its cause be want.
func (l *lossLog) requireCause(t *testing.T, name string, want observe.LossCause) {
	t.Helper()
	require.Eventually(t, func() bool { return l.causeOf(name) != 0 }, 2*time.Second, time.Millisecond,
		"the observer heard of no loss of %s", name)
	require.Equal(t, want, l.causeOf(name))
}

// causeOf returns the loss cause the observer heard for the hold of name.
func (l *lossLog) causeOf(name string) observe.LossCause {
	for _, e := range l.lost() {
		if e.hold.Name == name {
			return e.hold.Loss
		}
	}
	return 0
}

// held is one hold under test: its handle's Done and Err, and the Redis key and
// member that hold it.
type held struct {
	name   string
	key    string
	member string
	done   <-chan struct{}
	err    func() error
	lost   error // what Err must match once lost
}

// holdKind takes one hold of a kind on name.
type holdKind struct {
	kind string
	take func(t *testing.T, c *rlock.Client, rdb *redis.Client, name string) held
}

// lockHeld returns the held of a lock lease l on key name.
func lockHeld(t *testing.T, rdb *redis.Client, c *rlock.Client, name string, l *rlock.Lease) held {
	return held{name: name, key: name, member: wdField(t, rdb, c, name), done: l.Done(), err: l.Err, lost: rlock.ErrLockLost}
}

// trackKinds are the kinds whose holds tracking watches: every key a hold
// lives in (a lock's hash, a read hold's, a fair lock's, a permit's sorted set).
var trackKinds = append(lockHoldKinds(), permitHold)

// lockHoldKinds are allKinds as holdKinds: a hold taken with Lock by a fresh
// owner.
func lockHoldKinds() []holdKind {
	var out []holdKind
	for _, k := range allKinds {
		out = append(out, holdKind{k.name, func(t *testing.T, c *rlock.Client, rdb *redis.Client, name string) held {
			l, err := k.of(c, name).Lock(rlock.WithOwner(context.Background()))
			require.NoError(t, err)
			return lockHeld(t, rdb, c, name, l)
		}})
	}
	return out
}

// permitHold is an ExpirableSemaphore's permit, in the sorted set of its
// permits' expiries.
var permitHold = holdKind{"ExpirableSemaphore", func(t *testing.T, c *rlock.Client, rdb *redis.Client, name string) held {
	s := c.NewExpirableSemaphore(name)
	require.NoError(t, s.SetPermits(context.Background(), 3))
	p, err := s.Acquire(context.Background(), 1)
	require.NoError(t, err)
	key := lua.PermitTimeoutsName(name)
	ids, err := rdb.ZRange(context.Background(), key, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, ids, 1)
	return held{name: name, key: key, member: ids[0], done: p.Done(), err: p.Err, lost: rlock.ErrPermitLost}
}}

// The kinds most tests take.
var mutexKind, permitKind = trackKinds[0], permitHold

// awaitLost waits, at most trackBound, for h to end lost, and returns how long
// it took from since.
func awaitLost(t *testing.T, h held, since time.Time) time.Duration {
	t.Helper()
	timer := time.NewTimer(time.Until(since.Add(trackBound)))
	defer timer.Stop()
	select {
	case <-h.done:
	case <-timer.C:
		t.Fatalf("%s: still held %v after its key changed (err %v)", h.name, trackBound, h.err())
	}
	require.ErrorIs(t, h.err(), h.lost)
	return time.Since(since)
}

// settle returns once the client c has looked at every hold it took before
// the call, and so tracks their keys: it takes a barrier hold, deletes it, and
// waits for its loss, which the first look at the barrier, or the news of its
// deletion, tells; the holds taken before were looked at with it or earlier.
func settle(t *testing.T, c *rlock.Client, rdb *redis.Client) {
	t.Helper()
	b := mutexKind.take(t, c, rdb, redistest.Name(t)+":settle")
	since := time.Now()
	require.NoError(t, rdb.Del(context.Background(), b.key).Err())
	awaitLost(t, b, since)
}

// requireHeld fails the test if h has ended.
func requireHeld(t *testing.T, h held) {
	t.Helper()
	select {
	case <-h.done:
		t.Fatalf("%s ended: %v", h.name, h.err())
	default:
	}
}

// replace puts another owner's hold where h's was: the key deleted and written
// again, as another client's acquisition after an outside DEL would.
func replace(ctx context.Context, rdb *redis.Client, h held) error {
	typ, err := rdb.Type(ctx, h.key).Result()
	if err != nil {
		return err
	}
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, h.key)
		if typ == "zset" {
			p.ZAdd(ctx, h.key, redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "another permit id"})
		} else {
			p.HSet(ctx, h.key, "another-client:1", 1)
		}
		p.PExpire(ctx, h.key, 30*time.Second)
		return nil
	})
	return err
}

// TestTrackingEndsHoldsAtOnce: every kind of hold, deleted, cut short, replaced
// by another owner's, or stripped of its own field or member from outside,
// ends within trackBound (the first renewal is 10 s away), lost, with the
// cause "invalidated".
func TestTrackingEndsHoldsAtOnce(t *testing.T) {
	changes := []struct {
		what string
		do   func(ctx context.Context, rdb *redis.Client, h held) error
	}{
		{"DEL", func(ctx context.Context, rdb *redis.Client, h held) error { return rdb.Del(ctx, h.key).Err() }},
		{"UNLINK", func(ctx context.Context, rdb *redis.Client, h held) error { return rdb.Unlink(ctx, h.key).Err() }},
		{"PEXPIRE 1", func(ctx context.Context, rdb *redis.Client, h held) error {
			return rdb.PExpire(ctx, h.key, time.Millisecond).Err()
		}},
		{"replaced", replace},
		{"SET over it", func(ctx context.Context, rdb *redis.Client, h held) error {
			return rdb.Set(ctx, h.key, "not a lock", time.Minute).Err()
		}},
		{"own entry removed", func(ctx context.Context, rdb *redis.Client, h held) error {
			if strings.HasSuffix(h.key, ":timeout") {
				return rdb.ZRem(ctx, h.key, h.member).Err()
			}
			return rdb.HDel(ctx, h.key, h.member).Err()
		}},
	}
	for _, k := range trackKinds {
		for _, ch := range changes {
			t.Run(k.kind+"/"+ch.what, func(t *testing.T) {
				obs := newLossLog()
				rdb, c, name := setup(t, rlock.WithObserver(obs))
				h := k.take(t, c, rdb, name)
				settle(t, c, rdb)
				since := time.Now()
				require.NoError(t, ch.do(context.Background(), rdb, h))
				took := awaitLost(t, h, since)
				t.Logf("%s after %s: lost after %v: %v", k.kind, ch.what, took.Round(time.Microsecond), h.err())
				obs.requireCause(t, name, observe.LossInvalidated)
			})
		}
	}
}

// TestTrackingEndsMultiLeasesAtOnce: a MultiLock's and a RedLock's lease end
// at once when one of their parts' keys is deleted (a MultiLease ends when any
// part's lease does), the RedLock's parts each on a server of its own.
func TestTrackingEndsMultiLeasesAtOnce(t *testing.T) {
	servers := []*redistest.Server{redistest.Start(t), redistest.Start(t), redistest.Start(t)}
	for _, multi := range []string{"MultiLock", "RedLock"} {
		t.Run(multi, func(t *testing.T) {
			name := redistest.Name(t)
			var parts []*rlock.Mutex
			var clients []*redis.Client
			var cs []*rlock.Client
			for i, srv := range servers {
				rdb := srv.Client(t)
				part := name
				if multi == "MultiLock" {
					rdb, part = servers[0].Client(t), fmt.Sprintf("%s:%d", name, i)
				}
				c := newClient(t, rdb)
				parts, clients, cs = append(parts, c.NewMutex(part)), append(clients, rdb), append(cs, c)
			}
			var l *rlock.MultiLease
			var err error
			if multi == "MultiLock" {
				l, err = rlock.NewMultiLock(parts...).Lock(context.Background())
			} else {
				l, err = rlock.NewRedLock(parts...).Lock(context.Background())
			}
			require.NoError(t, err)
			h := held{name: parts[1].Name(), done: l.Done(), err: l.Err, lost: rlock.ErrLockLost}
			requireHeld(t, h)
			settle(t, cs[1], clients[1])
			since := time.Now()
			require.NoError(t, clients[1].Del(context.Background(), parts[1].Name()).Err())
			took := awaitLost(t, h, since)
			t.Logf("%s lost %v after one part's DEL: %v", multi, took.Round(time.Microsecond), l.Err())
			require.ErrorIs(t, l.Unlock(context.Background()), rlock.ErrLockLost, "Unlock names the lost part")
			for i, p := range parts {
				require.Zero(t, clients[i].Exists(context.Background(), p.Name()).Val(), "the parts still held were given back")
			}
		})
	}
}

// TestTrackingForceUnlockInTheSameClient: the holder's own rlock.Client
// force-unlocks the lock (ForceUnlock, through the same go-redis client), and
// the hold still learns of it at once: the client's own writes are news too.
func TestTrackingForceUnlockInTheSameClient(t *testing.T) {
	obs := newLossLog()
	rdb, c, name := setup(t, rlock.WithObserver(obs))
	h := mutexKind.take(t, c, rdb, name)
	settle(t, c, rdb)
	since := time.Now()
	ok, err := c.NewMutex(name).ForceUnlock(context.Background())
	require.NoError(t, err)
	require.True(t, ok)
	awaitLost(t, h, since)
}

// TestTrackingNoFalseLoss: what leaves a hold in place ends nothing: its
// owner's reentry and the release of it, other owners' failed attempts (in the
// same client and in another), reads from outside, renewals (a 600 ms watchdog
// here, so a dozen of them), other permits taken and given back on the same
// semaphore, other keys' changes, and a thousand short holds taken and
// released in between. A barrier hold, deleted last, proves the news before
// it was handled: news arrives in order.
func TestTrackingNoFalseLoss(t *testing.T) {
	obs := newLossLog()
	renewals := &renewCount{}
	opts := []rlock.ClientOption{rlock.WithObserver(struct {
		*lossLog
		*renewCount
	}{obs, renewals}), rlock.WithWatchdogTimeout(600 * time.Millisecond)}
	rdb, c, name := setup(t, opts...)
	other := newClient(t, redistest.Shared(t).Client(t))
	ctx := testCtx(t, time.Minute)

	owner := rlock.WithOwner(ctx)
	m := c.NewMutex(name)
	l, err := m.Lock(owner)
	require.NoError(t, err)
	lock := lockHeld(t, rdb, c, name, l)
	sem := c.NewExpirableSemaphore(name + ":sem")
	require.NoError(t, sem.SetPermits(ctx, 5))
	p, err := sem.Acquire(ctx, 1)
	require.NoError(t, err)
	rw := c.NewRWMutex(name + ":rw")
	rl, err := rw.ReadLock().Lock(rlock.WithOwner(ctx))
	require.NoError(t, err)

	for i := range 1000 {
		inner, err := m.Lock(owner) // reentry: HINCRBY and PEXPIRE on the held key
		require.NoError(t, err)
		_, err = m.TryLock(rlock.WithOwner(ctx)) // another owner, this client
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		_, err = other.NewMutex(name).TryLock(rlock.WithOwner(ctx)) // another client
		require.ErrorIs(t, err, rlock.ErrNotAcquired)
		require.NoError(t, rdb.HGetAll(ctx, name).Err())
		require.NoError(t, inner.Unlock(owner))
		q, err := other.NewExpirableSemaphore(name+":sem").Acquire(ctx, 1) // the same sorted set
		require.NoError(t, err)
		r2, err := rw.ReadLock().Lock(rlock.WithOwner(ctx)) // another reader on the same hash
		require.NoError(t, err)
		short, err := c.NewMutex(fmt.Sprintf("%s:short:%d", name, i%10)).Lock(rlock.WithOwner(ctx))
		require.NoError(t, err)
		require.NoError(t, short.Unlock(ctx))
		require.NoError(t, r2.Unlock(ctx))
		require.NoError(t, q.Release(ctx))
	}
	require.Eventually(t, func() bool { return renewals.ok() >= 12 }, 30*time.Second, 10*time.Millisecond)

	barrier := mutexKind.take(t, c, rdb, name+":barrier")
	since := time.Now()
	require.NoError(t, rdb.Del(ctx, barrier.key).Err())
	awaitLost(t, barrier, since)
	requireHeld(t, lock)
	require.NoError(t, p.Err())
	require.NoError(t, rl.Err())
	lost := obs.lost()
	require.Len(t, lost, 1, "holds lost: %v", lost)
	t.Logf("%d renewals, one loss (the barrier's)", renewals.ok())
	require.NoError(t, l.Unlock(ctx))
	require.NoError(t, p.Release(ctx))
	require.NoError(t, rl.Unlock(ctx))
}

// renewCount counts the renewals confirmed.
type renewCount struct {
	mu sync.Mutex
	n  int
}

func (r *renewCount) Renewed(o observe.RenewOutcome, holds int) {
	if o == observe.RenewOK {
		r.mu.Lock()
		r.n += holds
		r.mu.Unlock()
	}
}

func (r *renewCount) ok() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// TestTrackingReleaseRacesItsOwnInvalidation: a thousand holds, each kept a
// few round trips (so that the tracker has looked at it, and tracks its key)
// and then released: each release's own invalidation arrives while, or after,
// the release returns, and is never taken for a loss.
func TestTrackingReleaseRacesItsOwnInvalidation(t *testing.T) {
	obs := newLossLog()
	rdb, c, name := setup(t, rlock.WithObserver(obs))
	ctx := testCtx(t, time.Minute)
	sem := c.NewExpirableSemaphore(name + ":sem")
	require.NoError(t, sem.SetPermits(ctx, 1))
	for i := range 1000 {
		l, err := c.NewMutex(name).Lock(rlock.WithOwner(ctx))
		require.NoError(t, err)
		p, err := sem.Acquire(ctx, 1)
		require.NoError(t, err)
		for range i % 8 {
			require.NoError(t, rdb.Ping(ctx).Err())
		}
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, p.Release(ctx))
	}
	barrier := mutexKind.take(t, c, rdb, name+":barrier")
	since := time.Now()
	require.NoError(t, rdb.Del(ctx, barrier.key).Err())
	awaitLost(t, barrier, since)
	require.Len(t, obs.lost(), 1, "holds lost: %v", obs.lost())
}

// holdEveryKind takes a hold of every kind on a client of its own, observed,
// and returns once the client tracks them all.
func holdEveryKind(t *testing.T, rdb *redis.Client) (*lossLog, []held) {
	t.Helper()
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs))
	var hs []held
	for _, k := range trackKinds {
		hs = append(hs, k.take(t, c, rdb, redistest.Name(t)+":"+k.kind))
	}
	settle(t, c, rdb)
	return obs, hs
}

// awaitEveryLoss waits until every hold of hs ended lost, told by tracking,
// after what happened at since.
func awaitEveryLoss(t *testing.T, obs *lossLog, hs []held, since time.Time, what string) {
	t.Helper()
	for _, h := range hs {
		took := awaitLost(t, h, since)
		t.Logf("%s lost %v after %s", h.name, took.Round(time.Microsecond), what)
		obs.requireCause(t, h.name, observe.LossInvalidated)
	}
}

// TestTrackingFlush: FLUSHALL and FLUSHDB (sync and async) end every hold of
// every kind at once: the server's null invalidation makes the client look at
// all of them.
func TestTrackingFlush(t *testing.T) {
	srv := redistest.Start(t)
	for _, flush := range []string{"FLUSHALL", "FLUSHDB", "FLUSHALL ASYNC"} {
		t.Run(flush, func(t *testing.T) {
			rdb := srv.Client(t)
			obs, hs := holdEveryKind(t, rdb)
			since := time.Now()
			args := make([]any, 0, 2)
			for _, a := range strings.Fields(flush) {
				args = append(args, a)
			}
			require.NoError(t, rdb.Do(context.Background(), args...).Err())
			awaitEveryLoss(t, obs, hs, since, flush)
		})
	}
}

// TestTrackingRestartWithoutPersistence: a restart that lost every key ends
// every hold as soon as the client's connections are made again, long before
// the first renewal.
func TestTrackingRestartWithoutPersistence(t *testing.T) {
	srv := redistest.StartControllable(t, "--save", "", "--appendonly", "no")
	obs, hs := holdEveryKind(t, srv.Client(t))
	srv.Restart(t)
	awaitEveryLoss(t, obs, hs, time.Now(), "the restart")
}

// TestTrackingNewsLostWithTheConnection: the invalidation of a deletion is
// lost with the connection that was to carry it (a proxy swallows it, then
// drops every connection); the client looks at its holds when it connects
// again, and the hold ends then. Then tracking works again: the next
// deletion is told at once.
func TestTrackingNewsLostWithTheConnection(t *testing.T) {
	srv := redistest.Shared(t)
	direct := srv.Client(t)
	proxy := redistest.NewProxy(t, srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs))
	name := redistest.Name(t)
	a := mutexKind.take(t, c, direct, name+":a")
	b := permitKind.take(t, c, direct, name+":b")
	settle(t, c, direct)
	ctx := testCtx(t, time.Minute)

	proxy.SetDropAll(true) // the invalidation below never reaches the client
	require.NoError(t, direct.Del(ctx, a.key).Err())
	proxy.CloseConns()
	proxy.SetDropAll(false)
	since := time.Now()
	took := awaitLost(t, a, since)
	t.Logf("lost %v after the connections dropped", took.Round(time.Microsecond))
	requireHeld(t, b)

	since = time.Now()
	require.NoError(t, direct.Del(ctx, b.key).Err())
	awaitLost(t, b, since)
}

// TestTrackingAfterClientKill: the server kills the client's tracking
// connections (CLIENT KILL of every pub/sub connection, then of every
// connection with tracking on); the client makes them again and the next
// deletion is told at once.
func TestTrackingAfterClientKill(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	c := newClient(t, rdb)
	name := redistest.Name(t)
	first := mutexKind.take(t, c, rdb, name+":first")
	ctx := testCtx(t, time.Minute)
	require.Eventually(t, func() bool { return trackedConns(t, rdb) == 1 }, trackBound, time.Millisecond)
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	killTracked(t, rdb)
	h := permitKind.take(t, c, rdb, name+":after")
	require.Eventually(t, func() bool { return trackedConns(t, rdb) == 1 }, trackBound, time.Millisecond)
	settle(t, c, rdb)
	requireHeld(t, first)
	for _, x := range []held{first, h} {
		since := time.Now()
		require.NoError(t, rdb.Del(ctx, x.key).Err())
		awaitLost(t, x, since)
	}
}

// trackedConns counts the server's connections with tracking on.
func trackedConns(t *testing.T, rdb *redis.Client) int {
	n := 0
	for _, line := range strings.Split(rdb.ClientList(context.Background()).Val(), "\n") {
		if tracking(line) {
			n++
		}
	}
	return n
}

// tracking reports whether a CLIENT LIST line is a connection with tracking on.
func tracking(line string) bool {
	for _, f := range strings.Fields(line) {
		if flags, ok := strings.CutPrefix(f, "flags="); ok {
			return strings.Contains(flags, "t")
		}
	}
	return false
}

// killTracked kills the server's connections with tracking on.
func killTracked(t *testing.T, rdb *redis.Client) {
	for _, line := range strings.Split(rdb.ClientList(context.Background()).Val(), "\n") {
		if !tracking(line) {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				require.NoError(t, rdb.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err())
			}
		}
	}
}

// TestTrackingRefused: a server that refuses CLIENT TRACKING (here an ACL user
// without it, as a proxy or a managed service would) leaves the holds to the
// renewals: the client says so once in its log, the observer hears the node is
// "refused", and a deleted hold is still found, by its next renewal.
func TestTrackingRefused(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := testCtx(t, time.Minute)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "notrack", "on", ">pw", "~*", "&*", "+@all", "-client", "+client|id").Err())
	rdb := srv.Client(t, func(o *redis.Options) { o.Username, o.Password = "notrack", "pw" })
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs), rlock.WithLogger(log), rlock.WithWatchdogTimeout(600*time.Millisecond))
	name := redistest.Name(t)
	settle(t, c, rdb) // the node is made, and refuses
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.modes[srv.Addr]) > 0
	}, trackBound, time.Millisecond)
	h := mutexKind.take(t, c, rdb, name)
	since := time.Now()
	require.NoError(t, admin.Del(ctx, h.key).Err())
	awaitLost(t, h, since)
	obs.requireCause(t, name, observe.LossRenewal)
	h2 := permitKind.take(t, c, rdb, name+":2")
	require.NoError(t, admin.Do(ctx, "CLIENT", "KILL", "USER", "notrack").Err()) // reconnects: no second log line
	since = time.Now()
	require.NoError(t, admin.Del(ctx, h2.key).Err())
	awaitLost(t, h2, since)

	obs.mu.Lock()
	require.Equal(t, []observe.TrackingMode{observe.TrackingRefused}, obs.modes[srv.Addr])
	obs.mu.Unlock()
	logMu.Lock()
	defer logMu.Unlock()
	require.Equal(t, 1, strings.Count(logs.String(), "msg="+observe.EventTracking+" "), "log:\n%s", logs.String())
	require.Contains(t, logs.String(), "holdfast.tracking=refused")
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestTrackingOff: WithTracking(false) opens no tracking connection, tells the
// observer once that tracking is off, and leaves a deleted hold to its next
// renewal (cause "renewal").
func TestTrackingOff(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs), rlock.WithTracking(false), rlock.WithWatchdogTimeout(600*time.Millisecond))
	name := redistest.Name(t)
	h := mutexKind.take(t, c, rdb, name)
	require.Zero(t, trackedConns(t, rdb))
	since := time.Now()
	require.NoError(t, rdb.Del(context.Background(), h.key).Err())
	awaitLost(t, h, since)
	obs.requireCause(t, name, observe.LossRenewal)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	require.Equal(t, map[string][]observe.TrackingMode{"": {observe.TrackingOff}}, obs.modes)
}

// TestTrackingCluster: on Redis Cluster each primary tracks the keys it holds:
// holds on different primaries each end at once when deleted.
func TestTrackingCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	rdb := cl.Client(t)
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs))
	ctx := testCtx(t, time.Minute)
	masters := map[string]bool{}
	for addr, name := range onEachPrimary(t, rdb, 3) {
		masters[addr] = true
		l, err := c.NewMutex(name).Lock(rlock.WithOwner(ctx))
		require.NoError(t, err)
		settleOn(t, c, rdb, name)
		since := time.Now()
		require.NoError(t, rdb.Del(ctx, name).Err())
		select {
		case <-l.Done():
		case <-time.After(trackBound):
			t.Fatalf("%s on %s: still held after its deletion", name, addr)
		}
		require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
		t.Logf("%s on %s lost after %v", name, addr, time.Since(since).Round(time.Microsecond))
		obs.requireCause(t, name, observe.LossInvalidated)
	}
	for addr := range masters {
		require.Eventually(t, func() bool {
			obs.mu.Lock()
			defer obs.mu.Unlock()
			return slices.Equal([]observe.TrackingMode{observe.TrackingOn}, obs.modes[addr])
		}, trackBound, time.Millisecond, "node %s", addr)
	}
}

// onEachPrimary returns a name on each of the cluster's n primaries, by the
// primary's address.
func onEachPrimary(t *testing.T, rdb *redis.ClusterClient, n int) map[string]string {
	t.Helper()
	names := map[string]string{}
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("%s:%d", redistest.Name(t), i)
		node, err := rdb.MasterForKey(context.Background(), name)
		require.NoError(t, err)
		if _, ok := names[node.Options().Addr]; !ok {
			names[node.Options().Addr] = name
		}
	}
	return names
}

// settleOn is settle on a cluster, with a barrier in the hash slot of name.
func settleOn(t *testing.T, c *rlock.Client, rdb *redis.ClusterClient, name string) {
	t.Helper()
	barrier := "{" + name + "}:settle"
	l, err := c.NewMutex(barrier).Lock(rlock.WithOwner(context.Background()))
	require.NoError(t, err)
	require.NoError(t, rdb.Del(context.Background(), barrier).Err())
	select {
	case <-l.Done():
	case <-time.After(trackBound):
		t.Fatalf("barrier %s still held after its deletion", barrier)
	}
}

// TestTrackingSentinelFailoverLosesTheKey: a Sentinel failover to a replica
// that does not have the lock (it was deleted there alone, as a write lost in
// replication would be) ends the hold once the client follows the new
// primary, long before the first renewal.
func TestTrackingSentinelFailoverLosesTheKey(t *testing.T) {
	f := redistest.StartFailover(t, 1, 3)
	rdb := f.Client(t)
	obs := newLossLog()
	c := newClient(t, rdb, rlock.WithObserver(obs), rlock.WithWatchdogTimeout(2*time.Minute)) // renewals every 40 s
	ctx := testCtx(t, 2*time.Minute)
	name := redistest.Name(t)
	h := mutexKind.take(t, c, rdb, name)
	settle(t, c, rdb)
	replica := redis.NewClient(&redis.Options{Addr: f.Replicas[0].Addr})
	t.Cleanup(func() { _ = replica.Close() })
	require.Eventually(t, func() bool { return replica.Exists(ctx, name).Val() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, replica.ConfigSet(ctx, "replica-read-only", "no").Err())
	require.NoError(t, replica.Del(ctx, name).Err())
	old := f.Primary.Addr
	f.Primary.Kill()
	promoted, err := f.WaitMasterChange(ctx, old)
	require.NoError(t, err)
	since := time.Now()
	select {
	case <-h.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("still held 15 s after %s was promoted: %v", promoted, h.err())
	}
	t.Logf("lost %v after the promotion of %s: %v", time.Since(since).Round(time.Millisecond), promoted, h.err())
	require.ErrorIs(t, h.err(), rlock.ErrLockLost)
	obs.requireCause(t, name, observe.LossInvalidated)
}

// TestTrackingSentinelFollowsThePrimary: the primary is paused (SIGSTOP) until
// the Sentinels promote the replica, then resumed: it lives on as a primary,
// with the tracker's connections still open to it, until the Sentinels make it
// a replica (seconds later). go-redis moves the client's own connections to
// the new primary, not the tracker's; the renewals must follow the client
// there, or the hold would expire on the new primary while its holder,
// renewing on the old one, believes it held (seen under load in
// TestSentinelPrimaryKilled when the Sentinels failed over twice).
func TestTrackingSentinelFollowsThePrimary(t *testing.T) {
	const lease = 9 * time.Second // renewals every 3 s, through a pause of about as long
	f := redistest.StartFailover(t, 1, 3)
	rdb := f.Client(t)
	c := newClient(t, rdb, rlock.WithWatchdogTimeout(lease))
	ctx := testCtx(t, 2*time.Minute)
	name := redistest.Name(t)
	h := mutexKind.take(t, c, rdb, name)
	settle(t, c, rdb)
	replica := f.Replicas[0].Client(t)
	require.Eventually(t, func() bool { return replica.Exists(ctx, name).Val() == 1 }, 10*time.Second, time.Millisecond)

	old := f.Primary.Addr
	require.NoError(t, f.Primary.Signal(syscall.SIGSTOP))
	promoted, err := f.WaitMasterChange(ctx, old)
	require.NoError(t, f.Primary.Signal(syscall.SIGCONT))
	require.NoError(t, err)
	require.Equal(t, f.Replicas[0].Addr, promoted)
	switched := time.Now()
	role, err := f.Primary.Client(t).Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	t.Logf("%s promoted; the old primary, resumed, says it is a %v", promoted, role[0])

	// Past the lease the key had on the new primary at the switch, a renewal
	// that reached it must have extended it.
	deadline := switched.Add(lease + time.Second)
	for time.Now().Before(deadline) {
		requireHeld(t, h)
		pttl, err := replica.PTTL(ctx, name).Result()
		require.NoError(t, err)
		require.Positive(t, pttl, "the hold expired on the new primary %v after the switch", time.Since(switched).Round(time.Millisecond))
		select {
		case <-h.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	require.NoError(t, replica.Del(ctx, name).Err())
	awaitLost(t, h, time.Now()) // and its deletion there is told
}

// TestTrackingCloseLeavesNothing: Close stops the tracker's goroutines and
// closes its connections, on every node it used (a cluster's three primaries
// here), also while a node is down and its connections keep failing.
func TestTrackingCloseLeavesNothing(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	ignore := goleak.IgnoreCurrent()
	rdb := cl.Client(t)
	c, err := rlock.New(rdb)
	require.NoError(t, err)
	ctx := testCtx(t, time.Minute)
	for _, name := range onEachPrimary(t, rdb, 3) {
		_, err = c.NewMutex(name).Lock(rlock.WithOwner(ctx))
		require.NoError(t, err)
		settleOn(t, c, rdb, name)
	}
	for _, n := range cl.Nodes() {
		require.Eventually(t, func() bool { return trackedConns(t, n.Client(t)) == 1 }, trackBound, time.Millisecond, "node %s", n.Addr)
	}
	cl.Nodes()[0].Kill() // its tracking connections fail from now on
	require.NoError(t, c.Close())
	require.NoError(t, rdb.Close())
	for _, n := range cl.Nodes()[1:] {
		require.Eventually(t, func() bool { return trackedConns(t, n.Client(t)) == 0 }, trackBound, time.Millisecond, "node %s", n.Addr)
	}
	goleak.VerifyNone(t, ignore)
}

// TestTrackingRenewalCosts: with tracking, the renewal rounds go through the
// tracker's connection (NOLOOP, each key read again after its extension):
// they cost the server the same script calls as without, one more command per
// hold (the read), and no look after them; the holds stay tracked, so a
// deletion after some rounds is still told at once.
func TestTrackingRenewalCosts(t *testing.T) {
	const holds, rounds = 500, 3
	per := map[bool][2]float64{} // tracking: script calls, commands per round
	for _, track := range []bool{false, true} {
		srv := redistest.Start(t)
		admin := srv.Client(t)
		renewals := &renewCount{}
		c := newClient(t, srv.Client(t), rlock.WithTracking(track), rlock.WithWatchdogTimeout(600*time.Millisecond),
			rlock.WithObserver(struct {
				*lossLog
				*renewCount
			}{newLossLog(), renewals}))
		ctx := testCtx(t, time.Minute)
		var last held
		for i := range holds {
			last = mutexKind.take(t, c, admin, fmt.Sprintf("%s:%d", redistest.Name(t), i))
		}
		settle(t, c, admin)
		require.Eventually(t, func() bool { return renewals.ok() >= holds }, 10*time.Second, time.Millisecond, "a first round")
		base := renewals.ok()
		before := wdCommandStats(t, admin)
		require.Eventually(t, func() bool { return renewals.ok() >= base+rounds*holds }, 10*time.Second, time.Millisecond)
		after := wdCommandStats(t, admin)
		n := float64(renewals.ok()-base) / holds
		var cmds int64
		for k, v := range after {
			if k != "info" && k != "client|list" {
				cmds += v - before[k]
			}
		}
		per[track] = [2]float64{float64(after["evalsha"]-before["evalsha"]) / n, float64(cmds) / n}
		t.Logf("tracking %v: %.1f rounds of %d holds: %.1f script calls, %.0f commands per round", track, n, holds, per[track][0], per[track][1])
		if track {
			since := time.Now()
			require.NoError(t, admin.Del(ctx, last.key).Err())
			took := awaitLost(t, last, since)
			t.Logf("a hold renewed %.0f times, then deleted: lost after %v", n, took.Round(time.Microsecond))
		}
	}
	require.InDelta(t, per[false][0], per[true][0], 1.5, "script calls per round: the renewals alone")
	require.InDelta(t, per[false][1]+holds, per[true][1], 0.2*holds, "commands per round: one more read per hold")
}

// Short holds cost the tracker no look, and a hold its owner keeps changing
// (reentrant acquisitions) no look per change: the server runs the cycles'
// scripts and few others. Before, news of a key's change took the key's new
// holds along to a look, which tracked the key again, so that a busy key
// cost a look per hold (and a held key a look per reentrant acquisition).
func TestTrackingBusyKeyCostsFewLooks(t *testing.T) {
	const cycles = 400
	srv := redistest.Start(t)
	admin := srv.Client(t)
	c := newClient(t, srv.Client(t))
	ctx := testCtx(t, time.Minute)
	name := redistest.Name(t)
	held, err := c.NewMutex(name + ":held").Lock(rlock.WithOwner(ctx))
	require.NoError(t, err)
	owner := rlock.WithOwner(ctx)
	reentrant, err := c.NewMutex(name + ":reentrant").Lock(owner)
	require.NoError(t, err)
	settle(t, c, admin) // both holds looked at: their keys are tracked
	for _, tc := range []struct {
		name string
		m    *rlock.Mutex
		ctx  context.Context
	}{{"short holds", c.NewMutex(name), ctx}, {"reentrant", c.NewMutex(name + ":reentrant"), owner}} {
		before := wdCommandStats(t, admin)["evalsha"]
		for range cycles {
			l, err := tc.m.TryLock(tc.ctx)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(tc.ctx))
		}
		extra := wdCommandStats(t, admin)["evalsha"] - before - 2*cycles
		t.Logf("%s: %d script calls besides the cycles' %d", tc.name, extra, 2*cycles)
		require.Less(t, extra, int64(cycles/4), "%s: looks per cycle", tc.name)
	}
	require.NoError(t, reentrant.Unlock(owner))
	require.NoError(t, held.Unlock(ctx))
}

// logRecord is one line of the client's log, its attributes by key.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
	text  string // the line as a text handler writes it
}

// recordHandler is a slog.Handler that passes every record on, in order.
type recordHandler struct {
	mu   sync.Mutex
	all  []logRecord
	next chan logRecord
}

func newRecordHandler() *recordHandler { return &recordHandler{next: make(chan logRecord, 1000)} }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	var b strings.Builder
	_ = slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}).Handle(context.Background(), r)
	rec.text = strings.TrimSpace(b.String())
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	h.mu.Lock()
	h.all = append(h.all, rec)
	h.mu.Unlock()
	h.next <- rec
	return nil
}

func (h *recordHandler) lines() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), h.all...)
}

// await returns the first record to come that match accepts, within d.
func (h *recordHandler) await(t *testing.T, d time.Duration, what string, match func(logRecord) bool) logRecord {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case r := <-h.next:
			t.Logf("log: %s", r.text)
			if match(r) {
				return r
			}
		case <-timeout:
			t.Fatalf("no %s logged within %v", what, d)
		}
	}
}

// healthObserver is an observer that hears the renewals' health and the holds' ends.
type healthObserver struct {
	renewed   chan struct{}
	failing   chan observe.RenewFailure
	recovered chan observe.RenewRecovery
	ends      chan observe.Hold
}

func newHealthObserver() *healthObserver {
	return &healthObserver{renewed: make(chan struct{}, 1000), failing: make(chan observe.RenewFailure, 1000),
		recovered: make(chan observe.RenewRecovery, 1000), ends: make(chan observe.Hold, 1000)}
}

func (o *healthObserver) Start(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (o *healthObserver) End(context.Context, observe.Call, observe.Result)         {}
func (o *healthObserver) HoldStart(observe.Hold)                                    {}
func (o *healthObserver) HoldEnd(h observe.Hold, _ observe.HoldOutcome, _ error)    { o.ends <- h }
func (o *healthObserver) RenewFailing(f observe.RenewFailure)                       { o.failing <- f }
func (o *healthObserver) RenewRecovered(r observe.RenewRecovery)                    { o.recovered <- r }
func (o *healthObserver) Renewed(outcome observe.RenewOutcome, _ int) {
	if outcome == observe.RenewOK {
		o.renewed <- struct{}{}
	}
}

func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}

// TestOutageIsLogged: a holder whose Redis server is killed is told so in its
// log (WithLogger): a warning naming the lock, its kind and the lease it has
// left, at the first failed renewal round (within a renewal interval, 1 s
// here, and the round's timeout), then, when the lease runs out, one loss
// line naming the lock and its cause (deadline), with the last renewal's
// error. The observer hears the same. Nothing is logged while Redis answers.
func TestOutageIsLogged(t *testing.T) {
	const lease = 3 * time.Second
	srv := redistest.StartControllable(t)
	logs := newRecordHandler()
	obs := newHealthObserver()
	c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(lease), rlock.WithObserver(obs),
		rlock.WithLogger(slog.New(logs)))
	name := redistest.Name(t)
	ctx := testCtx(t, time.Minute)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	recvWithin(t, obs.renewed, 10*time.Second, "renewal")
	recvWithin(t, obs.renewed, 10*time.Second, "second renewal")
	require.Empty(t, logs.lines(), "logged while Redis answers")

	srv.Kill()
	killed := time.Now()
	warn := logs.await(t, lease+10*time.Second, "failed renewal", func(r logRecord) bool {
		return r.msg == observe.EventRenewal && r.level == slog.LevelWarn
	})
	t.Logf("warned %v after the kill", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, name, warn.attrs[observe.AttrName].String())
	require.Equal(t, observe.KindMutex.String(), warn.attrs[observe.AttrKind].String())
	require.Equal(t, observe.RenewFailed.String(), warn.attrs[observe.AttrOutcome].String())
	left := warn.attrs[observe.AttrLeaseLeft]
	require.Equal(t, slog.KindDuration, left.Kind())
	require.Greater(t, left.Duration(), time.Duration(0))
	require.LessOrEqual(t, left.Duration(), lease)
	require.NotEmpty(t, warn.attrs["error"].String())

	f := recvWithin(t, obs.failing, 10*time.Second, "failure reported to the observer")
	require.Equal(t, name, f.Name)
	require.Equal(t, observe.KindMutex, f.Kind)
	require.Greater(t, f.LeaseLeft, time.Duration(0))
	require.Error(t, f.Err)

	loss := logs.await(t, lease+10*time.Second, "loss", func(r logRecord) bool { return r.msg == observe.EventHoldEnd })
	require.Equal(t, slog.LevelWarn, loss.level)
	require.Equal(t, name, loss.attrs[observe.AttrName].String())
	require.Equal(t, observe.HoldLost.String(), loss.attrs[observe.AttrOutcome].String())
	require.Equal(t, observe.LossDeadline.String(), loss.attrs[observe.AttrLoss].String())
	require.Contains(t, loss.attrs["error"].String(), "its last renewal failed")
	<-l.Done()
	require.ErrorIs(t, l.Err(), rlock.ErrLockLost)
	end := recvWithin(t, obs.ends, 10*time.Second, "hold end")
	require.Equal(t, observe.LossDeadline, end.Loss)

	n := 0
	for _, r := range logs.lines() {
		if r.msg == observe.EventHoldEnd {
			n++
		}
	}
	require.Equal(t, 1, n, "one loss line")
}

// TestOutageRecoveryIsLogged: a server frozen for less than the lease (SIGSTOP)
// makes the renewals fail, logged with the lease left; once it answers
// again, one info line says the renewals recovered, after how many failed
// rounds and how long; the lock is still held.
func TestOutageRecoveryIsLogged(t *testing.T) {
	const lease = 15 * time.Second
	srv := redistest.StartControllable(t)
	logs := newRecordHandler()
	obs := newHealthObserver()
	c := newClient(t, srv.Client(t), rlock.WithWatchdogTimeout(lease), rlock.WithRenewInterval(time.Second),
		rlock.WithObserver(obs), rlock.WithLogger(slog.New(logs)))
	name := redistest.Name(t)
	ctx := testCtx(t, time.Minute)
	l, err := c.NewMutex(name).Lock(ctx)
	require.NoError(t, err)
	recvWithin(t, obs.renewed, 10*time.Second, "renewal")

	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = srv.Signal(syscall.SIGCONT) })
	warn := logs.await(t, lease, "failed renewal", func(r logRecord) bool { return r.msg == observe.EventRenewal })
	require.Equal(t, slog.LevelWarn, warn.level)
	require.Equal(t, name, warn.attrs[observe.AttrName].String())
	require.Greater(t, warn.attrs[observe.AttrLeaseLeft].Duration(), time.Duration(0))
	require.NoError(t, srv.Signal(syscall.SIGCONT))

	rec := logs.await(t, lease, "recovery", func(r logRecord) bool {
		return r.msg == observe.EventRenewal && r.level == slog.LevelInfo
	})
	require.Equal(t, observe.RenewOK.String(), rec.attrs[observe.AttrOutcome].String())
	require.True(t, rec.attrs["recovered"].Bool())
	require.GreaterOrEqual(t, rec.attrs[observe.AttrFailedRounds].Int64(), int64(1))
	require.Greater(t, rec.attrs[observe.AttrFailedFor].Duration(), time.Duration(0))
	r := recvWithin(t, obs.recovered, 10*time.Second, "recovery reported to the observer")
	require.GreaterOrEqual(t, r.Rounds, 1)
	require.Equal(t, 1, r.Holds)
	require.NoError(t, l.Err(), "the lock is still held")
	require.NoError(t, l.Unlock(ctx))
	for _, r := range logs.lines() {
		require.NotEqual(t, observe.EventHoldEnd, r.msg, "no loss")
	}
}
