package pubsub

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/observe"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Subscribe after the hub was closed.
var ErrClosed = errors.New("pubsub: hub closed")

// WakePolicy is a subscriber's rule for its channel's messages: how many
// subscriptions of this hub on the channel a message with this payload wakes.
// All wakes every one; n <= 0 wakes none and banks nothing. The hub reads no
// payload itself: what a payload means is the subscriber's business (a lock
// wakes one waiter per release, a read/write lock's write release wakes all).
//
// The hub calls the policy once per message, on its dispatcher goroutine and
// with its lock held: it must be quick, must not block and must not call the
// hub.
type WakePolicy func(payload string) int

// All is what a WakePolicy returns for a message that wakes every subscription
// of the channel.
const All = math.MaxInt

// errNoPolicy is returned by Subscribe and SSubscribe given a nil WakePolicy.
var errNoPolicy = errors.New("pubsub: nil wake policy")

// DefaultLinger is how long a channel stays subscribed after its last subscription
// was closed, when Options.Linger is zero.
const DefaultLinger = time.Second

// Options configure a Hub.
type Options struct {
	// Linger is how long an unused channel stays subscribed, so that waiters that
	// come and go on the same lock reuse the subscription. Default: DefaultLinger.
	Linger time.Duration
	// Observer, if set, sees channels subscribed and dropped, and
	// reconnections. The hub calls it without its lock held.
	Observer observe.PubSubObserver
}

// Wake is what a token says woke its subscription.
type Wake uint8

// The kinds of wake-ups.
const (
	WakeMessage      Wake = iota + 1 // a message on the channel
	WakeResubscribed                 // the channel was subscribed again after a reconnect: messages may have been lost
	WakeChanged                      // news of the channel's object that came otherwise (Changed)
)

// Hub multiplexes the channel subscriptions of one client: classic channels
// (Subscribe) over one subscriber connection, shard channels of a Redis Cluster
// (SSubscribe) over one connection per shard. It is safe for concurrent use.
// Close stops its goroutines.
type Hub struct {
	rdb    redis.UniversalClient
	linger time.Duration
	obs    observe.PubSubObserver
	ctx    context.Context // ends the shard feeds; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	ps      *redis.PubSub // classic channels; opened by the first Subscribe
	shards  map[string]*shardFeed
	entries map[string]*entry
	closed  bool
	sweep   chan struct{}  // pokes the sweeper when an entry becomes idle
	done    chan struct{}  // closed when the classic dispatcher has returned
	running sync.WaitGroup // the sweeper and the shard feeds
	swept   bool           // the sweeper has been started
	// epoch counts the reconnections of the classic connection: a channel
	// confirmed again in the epoch it was last confirmed in starts a new one.
	epoch int
}

// entry is one subscribed channel and the subscriptions that share it.
type entry struct {
	channel   string
	subs      []*Subscription
	confirmed chan struct{} // closed when Redis confirmed the SUBSCRIBE
	isConfirm bool
	permits   int        // banked wake-ups, at most len(subs)
	idleSince time.Time  // when the last subscription closed; zero while in use
	shard     *shardFeed // the feed of a shard channel; nil for a classic one
	epoch     int        // the hub's epoch when a classic channel was last confirmed
	// lastMessage is when the last message of the channel came (Changed).
	lastMessage time.Time
}

// New returns a hub that subscribes through rdb. It opens no connection until the
// first Subscribe.
func New(rdb redis.UniversalClient, opts Options) *Hub {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{
		rdb:     rdb,
		linger:  opts.Linger,
		obs:     opts.Observer,
		ctx:     ctx,
		cancel:  cancel,
		shards:  make(map[string]*shardFeed),
		entries: make(map[string]*entry),
		sweep:   make(chan struct{}, 1),
	}
}

// Subscription is one waiter's share of a channel subscription. Its methods are
// safe for concurrent use; Close must be called when the waiter leaves.
type Subscription struct {
	h      *Hub
	e      *entry
	wake   WakePolicy
	heard  func(payload string) // Heard's, or nil
	token  chan Wake            // one wake-up, buffered
	closed bool
}

