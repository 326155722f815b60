package rlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireEndedWith checks that ctx is cancelled with a cause matching want,
// as the handle's Err does (Err may have restated the reason since: a
// release's outcome, Close's).
func requireEndedWith(t *testing.T, ctx context.Context, handleErr error, want error) {
	t.Helper()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("the ctx is not cancelled after the hold ended")
	}
	require.ErrorIs(t, ctx.Err(), context.Canceled)
	cause := context.Cause(ctx)
	require.ErrorIs(t, cause, want)
	require.ErrorIs(t, handleErr, want)
}

// fakeLease returns a client of a new fake lock and a lease of its mutex
// name, taken by Lock with opts.
func fakeLease(t *testing.T, name string, opts ...AcquireOption) (*Client, *Lease) {
	t.Helper()
	_, c := newFakePair(t)
	l, err := c.NewMutex(name).Lock(testCtx(t), opts...)
	require.NoError(t, err)
	return c, l
}

// A Lease's Context is cancelled as the lease ends, by Unlock, with the
// lease's reason as its cause, and leaves no watch behind.
func TestLeaseContextUnlock(t *testing.T) {
	_, l := fakeLease(t, "ctx-unlock")
	type key struct{}
	ctx, cancel := l.Context(context.WithValue(context.Background(), key{}, "v"))
	defer cancel()
	require.NoError(t, ctx.Err())
	require.Equal(t, "v", ctx.Value(key{}), "ctx derives from parent")
	require.Equal(t, 1, l.ended.watching())

	require.NoError(t, l.Unlock(context.Background()))
	requireEndedWith(t, ctx, l.Err(), ErrUnlocked)
	require.Zero(t, l.ended.watching())
}

// A lease lost (here at its deadline, with no renewal) cancels its Context
// with ErrLockLost.
func TestLeaseContextLost(t *testing.T) {
	_, l := fakeLease(t, "ctx-lost", WithLeaseTime(20*time.Millisecond))
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	<-ctx.Done() // no one asks Err: the watchdog's deadline ends the lease
	requireEndedWith(t, ctx, l.Err(), ErrLockLost)
}

// Close cancels the Context of a lease it ends with ErrClosed.
func TestLeaseContextClose(t *testing.T) {
	c, l := fakeLease(t, "ctx-close")
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	require.NoError(t, c.Close())
	requireEndedWith(t, ctx, l.Err(), ErrClosed)
}

// cancel, or parent's end, cancels the ctx alone: the lease is still held, and
// its watch is gone (at once with cancel, soon after parent's end).
func TestLeaseContextCancelled(t *testing.T) {
	_, l := fakeLease(t, "ctx-cancel")

	ctx, cancel := l.Context(context.Background())
	cancel()
	cancel() // idempotent
	require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	require.Zero(t, l.ended.watching(), "cancel leaves no watch behind")

	parent, cancelParent := context.WithCancelCause(context.Background())
	errParent := errors.New("request over")
	ctx, cancel = l.Context(parent)
	defer cancel()
	cancelParent(errParent)
	<-ctx.Done()
	require.ErrorIs(t, context.Cause(ctx), errParent)
	require.Eventually(t, func() bool { return l.ended.watching() == 0 }, 2*time.Second, tick)

	require.NoError(t, l.Err())
	require.NoError(t, l.Unlock(context.Background()))
}

// The Context of a lease that has ended is cancelled at once.
func TestLeaseContextAfterEnd(t *testing.T) {
	_, l := fakeLease(t, "ctx-after")
	require.NoError(t, l.Unlock(context.Background()))
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	requireEndedWith(t, ctx, l.Err(), ErrUnlocked)
	require.Zero(t, l.ended.watching())
}

// A Leadership's Context is its lease's; a Permits' ends with the permits.
func TestLeadershipAndPermitsContext(t *testing.T) {
	_, l := fakeLease(t, "ctx-lead")
	lead := &Leadership{lease: l}
	ctx, cancel := lead.Context(context.Background())
	defer cancel()
	require.NoError(t, l.Unlock(context.Background()))
	requireEndedWith(t, ctx, lead.Err(), ErrUnlocked)

	p := &Permits{s: &ExpirableSemaphore{o: syncObject{name: "sem"}}, raw: []string{"0123456789abcdef"}}
	pctx, pcancel := p.Context(context.Background())
	defer pcancel()
	require.NoError(t, pctx.Err())
	p.ended.end(releasedError{p})
	requireEndedWith(t, pctx, p.Err(), ErrReleased)
	require.Zero(t, p.ended.watching())
}

// Many Contexts on one lease all end with it.
func TestLeaseContextMany(t *testing.T) {
	_, l := fakeLease(t, "ctx-many")
	var ctxs []context.Context
	for range 10 {
		ctx, cancel := l.Context(context.Background())
		defer cancel()
		ctxs = append(ctxs, ctx)
	}
	require.Equal(t, 10, l.ended.watching())
	require.NoError(t, l.Unlock(context.Background()))
	for _, ctx := range ctxs {
		requireEndedWith(t, ctx, l.Err(), ErrUnlocked)
	}
}
