package observe

// Outcome is how a public call ended. Only OutcomeError is a failure: an
// acquisition that found the object taken, or whose wait ran out, ended as
// its caller allowed.
type Outcome uint8

// The outcomes of a call. Their String is the value of AttrOutcome.
const (
	OutcomeOK          Outcome = iota + 1 // the call did what it was asked: "ok"
	OutcomeNotAcquired                    // an acquisition found the object taken (TryLock without a wait time): "not_acquired"
	OutcomeTimeout                        // a wait ran out (WithWaitTime, a ctx deadline): "timeout"
	OutcomeCanceled                       // ctx was cancelled, or the client closed: "canceled"
	OutcomeError                          // anything else: "error"
)

var outcomes = [...]string{"unknown", "ok", "not_acquired", "timeout", "canceled", "error"}

// String returns the outcome's attribute value.
func (o Outcome) String() string { return enumString(outcomes[:], int(o)) }

// HoldOutcome is how a hold ended.
type HoldOutcome uint8

// The outcomes of a hold. Their String is the value of AttrOutcome on hold
// events.
const (
	HoldReleased      HoldOutcome = iota + 1 // given back by its holder: "released"
	HoldLost                                 // found gone from Redis, or not renewed in time: "lost"
	HoldExpired                              // its fixed lease ran out: "expired"
	HoldForceReleased                        // force-unlocked by this client: "force_released"
	HoldClosed                               // given back by the client's Close: "closed"
	HoldUnconfirmed                          // its release was sent but not confirmed; it expires unrenewed: "unconfirmed"
)

var holdOutcomes = [...]string{"unknown", "released", "lost", "expired", "force_released", "closed", "unconfirmed"}

// String returns the hold outcome's attribute value.
func (o HoldOutcome) String() string { return enumString(holdOutcomes[:], int(o)) }

// Cause is what woke a waiting call to look at Redis again.
type Cause uint8

// The causes. Their String is the value of AttrCause. Message, HandOff and
// Local are news; LeaseExpiry, Recheck and Backoff are timers; a waiter that
// is mostly woken by timers is not hearing its messages.
const (
	CauseMessage     Cause = iota + 1 // a release message on the object's channel: "message"
	CauseResubscribe                  // the channel was subscribed again after a reconnect: "resubscribe"
	CauseSubscribed                   // the channel's subscription was confirmed (the look that closes the window before it): "subscribed"
	CauseLocal                        // news from this client: a hold of it ended without an unlock: "local"
	CauseHandOff                      // a release of this client handed the lock to the waiter: "hand_off"
	CauseLeaseExpiry                  // the holder's lease, as last read, ran out: "lease_expiry"
	CauseRecheck                      // the recheck interval passed (synchronizers): "recheck"
	CauseBackoff                      // a spin lock's back-off pause ended: "backoff"
)

var causes = [...]string{"unknown", "message", "resubscribe", "subscribed", "local", "hand_off", "lease_expiry", "recheck", "backoff"}

// String returns the cause's attribute value.
func (c Cause) String() string { return enumString(causes[:], int(c)) }

// RenewOutcome is how the watchdog's renewal of a hold went.
type RenewOutcome uint8

// The outcomes of a renewal. Their String is the value of AttrOutcome on
// renewal events.
const (
	RenewOK     RenewOutcome = iota + 1 // renewed: "ok"
	RenewFailed                         // the round's command failed; retried next round: "failed"
	RenewLost                           // the hold was gone from Redis: "lost"
)

var renewOutcomes = [...]string{"unknown", "ok", "failed", "lost"}

// String returns the renewal outcome's attribute value.
func (o RenewOutcome) String() string { return enumString(renewOutcomes[:], int(o)) }

func enumString(values []string, i int) string {
	if i < 0 || i >= len(values) {
		return values[0]
	}
	return values[i]
}

// The attribute keys of the events, in metrics, spans and the client's logs.
const (
	AttrKind      = "holdfast.kind"       // a Kind
	AttrOperation = "holdfast.operation"  // an Op
	AttrOutcome   = "holdfast.outcome"    // an Outcome, HoldOutcome or RenewOutcome
	AttrWaited    = "holdfast.waited"     // whether an acquisition blocked (bool)
	AttrCause     = "holdfast.wake.cause" // a Cause
	AttrName      = "holdfast.name"       // an object's name: opt-in, unbounded
	AttrHolds     = "holdfast.holds"      // a number of holds (logs only)
)

// The event names: the message of the client's log lines, and the stem of
// the metric names of an instrumentation.
const (
	EventCall      = "holdfast.call"             // a public call ended
	EventHoldEnd   = "holdfast.hold.end"         // a hold ended
	EventWake      = "holdfast.wait.wake"        // a waiter woke
	EventRenewal   = "holdfast.watchdog.renewal" // a renewal round's outcome for some holds
	EventReconnect = "holdfast.pubsub.reconnect" // a subscriber connection was re-established
	EventLeave     = "holdfast.fair.leave"       // a fair lock's waiter that gave up could not leave the queue
)