// A SubscribeOption configures one subscription (Subscribe, SSubscribe).
type SubscribeOption func(*Subscription)

// Heard makes the subscription tell f the payload of every message of its
// channel, from the moment it joins until it closes, whomever the message
// wakes: a subscriber that must know what was said, not only that it was woken,
// counts the payloads it cares about (a latch's awaiter tells an opening from a
// delete). The hub calls f on its dispatcher goroutine with its lock held: f
// must be quick, must not block and must not call the hub.
func Heard(f func(payload string)) SubscribeOption {
	return func(s *Subscription) { s.heard = f }
}

// Subscribe joins the subscription of channel, sending SUBSCRIBE if this client
// is not subscribed yet. It does not wait for the server's confirmation: select
// on Confirmed for that. If the SUBSCRIBE cannot be sent now, go-redis sends it
// again when it reconnects, and Confirmed closes then.
//
// wake (not nil) says how many subscriptions of channel a message wakes. The
// subscriptions of one channel are meant to share one policy, since a channel
// carries one kind of object's messages. If they do not, a message follows the
// policy of the channel's oldest open subscription (the first to join among
// those still open), whatever the others were given; when that one closes, the
// next oldest's policy applies. A re-subscription after a reconnect wakes every
// subscription, whatever the policy.
func (h *Hub) Subscribe(ctx context.Context, channel string, wake WakePolicy, opts ...SubscribeOption) (*Subscription, error) {
	return h.subscribe(ctx, channel, "", wake, opts)
}

// SSubscribe joins the subscription of the shard channel channel (Redis 7+ on a
// Cluster, whose client rdb must be): SSUBSCRIBE on the connection to the shard
// that owns channel's slot, shared by every shard channel of that shard. It
// returns an error only when the cluster's layout cannot be read; otherwise, as
// Subscribe, it does not wait, and the shard's feed keeps subscribing until
// Confirmed closes. wake is as for Subscribe.
func (h *Hub) SSubscribe(ctx context.Context, channel string, wake WakePolicy, opts ...SubscribeOption) (*Subscription, error) {
	if wake == nil {
		return nil, errNoPolicy
	}
	cc, ok := h.rdb.(*redis.ClusterClient)
	if !ok {
		return nil, errors.New("pubsub: shard channels need a *redis.ClusterClient")
	}
	m, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return nil, err
	}
	return h.subscribe(ctx, channel, m.Options().Addr, wake, opts)
}

// subscribe joins channel: a classic channel when shard is "", else a shard
// channel of the shard whose primary is at shard.
func (h *Hub) subscribe(ctx context.Context, channel, shard string, wake WakePolicy, opts []SubscribeOption) (*Subscription, error) {
	h.mu.Lock()
	s, fresh, err := h.join(channel, wake, opts)
	if err != nil {
		h.mu.Unlock()
		return nil, err
	}
	h.startSweeper()
	var ps *redis.PubSub
	switch {
	case !fresh:
	case shard != "":
		h.carry(s.e, shard)
	default:
		ps = h.classic(ctx)
	}
	h.mu.Unlock()
	if fresh {
		h.subscriptions(+1)
	}

	if ps != nil {
		// An error here means the connection is broken; go-redis has recorded the
		// channel and re-subscribes it when it reconnects, which confirms it.
		_ = ps.Subscribe(ctx, channel)
	}
	return s, nil
}

// join adds a subscription with the policy wake to channel's entry, making the
// entry (fresh) if the hub has none: the bookkeeping of a subscribe, without
// the connection. h.mu must be held.
func (h *Hub) join(channel string, wake WakePolicy, opts []SubscribeOption) (s *Subscription, fresh bool, err error) {
	switch {
	case wake == nil:
		return nil, false, errNoPolicy
	case h.closed:
		return nil, false, ErrClosed
	}
	e, ok := h.entries[channel]
	if !ok {
		e = &entry{channel: channel, confirmed: make(chan struct{})}
		h.entries[channel] = e
	}
	s = &Subscription{h: h, e: e, wake: wake, token: make(chan Wake, 1)}
	for _, f := range opts {
		f(s)
	}
	e.subs = append(e.subs, s)
	e.idleSince = time.Time{}
	return s, !ok, nil
}

