package observe

import (
	"context"
	"time"
)

// Observer sees every public call of a client's objects.
type Observer interface {
	// Start is called when a public call begins. The context it returns is
	// the call's from then on: its Redis commands run with it, and it is the
	// ctx End receives. Return ctx itself to add nothing.
	Start(ctx context.Context, call Call) context.Context
	// End is called when the call returns, with the ctx Start returned.
	End(ctx context.Context, call Call, res Result)
}

// Call is one public call: what object, which method, and when it began.
type Call struct {
	Kind  Kind      // the object's kind
	Op    Op        // the method
	Name  string    // the object's name (a lock's, a semaphore's...): unbounded, opt-in only
	Start time.Time // when the call began
}

// Result is how a call ended.
type Result struct {
	Outcome Outcome
	// Waited reports whether the call blocked: an acquisition that found the
	// object taken and waited for it (whatever came of the wait), an Await
	// that found the count above zero.
	Waited bool
	// Err is the call's error (nil for OutcomeOK); for OutcomeNotAcquired,
	// OutcomeTimeout and OutcomeCanceled it says why, and is not a failure.
	Err error
}

// HoldObserver sees holds: a lock held by one owner of the client (from its
// first acquisition to the end of its last, reentries included), an
// ExpirableSemaphore's Permits (from acquisition to release or loss). A
// Semaphore's permits are counts without a holder, and are not holds.
type HoldObserver interface {
	// HoldStart is called when a hold begins.
	HoldStart(h Hold)
	// HoldEnd is called once when it ends: h is the value HoldStart got (with
	// Loss set for a lost hold), and err the reason the hold's leases give
	// (nil for HoldReleased). It is called right after the hold's leases
	// have ended: their Done channels are closed already.
	HoldEnd(h Hold, outcome HoldOutcome, err error)
}

// Hold is one hold.
type Hold struct {
	Kind  Kind
	Name  string
	Start time.Time // when the acquisition that began the hold was sent
	// Loss, in HoldEnd of a lost hold (HoldLost), is how the client learnt of
	// the loss; 0 otherwise.
	Loss LossCause
}

// WaitObserver sees calls that block: an acquisition waiting for a lock or
// for permits, an Await waiting for a latch, from when the call starts
// waiting (after its first attempt failed) to when it returns.
type WaitObserver interface {
	// WaitStart is called when a call starts blocking.
	WaitStart(w Wait)
	// Woken is called each time the waiting call looks at Redis again, with
	// what made it look (for a look that follows a short pacing sleep, the
	// event before that sleep).
	Woken(w Wait, cause Cause)
	// WaitEnd is called when it stops blocking, whatever the outcome.
	WaitEnd(w Wait)
}

// Wait is one blocking call.
type Wait struct {
	Kind Kind
	Op   Op
	Name string
}

// RenewObserver sees the watchdog's renewal rounds.
type RenewObserver interface {
	// Renewed is called after a round with the number of holds that had
	// each outcome (only for outcomes with at least one hold).
	Renewed(outcome RenewOutcome, holds int)
}

// RenewHealthObserver, implemented by a RenewObserver that wants it, sees
// the runs of failed renewal rounds (Redis down, unreachable, too slow): each
// failed round, with how much lease the holds have left, and the first round
// that renews again. A hold whose lease runs out meanwhile ends as lost
// (HoldObserver.HoldEnd, LossDeadline). The client's log
// (rlock.WithLogger) says the same, rate-limited.
type RenewHealthObserver interface {
	// RenewFailing is called after each round in which renewals failed.
	RenewFailing(f RenewFailure)
	// RenewRecovered is called after the first round in which every
	// renewal reached Redis, after failed ones.
	RenewRecovered(r RenewRecovery)
}

// RenewFailure is one failed renewal round: the holds it failed to renew
// and the one of them whose lease runs out first.
type RenewFailure struct {
	Kind      Kind          // the kind of the hold whose lease runs out first
	Name      string        // its object's name: unbounded, opt-in only
	LeaseLeft time.Duration // how long it keeps its lease, as last confirmed
	Holds     int           // how many holds the round failed to renew
	Rounds    int           // failed rounds in a row, this one included
	FailedFor time.Duration // since the first of them was sent
	Err       error         // the round's error (the first, if its batches failed differently)
}

// RenewRecovery is the first round that renewed again after failed ones.
type RenewRecovery struct {
	Rounds    int           // the failed rounds before it
	FailedFor time.Duration // from the send of the first failed round to this one's end
	Holds     int           // the holds it renewed
}

// TrackingObserver sees in which mode the client watches its holds' keys on
// each Redis node: told at once of a change (client tracking), or only at
// the next renewal.
type TrackingObserver interface {
	// Tracking is called when a node's mode is first known and whenever it
	// changes; node is the server's address ("" for every node, with
	// TrackingOff).
	Tracking(node string, mode TrackingMode)
}

// PubSubObserver sees the client's pub/sub connections.
type PubSubObserver interface {
	// Subscriptions is called with +1 when the client subscribes to a
	// channel (shared by all its waiters on it) and -1 when it drops one.
	Subscriptions(delta int)
	// Reconnected is called when a subscriber connection was re-established
	// and its channels subscribed again: messages may have been lost.
	Reconnected()
}

// ElectionObserver sees the changes of leader that an Election's Observe
// delivers to its receiver in this client: each delivery after the first
// (which is the state Observe began with). Leadership terms themselves are
// holds of KindElection (HoldObserver): their durations and losses are there.
type ElectionObserver interface {
	// LeaderChanged is called on the goroutine of Observe, right after the
	// receiver took the change; it must not block.
	LeaderChanged(c LeaderChange)
}

// LeaderChange is one change of an election's leader, as a follower saw it.
type LeaderChange struct {
	Name    string // the election's name: unbounded, opt-in only
	Elected bool   // a leader now leads (false: no leader)
	Token   int64  // the term's fencing token (without a leader, the latest term's)
	// NewTerm reports a change of term (or of holder); false for a new value
	// in the same term (Proclaim) or a change to no leader.
	NewTerm bool
}
