package integration

// An acquisition of an expirable semaphore whose reply arrives after the
// permits' lease, and whose give-back never reaches Redis, must not come back
// as a handle that says valid on a permit Redis counts as expired: another
// client would reclaim it and hold it too (two valid handles on a semaphore of
// one permit).

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// failScript makes the next script call on a client whose first key is key
// and which has keys keys fail without reaching Redis, as on a broken
// connection. Arm it, then read how many calls it failed.
type failScript struct {
	key  string
	keys int

	mu     sync.Mutex
	armed  bool
	failed int
}

func (f *failScript) arm() {
	f.mu.Lock()
	f.armed = true
	f.mu.Unlock()
}

func (f *failScript) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// matches reports whether cmd is the script call to fail, and disarms.
func (f *failScript) matches(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 4 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	if n, ok := args[2].(int); !ok || n != f.keys || args[3] != f.key {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.armed {
		return false
	}
	f.armed = false
	f.failed++
	return true
}

func (f *failScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.matches(cmd) {
			err := errors.New("test: connection broken before the command was sent")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (f *failScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestExpirableLateReplyNeverGrantsAnExpiredPermit: A's Acquire on a semaphore
// of one permit has its reply held back past the permit's lease; A gives the
// permit back, but the give-back fails before it reaches Redis; A attempts
// again with the same ids. The handle A gets must describe a permit Redis holds
// unexpired, and while it says valid, B must not acquire. Both leases: the
// watchdog's and a fixed one.
func TestExpirableLateReplyNeverGrantsAnExpiredPermit(t *testing.T) {
	const lease = time.Second
	for _, tc := range []struct {
		name   string
		client []rlock.ClientOption
		permit []rlock.AcquireOption
	}{
		{"watchdog lease", []rlock.ClientOption{rlock.WithWatchdogTimeout(lease)}, nil},
		{"fixed lease", nil, []rlock.AcquireOption{rlock.WithLeaseTime(lease)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Shared(t)
			direct := srv.Client(t)
			name := redistest.Name(t)
			proxy := redistest.NewProxy(t, srv.Addr)
			rdbA := srv.Client(t, func(o *redis.Options) { o.Addr = proxy.Addr; o.ReadTimeout = 10 * time.Second })
			giveBack := &failScript{key: name, keys: 4} // permit_release: N, {N}:timeout, channel, request
			rdbA.AddHook(giveBack)
			a := newClient(t, rdbA, tc.client...)
			b := newClient(t, direct)
			ctx := testCtx(t, time.Minute)
			sA := expSemaphore(t, direct, a, name, 1)
			sB := b.NewExpirableSemaphore(name)

			proxy.DelayNextReplies(1, lease+300*time.Millisecond) // the acquisition's reply, and no other
			giveBack.arm()
			got := make(chan *rlock.Permits, 1)
			go func() {
				p, err := sA.Acquire(ctx, 1, tc.permit...)
				if err != nil {
					t.Errorf("A's Acquire: %v", err)
				}
				got <- p
			}()
			var p *rlock.Permits
			select {
			case p = <-got:
			case <-time.After(20 * time.Second):
				t.Fatal("A's Acquire did not return")
			}
			require.NotNil(t, p)
			t.Cleanup(func() { _ = p.Release(context.Background()) })
			require.Equal(t, 1, giveBack.count(), "the late reply's give-back was sent, and failed")

			// What the handle says must be what Redis holds.
			checked := time.Now()
			score, ok := syncScore(t, direct, name, p.IDs()[0])
			if p.Err() == nil {
				require.True(t, ok, "A's handle says valid: Redis must hold its permit")
				require.Greater(t, score, checked.UnixMilli(),
					"A's handle says valid: its permit must not be expired in Redis (score %d ms after the check)", score-checked.UnixMilli())
			}

			// Never two valid handles: B acquires only once A's handle has ended.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for deadline := time.Now().Add(2 * lease); time.Now().Before(deadline); <-tick.C {
				q, err := sB.TryAcquire(ctx, 1, rlock.WithLeaseTime(lease))
				if errors.Is(err, rlock.ErrNotAcquired) {
					continue
				}
				require.NoError(t, err)
				require.Error(t, p.Err(), "B acquired the only permit while A's handle says valid")
				require.NoError(t, q.Release(ctx))
				break
			}
			t.Logf("A's handle at the end: %v", p.Err())
			total, err := sB.TotalPermits(ctx)
			require.NoError(t, err)
			require.EqualValues(t, 1, total, "available plus acquired: no permit lost or made")
		})
	}
}
