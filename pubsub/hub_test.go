package pubsub

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// These tests drive the hub's bookkeeping (join, deliver, subscribed, Ready,
// Close) and its dispatchers directly: no Redis, no connection. The payloads
// below mean what each test's policy says; the hub reads none.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// one wakes one subscription per message, whatever the payload.
func one(string) int { return 1 }

// all wakes every subscription, whatever the payload.
func all(string) int { return All }

// permits reads the payload as a count, as a semaphore's release would.
func permits(p string) int {
	n, err := strconv.Atoi(p)
	if err != nil {
		panic(err)
	}
	return n
}

// newHub returns a hub that never connects: the tests only call its
// bookkeeping, which touches no connection.
func newHub(t *testing.T, opts Options) *Hub {
	t.Helper()
	h := New(nil, opts)
	t.Cleanup(func() { require.NoError(t, h.Close()) })
	return h
}

// join subscribes to channel with wake, without a connection.
func join(t *testing.T, h *Hub, channel string, wake WakePolicy) *Subscription {
	t.Helper()
	h.mu.Lock()
	s, _, err := h.join(channel, wake, nil)
	h.mu.Unlock()
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// joinN subscribes n times to channel with wake, oldest first.
func joinN(t *testing.T, h *Hub, channel string, n int, wake WakePolicy) []*Subscription {
	t.Helper()
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = join(t, h, channel, wake)
	}
	return subs
}

// held reports, per subscription, whether a token waits in its channel (banked
// tokens are not moved: Ready is not called).
func held(subs ...*Subscription) []bool {
	out := make([]bool, len(subs))
	for i, s := range subs {
		out[i] = len(s.token) == 1
	}
	return out
}

// banked returns the tokens banked on channel.
func banked(h *Hub, channel string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entries[channel].permits
}

// take reports whether s has a token now (moving a banked one in first, as a
// waiter's Ready does) and consumes it.
func take(s *Subscription) bool {
	select {
	case <-s.Ready():
		return true
	default:
		return false
	}
}

func TestDeliverOneOfN(t *testing.T) {
	h := newHub(t, Options{})
	subs := joinN(t, h, "ch", 3, one)

	h.deliver("ch", "x")
	require.Equal(t, []bool{true, false, false}, held(subs...), "the oldest subscription with room")
	h.deliver("ch", "x")
	require.Equal(t, []bool{true, true, false}, held(subs...), "then the next one with room")
	require.Zero(t, banked(h, "ch"))

	require.True(t, take(subs[0]))
	h.deliver("ch", "x")
	require.Equal(t, []bool{true, true, false}, held(subs...), "the oldest has room again")
}

func TestDeliverNOfM(t *testing.T) {
	h := newHub(t, Options{})
	subs := joinN(t, h, "ch", 5, permits)

	h.deliver("ch", "3")
	require.Equal(t, []bool{true, true, true, false, false}, held(subs...))
	require.Zero(t, banked(h, "ch"))

	h.deliver("ch", "3")
	require.Equal(t, []bool{true, true, true, true, true}, held(subs...))
	require.Equal(t, 1, banked(h, "ch"), "the third wake-up found no room")

	h.deliver("ch", "1")
	require.Equal(t, 2, banked(h, "ch"))
}

func TestDeliverAll(t *testing.T) {
	h := newHub(t, Options{})
	subs := joinN(t, h, "ch", 3, all)

	h.deliver("ch", "x")
	require.Equal(t, []bool{true, true, true}, held(subs...))
	require.Zero(t, banked(h, "ch"), "every subscription holds a token: nothing to bank")

	require.True(t, take(subs[1]))
	h.deliver("ch", "x")
	require.Equal(t, []bool{true, true, true}, held(subs...))
	h.deliver("ch", "x")
	require.Zero(t, banked(h, "ch"), "All banks nothing, even when nobody has room")
}

