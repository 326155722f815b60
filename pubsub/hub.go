package pubsub

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is returned by Subscribe after the hub was closed.
var ErrClosed = errors.New("pubsub: hub closed")

// DefaultLinger is how long a channel stays subscribed after its last subscription
// was closed, when Options.Linger is zero.
const DefaultLinger = time.Second

// Options configure a Hub.
type Options struct {
	// Linger is how long an unused channel stays subscribed, so that waiters that
	// come and go on the same lock reuse the subscription. Default: DefaultLinger.
	Linger time.Duration
}

// Hub multiplexes the channel subscriptions of one client over one subscriber
// connection. It is safe for concurrent use. Close stops its goroutine.
type Hub struct {
	rdb    redis.UniversalClient
	linger time.Duration

	mu      sync.Mutex
	ps      *redis.PubSub // opened by the first Subscribe
	entries map[string]*entry
	closed  bool
	sweep   chan struct{} // pokes the dispatcher when an entry becomes idle
	done    chan struct{} // closed when the dispatcher has returned
}

// entry is one subscribed channel and the subscriptions that share it.
type entry struct {
	channel   string
	subs      []*Subscription
	confirmed chan struct{} // closed when Redis confirmed the SUBSCRIBE
	isConfirm bool
	permits   int       // banked wake-ups, at most len(subs)
	idleSince time.Time // when the last subscription closed; zero while in use
}

// New returns a hub that subscribes through rdb. It opens no connection until the
// first Subscribe.
func New(rdb redis.UniversalClient, opts Options) *Hub {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	return &Hub{
		rdb:     rdb,
		linger:  opts.Linger,
		entries: make(map[string]*entry),
		sweep:   make(chan struct{}, 1),
	}
}

// Subscription is one waiter's share of a channel subscription. Its methods are
// safe for concurrent use; Close must be called when the waiter leaves.
type Subscription struct {
	h      *Hub
	e      *entry
	token  chan struct{} // one wake-up, buffered
	closed bool
}

// Subscribe joins the subscription of channel, sending SUBSCRIBE if this client
// is not subscribed yet. It does not wait for the server's confirmation: select
// on Confirmed for that. If the SUBSCRIBE cannot be sent now, go-redis sends it
// again when it reconnects, and Confirmed closes then.
func (h *Hub) Subscribe(ctx context.Context, channel string) (*Subscription, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
		h.done = make(chan struct{})
		go h.dispatch(h.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	}
	e, ok := h.entries[channel]
	if !ok {
		e = &entry{channel: channel, confirmed: make(chan struct{})}
		h.entries[channel] = e
	}
	s := &Subscription{h: h, e: e, token: make(chan struct{}, 1)}
	e.subs = append(e.subs, s)
	e.idleSince = time.Time{}
	ps := h.ps
	h.mu.Unlock()

	if !ok {
		// An error here means the connection is broken; go-redis has recorded the
		// channel and re-subscribes it when it reconnects, which confirms it.
		_ = ps.Subscribe(ctx, channel)
	}
	return s, nil
}

// Confirmed is closed once Redis has confirmed the subscription: a message
// published after that reaches this client.
func (s *Subscription) Confirmed() <-chan struct{} { return s.e.confirmed }

// Ready returns the channel on which this subscription receives its wake-up
// token. Call it each time before waiting: it first moves a banked token, if any,
// into the channel. Receiving from the channel consumes the token.
func (s *Subscription) Ready() <-chan struct{} {
	s.h.mu.Lock()
	if s.e.permits > 0 && len(s.token) == 0 && !s.closed {
		s.e.permits--
		s.token <- struct{}{}
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

// Close unsubscribes everything, closes the subscriber connection and waits for
// the hub's goroutine to return. Open subscriptions get no more wake-ups.
func (h *Hub) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	ps, done := h.ps, h.done
	h.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// dispatch is the hub's goroutine: it moves tokens for messages and
// (re)subscriptions and unsubscribes idle channels.
func (h *Hub) dispatch(in <-chan any) {
	defer close(h.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case m, ok := <-in:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Message:
				h.deliver(m.Channel, m.Payload == "1")
			case *redis.Subscription:
				if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
					h.subscribed(m.Channel)
				}
			}
		case <-h.sweep:
			if d, ok := h.unsubscribeIdle(); ok {
				timer.Reset(d)
			}
		case <-timer.C:
			if d, ok := h.unsubscribeIdle(); ok {
				timer.Reset(d)
			}
		}
	}
}

// deliver gives a token to the first subscription of channel that has room, or to
// all of them when all is set; a token that finds no room is banked.
func (h *Hub) deliver(channel string, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[channel]
	if e == nil {
		return
	}
	for _, s := range e.subs {
		select {
		case s.token <- struct{}{}:
			if !all {
				return
			}
		default:
		}
	}
	if !all && e.permits < len(e.subs) {
		e.permits++
	}
}

// subscribed handles a subscription confirmation: the first one confirms the
// entry; a later one means go-redis reconnected and re-subscribed, so messages
// may have been lost and every subscription is woken.
func (h *Hub) subscribed(channel string) {
	h.mu.Lock()
	e := h.entries[channel]
	if e != nil && !e.isConfirm {
		e.isConfirm = true
		close(e.confirmed)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	if e != nil {
		h.deliver(channel, true)
	}
}

// unsubscribeIdle unsubscribes the channels idle for longer than the linger time
// and returns when to look again, if any channel is still idle.
func (h *Hub) unsubscribeIdle() (time.Duration, bool) {
	now := time.Now()
	var drop []string
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
		drop = append(drop, ch)
	}
	ps := h.ps
	h.mu.Unlock()
	if len(drop) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ps.Unsubscribe(ctx, drop...)
		cancel()
	}
	return next, next >= 0
}
