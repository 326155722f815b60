package watchdog

import (
	"time"

	"github.com/holdfast-go/holdfast/observe"
)

// Label names a hold in the watchdog's log lines and in what its observer
// hears of failed rounds: the kind and the name of the object it is a hold
// of. A hold watched without one (Watch) is named by its key.
type Label struct {
	Kind observe.Kind
	Name string
}

// health follows the runs of failed renewal rounds, on the watchdog's
// goroutine only: a round that failed to renew some holds (Redis down,
// unreachable, or slower than the round's timeout) starts or goes on with a
// run; the first round whose every batch reached Redis ends it.
type health struct {
	since  time.Time // when the run's first failed round was sent; zero while renewals succeed
	rounds int       // failed rounds in the run
	logged time.Time // when the run's last warning was logged
}

// failure is what a failed round says: the hold of its failed batches whose
// lease runs out first (nil if all of them ended meanwhile), its deadline,
// how many holds the round failed to renew, and the round's first error.
type failure struct {
	first *Hold
	due   time.Time
	holds int
	err   error
}

// noted records that the hold h failed to renew in a round with err, and
// keeps it if its lease runs out first. w.mu is held.
func (f *failure) noted(h *Hold, err error) {
	f.holds++
	if f.err == nil {
		f.err = err
	}
	if h.index < 0 || !h.renew {
		return // stopped or changed while the round was in flight
	}
	h.failErr = err
	if f.first == nil || h.due.Before(f.due) {
		f.first, f.due = h, h.due
	}
}

// leaseLeftRound is the precision of the lease left in log lines.
const leaseLeftRound = 100 * time.Millisecond

// report tells the logger and the observer how a round sent at sent went:
// failed (f.holds > 0) or renewing (renewed holds, f empty). A failed round
// is told to the observer each time and logged at most once per half
// Interval (a run of rounds sooner than Interval apart, after a Cluster's
// MOVED, logs one line); the first round that renews after failed ones is
// told once. Nothing is said on the happy path, nor after Close.
func (w *Watchdog) report(f failure, renewed int, sent time.Time) {
	if w.ctx.Err() != nil {
		return // Close cancelled the round: no news
	}
	hs := &w.health
	obs, _ := w.opts.Observer.(observe.RenewHealthObserver)
	now := time.Now()
	if f.holds == 0 {
		if hs.since.IsZero() || renewed == 0 {
			return
		}
		r := observe.RenewRecovery{Rounds: hs.rounds, FailedFor: now.Sub(hs.since), Holds: renewed}
		*hs = health{}
		if w.opts.Logger != nil {
			w.opts.Logger.Info(observe.EventRenewal, observe.AttrOutcome, observe.RenewOK.String(),
				"recovered", true, observe.AttrHolds, r.Holds, observe.AttrFailedRounds, r.Rounds,
				observe.AttrFailedFor, r.FailedFor.Round(time.Millisecond))
		}
		if obs != nil {
			obs.RenewRecovered(r)
		}
		return
	}
	if hs.since.IsZero() {
		hs.since = sent
	}
	hs.rounds++
	rf := observe.RenewFailure{Holds: f.holds, Rounds: hs.rounds, FailedFor: now.Sub(hs.since), Err: f.err}
	if h := f.first; h != nil {
		rf.Kind, rf.Name, rf.LeaseLeft = h.Label.Kind, h.name(), max(f.due.Sub(now), 0)
	}
	w.logFailure(f.first != nil, rf, now)
	if obs != nil {
		obs.RenewFailing(rf)
	}
}

// logFailure logs the failed round rf (named: its hold is known), at most once per
// half Interval.
func (w *Watchdog) logFailure(named bool, rf observe.RenewFailure, now time.Time) {
	hs := &w.health
	if w.opts.Logger == nil || (!hs.logged.IsZero() && now.Sub(hs.logged) < w.opts.Interval/2) {
		return
	}
	hs.logged = now
	args := []any{observe.AttrOutcome, observe.RenewFailed.String()}
	if named {
		args = append(args, observe.AttrKind, rf.Kind.String(), observe.AttrName, rf.Name,
			observe.AttrLeaseLeft, rf.LeaseLeft.Round(leaseLeftRound))
	}
	args = append(args, observe.AttrHolds, rf.Holds, observe.AttrFailedRounds, rf.Rounds,
		observe.AttrFailedFor, rf.FailedFor.Round(time.Millisecond), "error", rf.Err)
	w.opts.Logger.Warn(observe.EventRenewal, args...)
}

// calm ends the run of failures without a word when no hold is left to
// renew: the holds it failed to renew ended (their losses are told as such).
func (w *Watchdog) calm() {
	w.health = health{}
}

// name is the hold's name in logs: its label's, else its key.
func (h *Hold) name() string {
	if h.Label.Name != "" {
		return h.Label.Name
	}
	return h.Key
}

// notRenewed is ErrNotRenewed for a hold whose last renewal failed, with
// that renewal's error in its text (not wrapped: a loss is not a timeout).
type notRenewed struct{ last error }

func (e notRenewed) Error() string {
	return ErrNotRenewed.Error() + " (its last renewal failed: " + e.last.Error() + ")"
}

func (e notRenewed) Is(target error) bool { return target == ErrNotRenewed }