func TestBankedTokenTakenByReady(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "ch", one), join(t, h, "ch", one)

	for range 3 {
		h.deliver("ch", "x")
	}
	require.Equal(t, []bool{true, true}, held(a, b))
	require.Equal(t, 1, banked(h, "ch"))

	require.True(t, take(a))
	require.True(t, take(a), "Ready hands out the banked token")
	require.Zero(t, banked(h, "ch"))
	require.False(t, take(a))
	require.True(t, take(b))
	require.False(t, take(b))

	// Ready moves a banked token only into an empty channel.
	h.deliver("ch", "x")
	h.deliver("ch", "x")
	h.deliver("ch", "x")
	require.Equal(t, 1, banked(h, "ch"))
	a.Ready()
	require.Equal(t, 1, banked(h, "ch"), "a's channel is full: the bank stays")
	<-a.Ready()
	require.Equal(t, []bool{false, true}, held(a, b))
	a.Ready()
	require.Equal(t, []bool{true, true}, held(a, b), "the banked token moved in")
	require.Zero(t, banked(h, "ch"))
}

func TestBankCappedAtSubscriptions(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "ch", permits), join(t, h, "ch", permits)

	h.deliver("ch", "10")
	require.Equal(t, []bool{true, true}, held(a, b))
	require.Equal(t, 2, banked(h, "ch"), "at most one banked token per subscription")
	h.deliver("ch", strconv.Itoa(math.MaxInt-1))
	require.Equal(t, 2, banked(h, "ch"), "no overflow either")
	for range 5 {
		h.deliver("ch", "1")
	}
	require.Equal(t, 2, banked(h, "ch"))

	require.True(t, take(a))
	require.True(t, take(a))
	require.True(t, take(a), "a takes both banked tokens in turn")
	require.False(t, take(a))
	require.True(t, take(b))
	require.False(t, take(b))
}

func TestCloseReturnsTokenToBank(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "ch", one), join(t, h, "ch", one)

	h.deliver("ch", "x")
	require.Equal(t, []bool{true, false}, held(a, b))
	a.Close()
	require.Equal(t, 1, banked(h, "ch"), "a's unconsumed token")
	require.True(t, take(b), "goes to the next Ready")
	require.False(t, take(b))

	a.Close() // idempotent
	require.Zero(t, banked(h, "ch"))
	require.False(t, take(a), "a closed subscription takes nothing from the bank")
}

func TestCloseKeepsBankCapped(t *testing.T) {
	h := newHub(t, Options{})
	a, b, c := join(t, h, "ch", one), join(t, h, "ch", one), join(t, h, "ch", one)
	for range 6 {
		h.deliver("ch", "x")
	}
	require.Equal(t, 3, banked(h, "ch"))

	a.Close()
	require.Equal(t, 2, banked(h, "ch"), "capped at the two subscriptions left")
	b.Close()
	c.Close()
	require.Zero(t, banked(h, "ch"))
}

func TestReconnectWakesAll(t *testing.T) {
	h := newHub(t, Options{})
	never := func(string) int { return 0 }
	a, b := join(t, h, "ch", never), join(t, h, "ch", one)
	other := join(t, h, "other", never)

	select {
	case <-a.Confirmed():
		t.Fatal("confirmed before the server said so")
	default:
	}
	h.subscribed("ch")
	<-a.Confirmed()
	<-b.Confirmed()
	require.Equal(t, []bool{false, false, false}, held(a, b, other), "the first confirmation wakes nobody")

	h.subscribed("ch") // go-redis reconnected and subscribed again
	require.Equal(t, []bool{true, true, false}, held(a, b, other), "every subscription, whatever its policy")
	require.Zero(t, banked(h, "ch"))
	h.subscribed("ch")
	require.Zero(t, banked(h, "ch"), "nothing banked when everyone holds a token")

	c := join(t, h, "ch", never)
	<-c.Confirmed() // a later subscription shares the confirmed subscription
}

func TestUnknownChannelIgnored(t *testing.T) {
	h := newHub(t, Options{})
	s := join(t, h, "ch", one)

	h.deliver("nope", "x")
	h.subscribed("nope")
	require.Equal(t, []string{"ch"}, h.Channels(), "no entry made for a channel nobody joined")
	require.False(t, held(s)[0])

	// A lingering channel (subscribed, nobody left) banks nothing.
	s.Close()
	h.deliver("ch", "x")
	require.Zero(t, banked(h, "ch"))
	s2 := join(t, h, "ch", one)
	require.False(t, take(s2))
}

