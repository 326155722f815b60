package integration

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/pubsub"
	"github.com/stretchr/testify/require"
)

// lockWake is the locks' wake policy (rlock's): lua.WakeAllMessage ("1") wakes
// every subscription, any other message ("0") one.
func lockWake(payload string) int {
	if payload == lua.WakeAllMessage {
		return pubsub.All
	}
	return 1
}

func hubRecv(t *testing.T, s *pubsub.Subscription) bool {
	t.Helper()
	select {
	case <-s.Ready():
		return true
	case <-time.After(2 * time.Second):
		return false
	}
}

func hubNothing(t *testing.T, s *pubsub.Subscription) {
	t.Helper()
	select {
	case <-s.Ready():
		t.Fatal("unexpected wake-up")
	default:
	}
}

func TestHubTokens(t *testing.T) {
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	hub := pubsub.New(rdb, pubsub.Options{Linger: 100 * time.Millisecond})
	t.Cleanup(func() { _ = hub.Close() })
	ctx := testCtx(t, 30*time.Second)
	ch := redistest.Name(t)

	a, err := hub.Subscribe(ctx, ch, lockWake)
	require.NoError(t, err)
	b, err := hub.Subscribe(ctx, ch, lockWake)
	require.NoError(t, err)
	select {
	case <-a.Confirmed():
	case <-time.After(2 * time.Second):
		t.Fatal("subscription not confirmed")
	}
	<-b.Confirmed()
	require.EqualValues(t, 1, rdb.PubSubNumSub(ctx, ch).Val()[ch], "one connection shared by both")

	// "0" wakes one subscription.
	require.NoError(t, rdb.Publish(ctx, ch, "0").Err())
	require.Eventually(t, func() bool {
		select {
		case <-a.Ready():
			return true
		case <-b.Ready():
			return true
		default:
			return false
		}
	}, 2*time.Second, time.Millisecond)
	hubNothing(t, a)
	hubNothing(t, b)

	// "1" wakes all.
	require.NoError(t, rdb.Publish(ctx, ch, "1").Err())
	require.True(t, hubRecv(t, a))
	require.True(t, hubRecv(t, b))

	// A token nobody takes is banked, not lost: three messages, each
	// subscription's channel holds one, the third is banked and handed out by
	// the next Ready after a token was consumed.
	for i := 0; i < 3; i++ {
		require.NoError(t, rdb.Publish(ctx, ch, "0").Err())
	}
	require.True(t, hubRecv(t, a))
	require.True(t, hubRecv(t, b))
	require.True(t, hubRecv(t, a), "the banked token")
	hubNothing(t, a)
	hubNothing(t, b)

	// Closing hands an unconsumed token to the others.
	require.NoError(t, rdb.Publish(ctx, ch, "0").Err())
	require.Eventually(t, func() bool { return len(a.Ready()) == 1 || len(b.Ready()) == 1 }, 2*time.Second, time.Millisecond)
	if len(a.Ready()) == 1 {
		a.Close()
		require.True(t, hubRecv(t, b))
	} else {
		b.Close()
		require.True(t, hubRecv(t, a))
	}
	a.Close()
	b.Close()

	// The channel is unsubscribed after the linger time.
	awaitSubscribers(t, rdb, ch, 0)
	require.Empty(t, hub.Channels())
}

func TestHubReconnectWakesEveryone(t *testing.T) {
	srv := redistest.Start(t) // CLIENT KILL must not hit other tests
	rdb := srv.Client(t)
	hub := pubsub.New(rdb, pubsub.Options{})
	t.Cleanup(func() { _ = hub.Close() })
	ctx := testCtx(t, 30*time.Second)
	ch1, ch2 := redistest.Name(t), redistest.Name(t)
	s1, err := hub.Subscribe(ctx, ch1, lockWake)
	require.NoError(t, err)
	s2, err := hub.Subscribe(ctx, ch2, lockWake)
	require.NoError(t, err)
	<-s1.Confirmed()
	<-s2.Confirmed()

	// Kill the subscriber connections (other tests reconnect by themselves).
	require.NoError(t, rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.True(t, hubRecv(t, s1), "re-subscription wakes the waiters of ch1")
	require.True(t, hubRecv(t, s2), "and of ch2")
	// And messages flow again.
	awaitSubscribers(t, rdb, ch1, 1)
	require.NoError(t, rdb.Publish(ctx, ch1, "0").Err())
	require.True(t, hubRecv(t, s1))
	s1.Close()
	s2.Close()
}