// classic returns the classic subscriber connection, opening it and starting
// its dispatcher. h.mu must be held.
func (h *Hub) classic(ctx context.Context) *redis.PubSub {
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
		h.done = make(chan struct{})
		go h.dispatch(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	}
	return h.ps
}

// carry gives e's channel to the feed of shard, starting the feed. h.mu must be
// held.
func (h *Hub) carry(e *entry, shard string) {
	f := h.shards[shard]
	if f == nil {
		f = &shardFeed{h: h, key: shard, want: map[string]struct{}{}, poke: make(chan struct{}, 1),
			rdb: h.rdb.(*redis.ClusterClient)}
		h.shards[shard] = f
		h.running.Add(1)
		go func() {
			defer h.running.Done()
			f.run(h.ctx)
		}()
	}
	f.want[e.channel] = struct{}{}
	e.shard = f
	f.wake()
}

// startSweeper starts the goroutine that unsubscribes idle channels, once. h.mu
// must be held.
func (h *Hub) startSweeper() {
	if h.swept {
		return
	}
	h.swept = true
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		h.sweeper()
	}()
}

// Confirmed is closed once Redis has confirmed the subscription: a message
// published after that reaches this client.
func (s *Subscription) Confirmed() <-chan struct{} { return s.e.confirmed }

// Ready returns the channel on which this subscription receives its wake-up
// token, which says what woke it. Call it each time before waiting: it first
// moves a banked token (a message's), if any, into the channel. Receiving from
// the channel consumes the token.
func (s *Subscription) Ready() <-chan Wake {
	s.h.mu.Lock()
	if s.e.permits > 0 && len(s.token) == 0 && !s.closed {
		s.e.permits--
		s.token <- WakeMessage
	}
	s.h.mu.Unlock()
	return s.token
}

// Close leaves the subscription. A token the waiter did not consume goes back to
// the channel's bank for the other subscriptions. When no subscription is left the
// channel is unsubscribed after the hub's linger time. Close is idempotent.
func (s *Subscription) Close() {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	e := s.e
	for i, x := range e.subs {
		if x == s {
			e.subs = append(e.subs[:i], e.subs[i+1:]...)
			break
		}
	}
	select {
	case <-s.token:
		e.permits++
	default:
	}
	if e.permits > len(e.subs) {
		e.permits = len(e.subs)
	}
	if len(e.subs) == 0 {
		e.idleSince = time.Now()
		select {
		case h.sweep <- struct{}{}:
		default:
		}
	}
}

// Channels returns the channels the hub is subscribed to or about to be,
// including lingering ones. For tests and diagnostics.
func (h *Hub) Channels() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.entries))
	for ch := range h.entries {
		out = append(out, ch)
	}
	return out
}

// Close unsubscribes everything, closes the subscriber connections and waits for
// the hub's goroutines to return. Open subscriptions get no more wake-ups.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps, done := h.ps, h.done
	dropped := len(h.entries)
	h.mu.Unlock()
	h.subscriptions(-dropped)
	h.cancel()
	h.running.Wait()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// dispatch is the classic connection's goroutine: it moves tokens for messages
// and (re)subscriptions.
func (h *Hub) dispatch(in <-chan any) {
	defer close(h.done)
	for m := range in {
		switch m := m.(type) {
		case *redis.Message:
			h.message(m)
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.subscribed(m.Channel)
			}
		}
	}
}

// sweeper is the hub's goroutine that unsubscribes the channels idle for longer
// than the linger time, until Close.
func (h *Hub) sweeper() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.sweep:
		case <-timer.C:
		}
		if d, ok := h.unsubscribeIdle(); ok {
			timer.Reset(d)
		}
	}
}

// message delivers a message of a classic or shard channel.
func (h *Hub) message(m *redis.Message) { h.deliver(m.Channel, m.Payload) }

// deliver hands out the wake-ups of a message with payload on channel, as many
// as the policy of the channel's oldest subscription says. A channel the hub
// does not know, or one without subscriptions, gets nothing.
func (h *Hub) deliver(channel, payload string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[channel]
	if e == nil || len(e.subs) == 0 {
		return
	}
	e.lastMessage = time.Now()
	for _, s := range e.subs {
		if s.heard != nil {
			s.heard(payload)
		}
	}
	e.wake(e.subs[0].wake(payload), WakeMessage)
}

