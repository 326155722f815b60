package holdfastasynq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/rlock"
)

// DefaultCampaignRetry is how long RunScheduler waits after a failed campaign
// (Redis unreachable, say) before it campaigns again, when
// WithCampaignRetry is not given.
const DefaultCampaignRetry = time.Second

// RunOption configures RunScheduler.
type RunOption func(*runOptions)

type runOptions struct {
	value  string
	retry  time.Duration
	logger *slog.Logger
}

// WithValue sets the value RunScheduler proclaims as the leader's (what
// Election.Leader and `holdfast status` show). The default is
// "<hostname>:<pid>".
func WithValue(v string) RunOption { return func(o *runOptions) { o.value = v } }

// WithCampaignRetry sets the pause after a failed campaign before the next
// (DefaultCampaignRetry by default; a non-positive d keeps the default).
func WithCampaignRetry(d time.Duration) RunOption {
	return func(o *runOptions) {
		if d > 0 {
			o.retry = d
		}
	}
}

// WithRunLogger sets the logger of RunScheduler's failed campaigns and
// resignations (slog.Default by default; nil for none).
func WithRunLogger(l *slog.Logger) RunOption { return func(o *runOptions) { o.logger = l } }

// RunScheduler runs an asynq Scheduler only while this process leads the
// election e, until ctx ends. In a loop it campaigns (Election.Campaign, which
// waits while another candidate leads), calls newScheduler with the new
// Leadership, starts the Scheduler it returns, and waits until the leadership
// ends (resigned, lost, the rlock Client closed) or ctx ends. It then shuts the
// Scheduler down (asynq's Shutdown: the enqueue under way, if any, finishes)
// and only then resigns, so that the next leader's Scheduler starts after this
// one stopped; after a loss the next leader may start while this one is
// shutting down (see docs/asynq.md). A Scheduler cannot be started twice,
// so newScheduler is called once per term and must return a new one, with
// its periodic tasks registered; RunScheduler never calls its Run (which waits
// for signals).
//
// A failed campaign is logged and retried after WithCampaignRetry. RunScheduler
// returns nil when ctx ends, and an error when newScheduler or the Scheduler's
// Start fails (after resigning).
func RunScheduler(ctx context.Context, e *rlock.Election, newScheduler func(*rlock.Leadership) (*asynq.Scheduler, error), opts ...RunOption) error {
	o := runOptions{retry: DefaultCampaignRetry, logger: slog.Default()}
	if host, err := os.Hostname(); err == nil {
		o.value = fmt.Sprintf("%s:%d", host, os.Getpid())
	} else {
		o.value = fmt.Sprintf("pid %d", os.Getpid())
	}
	for _, opt := range opts {
		opt(&o)
	}
	for ctx.Err() == nil {
		lead, err := e.Campaign(ctx, o.value)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if o.logger != nil {
				o.logger.Warn("holdfastasynq: campaign failed", "election", e.Name(), "err", err, "retry", o.retry)
			}
			t := time.NewTimer(o.retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		if err := lead1(ctx, lead, newScheduler); err != nil {
			resign(lead, o.logger)
			return err
		}
		resign(lead, o.logger)
	}
	return nil
}

// lead1 runs one term: a new Scheduler from its start to the end of the
// leadership or of ctx.
func lead1(ctx context.Context, lead *rlock.Leadership, newScheduler func(*rlock.Leadership) (*asynq.Scheduler, error)) error {
	s, err := newScheduler(lead)
	if err != nil {
		return fmt.Errorf("holdfastasynq: new scheduler: %w", err)
	}
	if s == nil {
		return errors.New("holdfastasynq: new scheduler: nil Scheduler")
	}
	if err := s.Start(); err != nil {
		return fmt.Errorf("holdfastasynq: start scheduler: %w", err)
	}
	select {
	case <-lead.Done():
	case <-ctx.Done():
	}
	s.Shutdown()
	return nil
}

// resign gives the leadership back, unless it has ended already.
func resign(lead *rlock.Leadership, logger *slog.Logger) {
	err := lead.Resign(context.Background())
	if err != nil && !errors.Is(err, rlock.ErrNotLeader) && logger != nil {
		logger.Warn("holdfastasynq: resign failed", "election", lead.Name(), "err", err)
	}
}
