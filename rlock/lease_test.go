package rlock

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/stretchr/testify/require"
)

// An acquisition whose reply comes after its lease may have run out is not
// returned as held: a single attempt fails with ErrNotAcquired and leaves the
// lock free; a waiting Lock attempts again and returns a lease that is valid.
func TestLateAcquisitionIsNotReturned(t *testing.T) {
	const lease = 200 * time.Millisecond
	f, c := newFakePair(t)
	m := c.NewMutex("late")
	late := true
	f.setHooks(fakeHooks{afterAcquire: func(lua.AcquireArgs, lua.AcquireReply) error {
		if late {
			late = false
			<-time.After(2 * lease) // the reply is held back past the lease: the fault under test
		}
		return nil
	}})

	_, err := m.TryLock(testCtx(t), WithLeaseTime(lease))
	require.ErrorIs(t, err, ErrNotAcquired)
	require.Contains(t, err.Error(), "after the lease")
	requireSettled(t, f, c)

	late = true
	l, err := m.Lock(testCtx(t), WithLeaseTime(lease))
	require.NoError(t, err, "a waiting Lock attempts again")
	require.NoError(t, l.Err())
	require.NoError(t, l.Unlock(context.Background()))
	requireSettled(t, f, c)
}

// Err and Done never report a lease valid past its deadline, whether or not
// the watchdog's goroutine has run.
func TestLeaseErrAtDeadline(t *testing.T) {
	_, c := newFakePair(t)
	l, err := c.NewMutex("deadline").TryLock(testCtx(t), WithLeaseTime(20*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, l.Err())
	require.Eventually(t, func() bool { return l.Err() != nil }, 2*time.Second, tick)
	require.ErrorIs(t, l.Err(), ErrLockLost)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done open after Err reported the loss")
	}
	require.ErrorIs(t, l.Unlock(context.Background()), ErrNotHeld)
}

// A MultiLease ends with its first part, and a RedLock's with its validity,
// whichever comes first; Err is never nil past either.
func TestMultiLeaseEnding(t *testing.T) {
	ctx := testCtx(t)
	c := newFakeClient(t, newFakeLock()) // a fake serves one lock: one client per part
	a, err := c.NewMutex("multi-a").TryLock(ctx)
	require.NoError(t, err)
	b, err := newFakeClient(t, newFakeLock()).NewMutex("multi-b").TryLock(ctx)
	require.NoError(t, err)
	ml := newMultiLease(observe.KindMultiLock, []*Lease{a, b}, time.Time{})
	done := ml.Done()
	require.NoError(t, ml.Err())
	require.NoError(t, b.Unlock(ctx))
	select {
	case <-done:
	default:
		t.Fatal("Done open after a part ended")
	}
	require.ErrorIs(t, ml.Err(), ErrUnlocked)
	require.NoError(t, ml.Unlock(ctx), "the part still held is given back")
	require.ErrorIs(t, a.Err(), ErrUnlocked)

	l, err := newFakeClient(t, newFakeLock()).NewMutex("multi-c").TryLock(ctx)
	require.NoError(t, err)
	valid := newMultiLease(observe.KindRedLock, []*Lease{l}, time.Now().Add(30*time.Millisecond))
	require.NoError(t, valid.Err())
	select {
	case <-valid.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed at the validity's end")
	}
	require.ErrorIs(t, valid.Err(), ErrLockLost)
	require.NoError(t, l.Err(), "the part itself is still held")
	require.NoError(t, valid.Unlock(ctx))
}
