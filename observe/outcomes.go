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
	// CauseChanged: the client's tracker heard that the object's key changed
	// with no message (an operator's DEL, a flush, an eviction, a restart
	// that lost it, a count set by hand): "changed".
	CauseChanged
)

var causes = [...]string{"unknown", "message", "resubscribe", "subscribed", "local", "hand_off", "lease_expiry", "recheck", "backoff", "changed"}

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
	// RenewUnreplicated: Redis renewed the hold, but fewer replicas than
	// required acknowledged it (WithReplicaAcks): the renewal counts for
	// nothing, the hold's deadline stays where it was: "unreplicated".
	RenewUnreplicated
)

var renewOutcomes = [...]string{"unknown", "ok", "failed", "lost", "unreplicated"}

// String returns the renewal outcome's attribute value.
func (o RenewOutcome) String() string { return enumString(renewOutcomes[:], int(o)) }

// LossCause is how the client learnt that a hold was lost (HoldLost).
type LossCause uint8

// The causes of a loss. Their String is the value of AttrLoss on the end of a
// lost hold.
const (
	LossInvalidated LossCause = iota + 1 // the server said its key changed (client tracking), or a look after a broken connection found it gone: "invalidated"
	LossRenewal                          // a renewal found it gone: "renewal"
	LossDeadline                         // no renewal was confirmed before its deadline: "deadline"
	LossOther                            // anything else (Redis answered the owner's count as gone, the key replaced by another type): "other"
	// LossUnreplicated: its deadline passed while Redis renewed it but too
	// few replicas acknowledged the renewals (WithReplicaAcks): a failover
	// to a replica could have let the hold expire by then: "unreplicated".
	LossUnreplicated
)

var lossCauses = [...]string{"unknown", "invalidated", "renewal", "deadline", "other", "unreplicated"}

// String returns the loss cause's attribute value.
func (c LossCause) String() string { return enumString(lossCauses[:], int(c)) }

// TrackingMode is whether a client learns at once of a change to its holds'
// keys on a node (client tracking), or only at the next renewal.
type TrackingMode uint8

// The modes. Their String is the value of AttrTracking.
const (
	TrackingOn      TrackingMode = iota + 1 // the node tracks the holds' keys: a change is told at once: "on"
	TrackingRefused                         // the node refused CLIENT TRACKING (a proxy, a managed service): renewals only: "refused"
	TrackingOff                             // the client's options turned tracking off: renewals only: "off"
)

var trackingModes = [...]string{"unknown", "on", "refused", "off"}

// String returns the mode's attribute value.
func (m TrackingMode) String() string { return enumString(trackingModes[:], int(m)) }

func enumString(values []string, i int) string {
	if i < 0 || i >= len(values) {
		return values[0]
	}
	return values[i]
}

// The attribute keys of the events, in metrics, spans and the client's logs.
const (
	AttrKind      = "holdfast.kind"              // a Kind
	AttrOperation = "holdfast.operation"         // an Op
	AttrOutcome   = "holdfast.outcome"           // an Outcome, HoldOutcome or RenewOutcome
	AttrWaited    = "holdfast.waited"            // whether an acquisition blocked (bool)
	AttrCause     = "holdfast.wake.cause"        // a Cause
	AttrName      = "holdfast.name"              // an object's name: opt-in, unbounded
	AttrHolds     = "holdfast.holds"             // a number of holds (logs only)
	AttrLoss      = "holdfast.loss.cause"        // a LossCause, on the end of a lost hold
	AttrTracking  = "holdfast.tracking"          // a TrackingMode
	AttrNode      = "holdfast.node"              // a Redis node's address (logs only)
	AttrElected   = "holdfast.elected"           // whether a leader leads after a change of leader (bool)
	AttrNewTerm   = "holdfast.election.new_term" // whether a change of leader began a new term (bool)
	// AttrLeaseLeft is how long a hold whose renewals fail keeps its lease,
	// as last confirmed (a time.Duration; logs only).
	AttrLeaseLeft = "holdfast.lease_left"
	// AttrFailedFor is how long the watchdog's renewals have failed, from
	// the first failed round (a time.Duration; logs only).
	AttrFailedFor = "holdfast.renewal.failed_for"
	// AttrFailedRounds is how many renewal rounds in a row failed (logs only).
	AttrFailedRounds = "holdfast.renewal.failed_rounds"
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
	EventTracking  = "holdfast.tracking"         // a node's tracking mode changed (logged when refused)
)
