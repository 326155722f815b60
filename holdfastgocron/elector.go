package holdfastgocron

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/holdfast-go/holdfast/rlock"
)

// DefaultRetryInterval is how long an Elector waits after a Campaign that
// failed (Redis unreachable...) before it campaigns again, unless
// WithRetryInterval sets another.
const DefaultRetryInterval = time.Second

// Elector is a gocron.Elector on an rlock.Election: it campaigns in the
// background from NewElector until Close, campaigning again whenever a term
// ends, and IsLeader says, without a round trip, whether it leads now.
// An Elector is safe for concurrent use.
type Elector struct {
	e       *rlock.Election
	value   string
	retry   time.Duration
	onError func(error)

	lead   atomic.Pointer[rlock.Leadership]
	cancel context.CancelFunc
	done   chan struct{}
	resign error // set by the campaign loop before done closes
}

var _ gocron.Elector = (*Elector)(nil)

// ElectorOption configures an Elector.
type ElectorOption func(*Elector)

// WithRetryInterval sets how long the Elector waits after a failed Campaign
// before the next one (default DefaultRetryInterval).
func WithRetryInterval(d time.Duration) ElectorOption {
	return func(el *Elector) {
		if d > 0 {
			el.retry = d
		}
	}
}

// WithErrorHandler sets a function called with each error of a Campaign
// (from the campaign goroutine), before the Elector retries. None by default.
func WithErrorHandler(f func(error)) ElectorOption {
	return func(el *Elector) { el.onError = f }
}

// NewElector returns an Elector on e that campaigns at once, in a goroutine of
// its own, with value as the leader's value (what Election.Leader and Observe
// report: a host name, a process id). Close stops it.
//
// The campaign stops by itself when the election's rlock.Client is closed.
func NewElector(e *rlock.Election, value string, opts ...ElectorOption) *Elector {
	el := &Elector{e: e, value: value, retry: DefaultRetryInterval, done: make(chan struct{})}
	for _, o := range opts {
		o(el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	el.cancel = cancel
	go el.run(ctx)
	return el
}

// IsLeader returns nil while this instance leads the election, and an error
// matching rlock.ErrNotLeader otherwise (wrapping the reason the last term
// ended, when one did). It makes no round trip: it reads the current term's
// rlock.Leadership.Err, which is never nil past the term's lease deadline, so
// a leader cut off from Redis stops running jobs by that deadline, before
// another instance can be elected. ctx is not used.
func (el *Elector) IsLeader(context.Context) error {
	lead := el.lead.Load()
	if lead == nil {
		return fmt.Errorf("holdfastgocron: %s: %w", el.e.Name(), rlock.ErrNotLeader)
	}
	if err := lead.Err(); err != nil {
		return fmt.Errorf("holdfastgocron: %s: %w: %w", el.e.Name(), rlock.ErrNotLeader, err)
	}
	return nil
}

// Leadership returns the current term, or nil while the Elector does not
// lead. A job can hand its Token (a fencing token) to what it writes; the
// term may end at any time: check its Err before each act.
func (el *Elector) Leadership() *rlock.Leadership {
	lead := el.lead.Load()
	if lead == nil || lead.Err() != nil {
		return nil
	}
	return lead
}

// Close stops campaigning and resigns the current term, if any, so that
// another instance leads at once. It waits for the campaign goroutine until
// ctx ends, and returns the resignation's error (a term already ended is not
// one). Calling it again returns the same.
func (el *Elector) Close(ctx context.Context) error {
	el.cancel()
	select {
	case <-el.done:
		return el.resign
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run campaigns until ctx ends or the client is closed.
func (el *Elector) run(ctx context.Context) {
	defer close(el.done)
	for {
		lead, err := el.e.Campaign(ctx, el.value)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, rlock.ErrClosed) {
				return
			}
			if el.onError != nil {
				el.onError(err)
			}
			t := time.NewTimer(el.retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		el.lead.Store(lead)
		select {
		case <-lead.Done():
			el.lead.CompareAndSwap(lead, nil)
		case <-ctx.Done():
			el.lead.Store(nil)
			if err := lead.Resign(context.Background()); err != nil && !errors.Is(err, rlock.ErrNotLeader) {
				el.resign = err
			}
			return
		}
	}
}
