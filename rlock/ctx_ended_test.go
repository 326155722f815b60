package rlock

// A wait ended by its ctx always says so (gaveUp), at
// whatever point it ends, with ctx's own error from go-redis or an i/o
// timeout at the deadline ctx gave a socket.

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/stretchr/testify/require"
)

// lateCtx is a ctx whose deadline has passed but whose timer has not fired
// yet: Err is still nil, as it can be for a while under load.
type lateCtx struct{ context.Context }

func (lateCtx) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// ioTimeout is what go-redis returns for a round trip cut by the deadline
// ctx gave its socket (ContextTimeoutEnabled).
var ioTimeout error = &os.SyscallError{Syscall: "read", Err: os.ErrDeadlineExceeded}

// requireEndedBy requires err to say that a call ended by ctx ended.
func requireEndedBy(t *testing.T, want error, err error, what string) {
	t.Helper()
	require.ErrorIs(t, err, ErrNotAcquired, what)
	require.ErrorIs(t, err, want, what)
}

// TestGaveUp: the one rule. Once ctx has ended, or its deadline has passed,
// any error of an acquisition matches ErrNotAcquired and ctx's error, and of
// Await ctx's error; ErrClosed and ErrNotReplicated stand; a ctx that has
// not ended leaves the error as it is.
func TestGaveUp(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	late := lateCtx{context.Background()}
	wrapped := errors.New("rlock: semaphore \"s\": context canceled")
	for _, err := range []error{context.Canceled, wrapped, ioTimeout, notAvailable("s", 1, false), ErrLatchDeleted} {
		requireEndedBy(t, context.Canceled, gaveUp(canceled, "s", true, err), err.Error())
		requireEndedBy(t, context.DeadlineExceeded, gaveUp(late, "s", true, err), err.Error())
		require.Equal(t, context.Canceled, gaveUp(canceled, "s", false, err), "Await: %v", err)
		require.Equal(t, context.DeadlineExceeded, gaveUp(late, "s", false, err), "Await: %v", err)
		require.Same(t, err, gaveUp(context.Background(), "s", true, err), "ctx alive: %v", err)
	}
	nr := &NotReplicatedError{Semaphore: "s"}
	require.Same(t, error(nr), gaveUp(canceled, "s", true, nr))
	require.Equal(t, ErrClosed, gaveUp(canceled, "s", true, ErrClosed))
	require.NoError(t, gaveUp(canceled, "s", true, nil))
	c := newFakeClient(t, newFakeLock())
	wctx, stop := c.waitContext(context.Background(), time.Time{})
	defer stop()
	require.NoError(t, c.Close())
	<-wctx.Done()
	require.Equal(t, ErrClosed, gaveUp(wctx, "s", true, ioTimeout), "Close ended the wait")
}

// TestCtxEndedFirstAttempt: the first attempt of every kind, made with a
// ctx that has ended (go-redis fails it with ctx's error before sending) or
// whose deadline has passed while its round trip failed with an i/o
// timeout, fails with an error matching ErrNotAcquired and ctx's error, a
// latch's Await too.
func TestCtxEndedFirstAttempt(t *testing.T) {
	f, c := newFakePair(t)
	f.setHooks(fakeHooks{beforeAcquire: func(context.Context, lua.AcquireArgs) error { return ioTimeout }})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	late := lateCtx{context.Background()}
	calls := map[string]func(ctx context.Context) error{
		"Mutex.Lock":        func(ctx context.Context) error { return errOnly(c.NewMutex("m").Lock(ctx)) },
		"Mutex.TryLock":     func(ctx context.Context) error { return errOnly(c.NewMutex("m").TryLock(ctx)) },
		"Campaign":          func(ctx context.Context) error { return errOnly(c.NewElection("e").Campaign(ctx, "v")) },
		"Semaphore.Acquire": func(ctx context.Context) error { return c.NewSemaphore("s").Acquire(ctx, 1) },
		"Semaphore.TryAcquire": func(ctx context.Context) error {
			return c.NewSemaphore("s").TryAcquire(ctx, 1)
		},
		"ExpirableSemaphore.Acquire": func(ctx context.Context) error {
			return errOnly(c.NewExpirableSemaphore("x").Acquire(ctx, 1))
		},
		"ExpirableSemaphore.TryAcquire": func(ctx context.Context) error {
			return errOnly(c.NewExpirableSemaphore("x").TryAcquire(ctx, 1))
		},
	}
	for what, call := range calls {
		requireEndedBy(t, context.Canceled, call(canceled), what+", ctx canceled")
		requireEndedBy(t, context.DeadlineExceeded, call(late), what+", deadline passed")
	}
	requireEndedBy(t, context.Canceled, c.NewCountDownLatch("l").Await(canceled), "Await, ctx canceled")
	requireEndedBy(t, context.DeadlineExceeded, c.NewCountDownLatch("l").Await(late), "Await, deadline passed")
}

// errOnly drops the value of a call's reply.
func errOnly[T any](_ T, err error) error { return err }