func TestPolicyZeroOrNegativeWakesNone(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "ch", permits), join(t, h, "ch", permits)

	for _, p := range []string{"0", "-1", strconv.Itoa(math.MinInt)} {
		h.deliver("ch", p)
		require.Equal(t, []bool{false, false}, held(a, b), p)
		require.Zero(t, banked(h, "ch"), p)
	}
	h.deliver("ch", "2")
	h.deliver("ch", "0")
	require.Equal(t, []bool{true, true}, held(a, b))
	require.Zero(t, banked(h, "ch"), "0 banks nothing even when nobody has room")
}

func TestMixedPoliciesOldestGoverns(t *testing.T) {
	h := newHub(t, Options{})
	var calls []string
	record := func(name string, w WakePolicy) WakePolicy {
		return func(p string) int {
			calls = append(calls, name)
			return w(p)
		}
	}
	a := join(t, h, "ch", record("a", one))
	b := join(t, h, "ch", record("b", all))
	c := join(t, h, "ch", record("c", one))

	h.deliver("ch", "x")
	require.Equal(t, []bool{true, false, false}, held(a, b, c), "a's policy: one")
	require.Equal(t, []string{"a"}, calls, "one policy called, once per message")

	a.Close()
	require.True(t, take(b), "a's token went to the bank")
	h.deliver("ch", "x")
	require.Equal(t, []bool{true, true}, held(b, c), "b is now the oldest: its policy wakes all")
	require.Equal(t, []string{"a", "b"}, calls)

	// A lingering channel takes the policy of its next subscriber.
	b.Close()
	c.Close()
	d := join(t, h, "ch", record("d", permits))
	e := join(t, h, "ch", record("e", all))
	h.deliver("ch", "1")
	require.Equal(t, []bool{true, false}, held(d, e))
	require.Equal(t, []string{"a", "b", "d"}, calls)
}

// TestHeardSeesEveryMessage: a subscription with Heard is told every message of
// its channel while it is open, whichever subscriptions the policy wakes, and
// nothing before it joined or after it closed.
func TestHeardSeesEveryMessage(t *testing.T) {
	h := newHub(t, Options{})
	a := join(t, h, "ch", one)
	h.deliver("ch", "before")
	var heard []string
	h.mu.Lock()
	b, _, err := h.join("ch", one, []SubscribeOption{Heard(func(p string) { heard = append(heard, p) })})
	h.mu.Unlock()
	require.NoError(t, err)
	h.deliver("ch", "0") // wakes a, the oldest, only
	h.deliver("ch", "1")
	require.Equal(t, []string{"0", "1"}, heard, "both messages, the one that woke another subscription too")
	require.True(t, take(a))
	b.Close()
	h.deliver("ch", "after")
	require.Equal(t, []string{"0", "1"}, heard, "nothing once closed")
}

func TestJoinRefusals(t *testing.T) {
	h := New(nil, Options{})
	ctx := context.Background()

	_, err := h.Subscribe(ctx, "ch", nil)
	require.ErrorIs(t, err, errNoPolicy)
	_, err = h.SSubscribe(ctx, "ch", nil)
	require.ErrorIs(t, err, errNoPolicy)
	_, err = h.SSubscribe(ctx, "ch", one)
	require.ErrorContains(t, err, "*redis.ClusterClient")
	require.Empty(t, h.Channels())

	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "idempotent")
	_, err = h.Subscribe(ctx, "ch", one)
	require.ErrorIs(t, err, ErrClosed)
}

func TestJoinDuringLingerReusesEntry(t *testing.T) {
	h := newHub(t, Options{Linger: time.Hour})
	h.mu.Lock()
	s, fresh, err := h.join("ch", one, nil)
	h.mu.Unlock()
	require.NoError(t, err)
	require.True(t, fresh, "the first join makes the entry: subscribe must SUBSCRIBE")
	h.subscribed("ch")
	s.Close()

	_, ok := h.unsubscribeIdle()
	require.True(t, ok, "still lingering")
	require.Equal(t, []string{"ch"}, h.Channels())

	h.mu.Lock()
	s2, fresh, err := h.join("ch", one, nil)
	h.mu.Unlock()
	require.NoError(t, err)
	t.Cleanup(s2.Close)
	require.False(t, fresh, "no second SUBSCRIBE")
	<-s2.Confirmed()
}

