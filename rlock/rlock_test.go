package rlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// countHook counts the commands a go-redis client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// noServer returns a client of a server that does not exist, and a counter of
// noServerClient returns a client of noServer's, closed at the end of the
// test, and the hook that counts what it sent.
func noServerClient(t *testing.T) (*Client, *countHook) {
	t.Helper()
	rdb, sent := noServer(t)
	c, err := New(rdb)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, sent
}

// the commands it tried to send.
func noServer(t *testing.T) (*redis.Client, *countHook) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	h := &countHook{}
	rdb.AddHook(h)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, h
}

func TestNewValidatesOptions(t *testing.T) {
	rdb, _ := noServer(t)
	_, err := New(nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	for _, opt := range []ClientOption{
		WithWatchdogTimeout(-time.Second),
		WithRenewInterval(-time.Second),
		WithWatchdogTimeout(time.Millisecond),
		WithRenewInterval(time.Minute), // not shorter than the 30 s timeout
	} {
		_, err := New(rdb, opt)
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
	c, err := New(rdb)
	require.NoError(t, err)
	require.Len(t, c.ID(), 36)
	require.Equal(t, DefaultWatchdogTimeout, c.opts.watchdogTimeout)
	require.Equal(t, DefaultWatchdogTimeout/3, c.opts.renewInterval)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
}

func TestBadInputFailsBeforeAnyRoundTrip(t *testing.T) {
	c, sent := noServerClient(t)
	ctx := WithOwner(context.Background())
	var err error

	// The empty name, and names whose channel and latches cannot share the
	// name's cluster slot.
	for _, name := range []string{"", "acc:{}:empty", "a}b", "a{b"} {
		bad := c.NewMutex(name)
		_, err = bad.TryLock(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		t.Logf("%q: %v", name, err)
		_, err = bad.Lock(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		require.ErrorIs(t, bad.Unlock(ctx), ErrInvalidArgument, name)
		_, err = bad.ForceUnlock(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = bad.IsLocked(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = bad.HoldCount(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
		_, err = bad.RemainTTL(ctx)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}

	m := c.NewMutex("x")
	_, err = m.TryLock(ctx, WithLeaseTime(-time.Second))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = m.TryLock(ctx, WithWaitTime(-time.Second))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = m.Lock(ctx, WithLeaseTime(-1))
	require.ErrorIs(t, err, ErrInvalidArgument)

	// Unlock of a lock this owner never took, or with a ctx without owner.
	require.ErrorIs(t, m.Unlock(ctx), ErrNotHeld)
	require.ErrorIs(t, m.Unlock(context.Background()), ErrNotHeld)
	held, err := m.IsHeld(context.Background())
	require.NoError(t, err)
	require.False(t, held)

	require.Zero(t, sent.n.Load(), "no command may be sent for bad input")
}

func TestRedisDownIsAnErrorNotAHang(t *testing.T) {
	c, _ := noServerClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := c.NewMutex("x")
	_, err := m.TryLock(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrNotAcquired))
	_, err = m.Lock(ctx)
	require.Error(t, err)
	_, err = m.IsLocked(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "calls must fail, not wait for the deadline")
}

func TestClosedClient(t *testing.T) {
	rdb, sent := noServer(t)
	c, err := New(rdb)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	m := c.NewMutex("x")
	_, err = m.TryLock(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	_, err = m.Lock(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	_, err = m.IsLocked(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	require.Zero(t, sent.n.Load())
}

func TestOwners(t *testing.T) {
	ctx := context.Background()
	require.Nil(t, ownerFrom(ctx))
	a := WithOwner(ctx)
	b := WithOwner(a)
	require.NotNil(t, ownerFrom(a))
	require.NotSame(t, ownerFrom(a), ownerFrom(b), "WithOwner always starts a new owner")
	child, cancel := context.WithCancel(a)
	defer cancel()
	require.Same(t, ownerFrom(a), ownerFrom(child), "derived contexts keep the owner")
}

func TestRetryWindow(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	// Every try may wait for a full timeout and the largest back-off.
	o := rdb.Options()
	want := time.Duration(o.MaxRetries+1)*(max(o.ReadTimeout, o.WriteTimeout)+o.MaxRetryBackoff) + time.Second
	require.Equal(t, want, retryWindow(rdb))
	noTimeout := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1, WriteTimeout: -1})
	defer noTimeout.Close()
	require.Equal(t, time.Minute, retryWindow(noTimeout))
}

func TestNewRejectsTypedNilClient(t *testing.T) {
	_, err := New((*redis.Client)(nil))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = New((*redis.ClusterClient)(nil))
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// A count that keeps changing under an owner's call is ErrConflict, on both sides.
func TestConflictIsTyped(t *testing.T) {
	c, _ := noServerClient(t)
	ctx := WithOwner(context.Background())
	m := c.NewMutex("x")

	c.backend.acquire = func(_ context.Context, a lua.AcquireArgs) (lua.AcquireReply, error) {
		return lua.AcquireReply{Resync: true, Count: a.Expected + 5}, nil
	}
	_, err := m.TryLock(ctx)
	require.ErrorIs(t, err, ErrConflict)

	c.backend.acquire = func(context.Context, lua.AcquireArgs) (lua.AcquireReply, error) {
		return lua.AcquireReply{Acquired: true}, nil
	}
	outer, err := m.TryLock(ctx, WithLeaseTime(time.Hour))
	require.NoError(t, err)
	inner, err := m.TryLock(ctx, WithLeaseTime(time.Hour))
	require.NoError(t, err)
	c.backend.release = func(_ context.Context, a lua.ReleaseArgs) (lua.ReleaseReply, error) {
		return lua.ReleaseReply{Outcome: lua.Resync, Count: a.Expected + 5}, nil
	}
	require.ErrorIs(t, inner.Unlock(ctx), ErrConflict)
	require.ErrorIs(t, inner.Err(), ErrConflict, "a lease ends as its release is sent, and says why it failed")
	require.NoError(t, outer.Err(), "the owner's other lease keeps the hold")
	c.backend.release = func(context.Context, lua.ReleaseArgs) (lua.ReleaseReply, error) {
		return lua.ReleaseReply{Outcome: lua.Released}, nil
	}
	require.NoError(t, outer.Unlock(ctx))
}

// An attempt cut short by ctx (the round trip itself fails with ctx's error)
// still matches ErrNotAcquired as well as ctx.Err(), and is undone.
func TestAttemptCutByCtxMatchesNotAcquired(t *testing.T) {
	c, _ := noServerClient(t)
	var undos atomic.Int64
	c.backend.acquire = func(ctx context.Context, _ lua.AcquireArgs) (lua.AcquireReply, error) {
		<-ctx.Done()
		return lua.AcquireReply{}, ctx.Err()
	}
	c.backend.release = func(context.Context, lua.ReleaseArgs) (lua.ReleaseReply, error) {
		undos.Add(1)
		return lua.ReleaseReply{Outcome: lua.NotHeld}, nil
	}
	m := c.NewMutex("x")
	for _, lock := range []func(context.Context) (*Lease, error){
		func(ctx context.Context) (*Lease, error) { return m.TryLock(ctx) },
		func(ctx context.Context) (*Lease, error) { return m.Lock(ctx) },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := lock(ctx)
		cancel()
		require.ErrorIs(t, err, ErrNotAcquired)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.Equal(t, int64(4), undos.Load(), "each cut attempt is undone, and looked at again when the undo found nothing (undoRecheck)")
}

// An acquisition whose connection was refused never ran: it is not undone (a
// release that would fail the same way, after as long again), and its error
// matches ErrUnreachable and says where Redis was expected.
func TestRefusedAcquisitionIsNotUndone(t *testing.T) {
	c, sent := noServerClient(t)
	_, err := c.NewMutex("x").TryLock(context.Background())
	require.ErrorIs(t, err, ErrUnreachable)
	require.Contains(t, err.Error(), `rlock: lock "x": cannot reach Redis at 127.0.0.1:1: `)
	require.Equal(t, int64(1), sent.n.Load(), "one command: the acquisition, no undo")
}

// An acknowledgement timeout go-redis would not wait for is refused at New.
func TestReplicaAcksTimeoutBelowReadTimeout(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	defer rdb.Close()
	_, err := New(rdb, WithReplicaAcks(1, 2*time.Second))
	require.ErrorIs(t, err, ErrInvalidArgument)
	c, err := New(rdb, WithReplicaAcks(1, 500*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, c.Close())
}
