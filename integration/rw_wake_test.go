package integration

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestRWMutexEveryEndOfAHoldWakesTheWaiter proves the waiting invariant ("no
// wait outlives the hold", docs/design.md) for the read/write lock, from both
// sides: a writer or a reader holds, a reader or a writer waits, in the same
// client or in another one, and the hold ends by Unlock, by its lease running
// out, by ForceUnlock from a third client, or by DEL from outside. The holder's
// client has a 1 s watchdog, so a waiter that missed every message would still
// be bounded by about 1 s; the test allows 5 s and logs the latency.
func TestRWMutexEveryEndOfAHoldWakesTheWaiter(t *testing.T) {
	type side func(*rlock.RWMutex) rlock.Locker
	read := func(rw *rlock.RWMutex) rlock.Locker { return rw.ReadLock() }
	write := func(rw *rlock.RWMutex) rlock.Locker { return rw.WriteLock() }
	pairs := []struct {
		name           string
		holder, waiter side
	}{
		{"WriterHoldsReaderWaits", write, read},
		{"WriterHoldsWriterWaits", write, write},
		{"ReaderHoldsWriterWaits", read, write},
	}
	ends := []string{"Unlock", "LeaseExpiry", "ForceUnlock", "DeletedFromOutside"}
	for _, p := range pairs {
		for _, sameClient := range []bool{true, false} {
			for _, end := range ends {
				where := "OtherClient"
				if sameClient {
					where = "SameClient"
				}
				t.Run(p.name+"/"+where+"/"+end, func(t *testing.T) {
					rwWakeCase(t, p.holder, p.waiter, sameClient, end)
				})
			}
		}
	}
}

func rwWakeCase(t *testing.T, holderSide, waiterSide func(*rlock.RWMutex) rlock.Locker, sameClient bool, end string) {
	rdb, holderClient, name := setup(t, rlock.WithWatchdogTimeout(time.Second))
	waiterClient := holderClient
	if !sameClient {
		waiterClient = newClient(t, rdb)
	}
	ctx := testCtx(t, 20*time.Second)
	var opts []rlock.AcquireOption
	if end == "LeaseExpiry" {
		opts = append(opts, rlock.WithLeaseTime(700*time.Millisecond))
	}
	lease, err := holderSide(holderClient.NewRWMutex(name)).Lock(ctx, opts...)
	require.NoError(t, err)

	got := make(chan time.Time, 1)
	go func() {
		l, err := waiterSide(waiterClient.NewRWMutex(name)).Lock(ctx)
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()
	channel := lua.RWChannelName(name)
	awaitSubscribersAtLeast(t, rdb, channel, 1) // the waiter subscribes

	ended := time.Now()
	switch end {
	case "Unlock":
		require.NoError(t, lease.Unlock(ctx))
	case "LeaseExpiry":
		ended = time.Now().Add(time.Until(leaseDeadline(t, rdb, name)))
	case "ForceUnlock":
		ok, err := holderSide(newClient(t, rdb).NewRWMutex(name)).ForceUnlock(ctx)
		require.NoError(t, err)
		require.True(t, ok)
	case "DeletedFromOutside":
		require.NoError(t, rdb.Del(ctx, name).Err())
	}
	select {
	case at, ok := <-got:
		require.True(t, ok, "the waiter failed")
		t.Logf("waiter acquired %v after the hold ended (%s)", at.Sub(ended).Round(time.Millisecond), end)
	case <-time.After(5 * time.Second):
		t.Fatalf("the waiter was not woken within 5 s of the hold's end (%s)", end)
	}
}

// leaseDeadline returns when the lock's key expires, as its PTTL says now.
func leaseDeadline(t *testing.T, rdb *redis.Client, name string) time.Time {
	t.Helper()
	d, err := rdb.PTTL(context.Background(), name).Result()
	require.NoError(t, err)
	return time.Now().Add(d)
}
