package rlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOptionsRefusedWhereTheyDoNotApply: the per-call options share two
// types, so an option an object has no use for compiles and is refused at
// run time, before any round trip: a lease on a Semaphore's permits, and
// WithLockReplicaAcks on a semaphore. The same options are accepted where
// they apply (the offline client then fails the round trip instead).
func TestOptionsRefusedWhereTheyDoNotApply(t *testing.T) {
	rdb, _ := offline(t)
	c, err := New(rdb, WithTracking(false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	sem, es := c.NewSemaphore("opts"), c.NewExpirableSemaphore("opts")
	acks := WithLockReplicaAcks(1, time.Second)
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"Semaphore.TryAcquire with WithLeaseTime", sem.TryAcquire(ctx, 1, WithLeaseTime(time.Second))},
		{"Semaphore.TryAcquire with WithLockReplicaAcks", sem.TryAcquire(ctx, 1, acks)},
		{"ExpirableSemaphore.Acquire with WithLockReplicaAcks", errOf(es.Acquire(ctx, 1, acks))},
		{"ExpirableSemaphore.TryAcquire with WithLockReplicaAcks", errOf(es.TryAcquire(ctx, 1, acks, WithWaitTime(time.Second)))},
	} {
		if !errors.Is(tc.err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.what, tc.err)
		}
	}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"Semaphore.TryAcquire with WithWaitTime", sem.TryAcquire(ctx, 1, WithWaitTime(0))},
		{"ExpirableSemaphore.TryAcquire with WithLeaseTime", errOf(es.TryAcquire(ctx, 1, WithLeaseTime(time.Second)))},
		{"Mutex.TryLock with WithLockReplicaAcks", errOf(c.NewMutex("opts").TryLock(ctx, acks))},
	} {
		if tc.err == nil || errors.Is(tc.err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want the offline client's error", tc.what, tc.err)
		}
	}
}

// errOf returns the error of a call's two results.
func errOf[T any](_ T, err error) error { return err }