// Changed gives every subscription of channel a token (WakeChanged), as a
// message that wakes all would, for news of the channel's object that came
// otherwise than on the channel at at: rlock's tracker heard that the
// object's key changed (an operator's DEL, a flush). A message on the channel
// since at (less ChangedSlack) was that change's own announcement, which woke
// its waiters already: Changed then does nothing. Heard callbacks hear
// nothing. A channel without subscriptions gets nothing.
func (h *Hub) Changed(channel string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.entries[channel]; e != nil && e.lastMessage.Before(at.Add(-ChangedSlack)) {
		e.wake(All, WakeChanged)
	}
}

// ChangedSlack is how long before the news Changed is told of a message on
// the channel counts as that news's announcement: a release's message and the
// server's news of its change leave the server together, on two connections.
const ChangedSlack = 5 * time.Millisecond

// wake gives a token saying why to each of the first n subscriptions of e
// (oldest first) that have room, and banks what is left of n for the next
// Ready, at most one token per subscription in all. n == All gives one to every
// subscription with room and banks nothing (every subscription then holds a
// token); n <= 0 does nothing. h.mu must be held.
func (e *entry) wake(n int, why Wake) {
	all := n == All
	for _, s := range e.subs {
		if n <= 0 {
			return
		}
		select {
		case s.token <- why:
			if !all {
				n--
			}
		default:
		}
	}
	if !all && n > 0 {
		e.permits += min(n, max(len(e.subs)-e.permits, 0))
	}
}

// subscribed handles a subscription confirmation: the first one confirms the
// entry; a later one means go-redis reconnected and re-subscribed, so messages
// may have been lost and every subscription is woken.
func (h *Hub) subscribed(channel string) {
	h.mu.Lock()
	e := h.entries[channel]
	reconnected := false
	switch {
	case e == nil:
	case !e.isConfirm:
		e.isConfirm = true
		e.epoch = h.epoch
		close(e.confirmed)
	default:
		e.wake(All, WakeResubscribed)
		reconnected = h.reconfirmed(e)
	}
	h.mu.Unlock()
	if reconnected && h.obs != nil {
		h.obs.Reconnected()
	}
}

// reconfirmed records that the classic channel of e was confirmed again, and
// reports whether that reveals a reconnection of the classic connection: the
// first of its channels confirmed again after it (a shard feed reports its
// own). h.mu must be held.
func (h *Hub) reconfirmed(e *entry) bool {
	if e.shard != nil {
		return false
	}
	fresh := e.epoch == h.epoch
	if fresh {
		h.epoch++
	}
	e.epoch = h.epoch
	return fresh
}

// subscriptions tells the observer, if any, of delta channels subscribed
// (dropped, when negative). h.mu must not be held.
func (h *Hub) subscriptions(delta int) {
	if h.obs != nil && delta != 0 {
		h.obs.Subscriptions(delta)
	}
}

// unsubscribeIdle unsubscribes the channels idle for longer than the linger time
// and returns when to look again, if any channel is still idle.
func (h *Hub) unsubscribeIdle() (time.Duration, bool) {
	now := time.Now()
	var drop []string
	dropped := 0
	next := time.Duration(-1)
	h.mu.Lock()
	for ch, e := range h.entries {
		if len(e.subs) > 0 || e.idleSince.IsZero() {
			continue
		}
		if left := h.linger - now.Sub(e.idleSince); left > 0 {
			if next < 0 || left < next {
				next = left
			}
			continue
		}
		delete(h.entries, ch)
		dropped++
		if e.shard != nil {
			delete(e.shard.want, ch)
			e.shard.wake()
			continue
		}
		drop = append(drop, ch)
	}
	ps := h.ps
	h.mu.Unlock()
	h.subscriptions(-dropped)
	if len(drop) > 0 && ps != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ps.Unsubscribe(ctx, drop...)
		cancel()
	}
	return next, next >= 0
}