func TestIdleChannelForgottenAfterLinger(t *testing.T) {
	h := newHub(t, Options{Linger: time.Hour})
	idle, shardIdle := join(t, h, "idle", one), join(t, h, "{s}idle", one)
	join(t, h, "busy", one)
	f := &shardFeed{h: h, want: map[string]struct{}{"{s}idle": {}}, poke: make(chan struct{}, 1)}
	h.mu.Lock()
	h.entries["{s}idle"].shard = f
	h.mu.Unlock()
	idle.Close()
	shardIdle.Close()

	h.mu.Lock()
	h.entries["idle"].idleSince = time.Now().Add(-2 * time.Hour)
	h.entries["{s}idle"].idleSince = time.Now().Add(-2 * time.Hour)
	h.mu.Unlock()
	_, ok := h.unsubscribeIdle()
	require.False(t, ok, "nothing left lingering")
	require.Equal(t, []string{"busy"}, h.Channels())
	require.Empty(t, f.want, "the shard feed no longer carries the channel")
	require.Len(t, f.poke, 1, "and was told so")
}

func TestSweeperUnsubscribesAfterLinger(t *testing.T) {
	h := newHub(t, Options{Linger: 20 * time.Millisecond})
	h.mu.Lock()
	s, _, err := h.join("ch", one, nil)
	h.startSweeper()
	h.mu.Unlock()
	require.NoError(t, err)

	start := time.Now()
	s.Close()
	require.Eventually(t, func() bool { return len(h.Channels()) == 0 }, 5*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "not before the linger time")
}

// TestDispatch feeds the classic dispatcher what go-redis' channel delivers.
func TestDispatch(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "ch", permits), join(t, h, "ch", permits)

	in := make(chan any)
	h.done = make(chan struct{})
	go h.dispatch(in)
	in <- &redis.Subscription{Kind: "subscribe", Channel: "ch", Count: 1}
	in <- &redis.Message{Channel: "ch", Payload: "1"}
	in <- &redis.Pong{}
	in <- &redis.Subscription{Kind: "unsubscribe", Channel: "ch"}
	close(in)
	<-h.done

	<-a.Confirmed()
	require.Equal(t, []bool{true, false}, held(a, b), "the message, by the policy; unsubscribe wakes nobody")
}

// TestShardFeedHandle feeds a shard feed what its connection delivers; no
// connection is opened.
func TestShardFeedHandle(t *testing.T) {
	h := newHub(t, Options{})
	a, b := join(t, h, "{s}ch", permits), join(t, h, "{s}ch", permits)
	f := &shardFeed{h: h}
	c := &shardConn{have: map[string]struct{}{"{s}ch": {}}}
	ctx := context.Background()

	require.Equal(t, keep, f.handle(ctx, c, received{msg: &redis.Subscription{Kind: "ssubscribe", Channel: "{s}ch"}}))
	<-a.Confirmed()
	require.Equal(t, keep, f.handle(ctx, c, received{msg: &redis.Message{Channel: "{s}ch", Payload: "2"}}))
	require.Equal(t, []bool{true, true}, held(a, b))
	require.True(t, take(a))
	require.Equal(t, keep, f.handle(ctx, c, received{msg: &redis.Subscription{Kind: "ssubscribe", Channel: "{s}ch"}}))
	require.Equal(t, []bool{true, true}, held(a, b), "a re-subscription wakes all")

	require.Equal(t, moved, f.handle(ctx, c, received{msg: &redis.Subscription{Kind: "sunsubscribe", Channel: "{s}ch"}}),
		"the server dropped a channel the feed carries: its slot moved")
	require.Equal(t, moved, f.handle(ctx, c, received{err: errors.New("MOVED 1 10.0.0.1:6379")}))
	require.Equal(t, reconnect, f.handle(ctx, c, received{err: errors.New("ERR broken")}))
}
