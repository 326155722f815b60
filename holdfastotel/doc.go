// Package holdfastotel reports what holdfast's locks, semaphores and latches do
// to OpenTelemetry: a span per public call and a set of metrics, through an
// implementation of package observe's interfaces. It is a module of its own,
// so that a program that does not import it does not link OpenTelemetry; it
// depends on OpenTelemetry's API only (otel, otel/metric, otel/trace), not on
// its SDK.
//
//	obs, err := holdfastotel.NewObserver() // the global providers; or WithTracerProvider, WithMeterProvider
//	if err != nil { ... }
//	c, err := rlock.New(rdb, rlock.WithObserver(obs))
//
// # The model
//
// A holdfast client calls its observer at the start and end of every public
// call of its objects (a Mutex's Lock, a Lease's Unlock, a Semaphore's
// Acquire, a CountDownLatch's Await...), when a hold begins and ends, when a
// call starts and stops waiting and each time it wakes, after each renewal
// round of its watchdog, and when its pub/sub subscriptions change (see
// package observe). The Observer turns these into:
//
//   - a span per call, named "holdfast.<Type>.<Method>" ("holdfast.Mutex.Lock",
//     "holdfast.Lease.Unlock", "holdfast.Semaphore.Acquire"), of kind
//     Internal, started at the call's start. The call's Redis commands run
//     with the span's context, so that go-redis' command spans
//     (github.com/redis/go-redis/extra/redisotel/v9's InstrumentTracing) are
//     its children. Its attributes are holdfast.kind and holdfast.operation,
//     and, when it ends, holdfast.outcome (and holdfast.waited for an
//     acquisition). Only the outcome "error" makes the span an error (status
//     Error and the error recorded): "not_acquired", "timeout" and "canceled"
//     are answers the caller allowed, not failures.
//   - the metrics below. Durations are in seconds, on histograms with the
//     advisory bucket boundaries 0.1 ms, 0.25 ms, 0.5 ms, 1 ms, 2.5 ms, 5 ms,
//     10 ms, 25 ms, 50 ms, 0.1 s, 0.25 s, 0.5 s, 1 s, 2.5 s, 5 s, 10 s, 30 s
//     and 60 s.
//
// # Instruments
//
//	name                           instrument          unit            attributes
//	holdfast.acquire.duration      Float64Histogram    s               holdfast.kind, holdfast.operation, holdfast.outcome, holdfast.waited
//	holdfast.operation.duration    Float64Histogram    s               holdfast.kind, holdfast.operation, holdfast.outcome
//	holdfast.hold.duration         Float64Histogram    s               holdfast.kind, holdfast.outcome (a hold's)
//	holdfast.hold.active           Int64UpDownCounter  {hold}          holdfast.kind
//	holdfast.wait.active           Int64UpDownCounter  {waiter}        holdfast.kind
//	holdfast.wait.wakeups          Int64Counter        {wakeup}        holdfast.kind, holdfast.wake.cause
//	holdfast.watchdog.renewals     Int64Counter        {renewal}       holdfast.outcome (a renewal's)
//	holdfast.pubsub.subscriptions  Int64UpDownCounter  {subscription}  none
//	holdfast.pubsub.reconnects     Int64Counter        {reconnect}     none
//	holdfast.hold.losses           Int64Counter        {hold}          holdfast.kind, holdfast.loss.cause
//	holdfast.tracking.modes        Int64Counter        {node}          holdfast.tracking
//	holdfast.election.changes      Int64Counter        {change}        holdfast.elected, holdfast.election.new_term
//
// holdfast.acquire.duration has the calls that acquire (Lock, TryLock,
// Acquire, TryAcquire: observe.Op.Acquires), waits included;
// holdfast.operation.duration every other call. holdfast.hold.duration and
// holdfast.hold.active have the holds: a lock held by one owner from its first
// acquisition to the end of its last (reentries are one hold), an
// ExpirableSemaphore's Permits (a Semaphore's permits are counts without a
// holder, and not holds). A hold ends "released", "lost", "expired",
// "force_released", "closed" or "unconfirmed" (observe.HoldOutcome); a renewal
// is "ok", "failed" (retried next round), "lost", or "unreplicated" (the
// primary renewed it, too few replicas acknowledged: the deadline stays)
// (observe.RenewOutcome). A lost hold is also counted in holdfast.hold.losses
// by how the client learnt of it: "invalidated" (at once, client tracking),
// "renewal", "deadline" or "unreplicated" (its renewals were not acknowledged
// by enough replicas before its deadline) (observe.LossCause); holdfast.tracking.modes counts the Redis nodes found
// tracking ("on") or refusing it ("refused": losses there are learnt at the
// next renewal), and clients with tracking turned "off".
// holdfast.election.changes counts the changes of leader delivered to the
// client's followers (rlock.Election.Observe, observe.ElectionObserver): to a
// new term (holdfast.election.new_term), to a new value in the same term, or
// to no leader (holdfast.elected false). A leader's terms are holds of kind
// "election": holdfast.hold.duration gives their durations and
// holdfast.hold.losses their losses. A
// waiter woken mostly by timers ("lease_expiry", "recheck", "backoff") rather
// than news ("message", "hand_off", "local") is not hearing its messages.
//
// # Attributes
//
// The attribute keys are package observe's (observe.AttrKind...), shared with
// the client's logs. Every value is the String of one of observe's enums
// (values out of range are "unknown"), so the cardinality is bounded: 14
// kinds, 33 operations, 5 outcomes. Object names are left out unless
// WithNames opts in, with a function that bounds them; they are then the
// attribute holdfast.name of the per-object instruments and of the spans.
//
// # Cost
//
// NewObserver computes the attribute set of every combination of enum values
// once, so that recording a measurement allocates nothing of this package's
// (the SDK's own work aside): with no-op providers, End, HoldEnd and Woken
// allocate nothing. Start allocates for its span (its start options, and the
// context that carries it). With WithNames, each normalized name costs an
// allocation of its attribute set the first time it is seen in each
// combination; it is then cached for the life of the Observer.
package holdfastotel
