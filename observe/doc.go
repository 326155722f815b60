// Package observe is how holdfast reports what it does, for metrics, traces and
// logs, without depending on any of them: a leaf package of interfaces and
// enums that the core calls and that an instrumentation module (holdfastotel,
// or one of your own) implements. It imports nothing but the standard library.
//
// # The model
//
// An Observer is installed per client (rlock.WithObserver). The client calls
// its Start at the beginning of every public call on one of its objects (a
// Mutex's Lock, a Lease's Unlock, a Semaphore's Acquire, a CountDownLatch's
// Await...) and its End when the call returns. The context Start returns is the
// one the call's Redis commands run with, so that a span started there is the
// parent of go-redis' command spans (redisotel). With no observer installed a
// call costs one nil check and no allocation.
//
// An Observer may also implement any of the optional interfaces, which the
// client looks for once, when it is created:
//
//   - HoldObserver: a hold begins (a lock's owner takes it, permits are
//     acquired) and ends, with how it ended (HoldOutcome).
//   - WaitObserver: a call starts and stops blocking, and what woke it (Cause).
//   - RenewObserver: the watchdog's renewals and how they went (RenewOutcome).
//   - RenewHealthObserver (on a RenewObserver): the rounds that failed to
//     renew, with the lease left to the hold that runs out first, and the
//     first round that renews again.
//   - PubSubObserver: channel subscriptions made and dropped, reconnections.
//
// Every value that identifies something is an enum with a fixed set of
// values (Kind, Op, Outcome, HoldOutcome, Cause, RenewOutcome), whose String
// is the attribute value: metrics built from them have bounded cardinality.
// Object names are passed too, for an observer that opts in to them. The
// attribute keys (AttrKind...) and event names (EventHoldEnd...) are shared
// with the client's logs (rlock.WithLogger), so that a log line and a metric
// point can be matched.
//
// # Rules for implementations
//
// The client calls the observer synchronously, sometimes with its own mutex
// held (hold and wait events): an implementation must be quick, must not block
// and must not call back into the client. It must be safe for concurrent use.
// Calls of one object kind may come from any goroutine.
package observe
