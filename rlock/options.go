package rlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/holdfast-go/holdfast/lua"
	"github.com/holdfast-go/holdfast/observe"
	"github.com/holdfast-go/holdfast/watchdog"
)

// DefaultWatchdogTimeout is the lease of a hold taken without WithLeaseTime, kept
// alive by the watchdog (Redisson's lockWatchdogTimeout).
const DefaultWatchdogTimeout = watchdog.DefaultTimeout

// ClientOption configures a Client; pass them to New.
type ClientOption func(*clientOptions)

type clientOptions struct {
	watchdogTimeout time.Duration // default DefaultWatchdogTimeout
	renewInterval   time.Duration // default watchdogTimeout/3
	logger          *slog.Logger  // default slog.Default() (loggerSet false)
	loggerSet       bool          // WithLogger was given
	onLost          func(name string, err error)
	acks            lua.Acks      // default none
	fairWait        time.Duration // default DefaultFairWaitTimeout
	releaseTimeout  time.Duration // default DefaultReleaseTimeout
	recheck         time.Duration // default DefaultRecheckInterval
	observer        observe.Observer
	noTracking      bool   // WithTracking(false)
	service         string // WithService; default the program's name
}

// DefaultReleaseTimeout bounds a release (Unlock, and Close's release of the
// holds still open) when WithReleaseTimeout is not given.
const DefaultReleaseTimeout = 5 * time.Second

// WithReleaseTimeout bounds how long a release may take: an Unlock, and Close's
// release of the holds still open. A release does not end with its ctx (an
// Unlock deferred with a request's ctx that has ended must still release), only
// with this timeout; one that is not confirmed in time ends its lease anyway and
// stops renewing the hold (see ErrUnlockUnconfirmed). go-redis applies the
// timeout to its sockets only when its client has ContextTimeoutEnabled;
// otherwise the go-redis client's ReadTimeout, WriteTimeout and MaxRetries bound
// the release instead. Default: DefaultReleaseTimeout.
func WithReleaseTimeout(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.releaseTimeout = d }
}

// DefaultFairWaitTimeout is how long a fair lock's waiter may wait, once its
// turn comes, before the queue skips it as dead, when it waits without
// WithWaitTime (Redisson's fairLockWaitTimeout, 5 minutes).
const DefaultFairWaitTimeout = 5 * time.Minute

// WithFairWaitTimeout sets how long a waiter of a FairMutex that waits without
// WithWaitTime keeps its place once its turn comes: a waiter that has not taken
// the lock by then (its process died, say) is skipped. A live waiter skipped
// because the lock stayed held longer queues again at the back. Default:
// DefaultFairWaitTimeout.
func WithFairWaitTimeout(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.fairWait = d }
}

// WithWatchdogTimeout sets the lease of holds taken without WithLeaseTime; the
// watchdog renews them back to it while they are held. Default:
// DefaultWatchdogTimeout (30 s). A holder that dies frees its locks within this time.
func WithWatchdogTimeout(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.watchdogTimeout = d }
}

// WithRenewInterval sets the time between two renewals of watchdog holds.
// Default: a third of the watchdog timeout. It must be shorter than the timeout.
func WithRenewInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.renewInterval = d }
}

// DefaultRecheckInterval bounds every sleep of a semaphore's or a latch's
// waiter between two looks at Redis, when WithRecheckInterval is not given.
const DefaultRecheckInterval = time.Second

// WithRecheckInterval sets how long a waiter of a Semaphore, an
// ExpirableSemaphore or a CountDownLatch sleeps at most between two looks at
// Redis when no message wakes it: the bound on the delay a lost release message
// (a pub/sub connection lost at the wrong moment, a count written without a
// publish) can cause. Redisson's waiters on these objects have no such bound.
// Lock waiters are bounded by the holder's lease instead. Default:
// DefaultRecheckInterval.
func WithRecheckInterval(d time.Duration) ClientOption {
	return func(o *clientOptions) { o.recheck = d }
}

// WithTracking turns off (false) or on (true, the default) the client's
// tracking of its holds' keys: with it, a hold learns within a round trip that
// its key was deleted, replaced, cut short or flushed, or lost in a failover,
// instead of at its next renewal (see docs/design.md, "Loss known at once").
// It costs one connection pair per Redis node and, per hold kept longer than
// a few milliseconds, one batched read by the client's watchdog. A server that
// refuses client tracking (a proxy, some managed services) leaves its holds to
// the renewals, logged once (WithLogger) and reported to an observer that
// implements observe.TrackingObserver.
func WithTracking(on bool) ClientOption {
	return func(o *clientOptions) { o.noTracking = !on }
}

// WithService names the service the client works for in its record (package
// identity), which holdfast status, the command's busy lines and the
// observers show for every lock the client holds: "orders-svc on host-3, pid
// 4121, since 12:03:11". It also begins the client names (CLIENT SETNAME) of
// the connections the client opens itself. Default: the program's name
// (os.Args[0] without its directory).
func WithService(name string) ClientOption {
	return func(o *clientOptions) { o.service = name }
}

// WithLogger sets the logger the client tells of trouble: a hold whose
// renewals fail (a warning per renewal round at most, naming the hold whose
// lease runs out first and the lease it has left: holdfast.lease_left=17.2s),
// the renewals renewing again after failures (info, once), a lost hold (a
// warning, once per hold, with its cause), a subscriber connection
// re-established, a server that refuses client tracking. docs/observability.md
// lists the lines. While Redis answers it hears nothing, and Close says
// nothing either.
//
// Default: slog.Default() as New finds it. WithLogger(nil), or a logger whose
// handler is slog.DiscardHandler, silences the client.
func WithLogger(l *slog.Logger) ClientOption {
	return func(o *clientOptions) { o.logger, o.loggerSet = l, true }
}

// WithOnLost sets a function called, once per hold, when a hold is lost (see
// ErrLockLost; ErrPermitLost for an ExpirableSemaphore's Permits), with the
// lock's (or semaphore's) name and the reason. It runs on the client's
// watchdog goroutine or on the goroutine that found the loss: keep it short.
func WithOnLost(f func(name string, err error)) ClientOption {
	return func(o *clientOptions) { o.onLost = f }
}

// WithReplicaAcks makes every acquisition and release of the client wait, in the
// same round trip, until replicas replicas of the lock's primary have its write,
// for at most timeout (Redis' WAIT; Redisson's checkLockSyncedSlaves with
// slavesSyncTimeout). An acquisition that fewer replicas acknowledged is undone
// and fails with ErrNotReplicated: after a failover to a replica that missed it,
// another owner could take the lock too. Default: no acknowledgement (one
// primary's word, as bsm/redislock and redsync on one server). A timeout of zero
// means 1 s; it must be shorter than the go-redis client's ReadTimeout (New
// says so). WithLockReplicaAcks overrides it for one call.
//
// The watchdog's renewals wait too, in the round's one round trip, and a
// renewal moves a hold's deadline only when the replicas acknowledged it: a
// hold whose renewals the primary confirmed but the replicas did not (the
// primary cut off from them) ends at its deadline with ErrLockLost (ErrPermitLost),
// caused by watchdog.ErrUnreplicated, before a replica that has its last
// acknowledged renewal lets it expire once promoted. So while fewer replicas
// answer, locks cannot be taken and holds end: availability is the price.
// With acknowledgements, a release hands the lock (permits) to none of the
// client's waiters in its round trip: they take it with acquisitions of their
// own. docs/safety.md, "Partitions", says which replica Sentinel and Cluster
// promote and what replicas must be for the promise to hold.
//
// It applies to the semaphores
// too (Semaphore, ExpirableSemaphore): an acquisition is undone likewise, its
// permits given back, and fails with ErrNotReplicated, even while waiting; a
// release, and TrySetPermits, AddPermits, DrainPermits and SetPermits, report
// it and stand; a release no longer hands its permits to the client's waiters
// in its round trip: they take them with acquisitions of their own,
// acknowledged. ExpirableSemaphore.UpdateLease and the CountDownLatch's calls
// do not wait for replicas.
func WithReplicaAcks(replicas int, timeout time.Duration) ClientOption {
	return func(o *clientOptions) { o.acks = lua.Acks{Replicas: replicas, Timeout: timeout} }
}

func (o *clientOptions) validate() error {
	if err := validAcks(&o.acks); err != nil {
		return err
	}
	switch {
	case o.watchdogTimeout < 0:
		return fmt.Errorf("%w: negative watchdog timeout %v", ErrInvalidArgument, o.watchdogTimeout)
	case o.renewInterval < 0:
		return fmt.Errorf("%w: negative renew interval %v", ErrInvalidArgument, o.renewInterval)
	case o.fairWait < 0:
		return fmt.Errorf("%w: negative fair wait timeout %v", ErrInvalidArgument, o.fairWait)
	case o.releaseTimeout < 0:
		return fmt.Errorf("%w: negative release timeout %v", ErrInvalidArgument, o.releaseTimeout)
	case o.recheck < 0:
		return fmt.Errorf("%w: negative recheck interval %v", ErrInvalidArgument, o.recheck)
	}
	if !o.loggerSet {
		o.logger = slog.Default()
	}
	if o.recheck == 0 {
		o.recheck = DefaultRecheckInterval
	}
	if o.fairWait == 0 {
		o.fairWait = DefaultFairWaitTimeout
	}
	if o.releaseTimeout == 0 {
		o.releaseTimeout = DefaultReleaseTimeout
	}
	if o.watchdogTimeout == 0 {
		o.watchdogTimeout = DefaultWatchdogTimeout
	}
	if o.watchdogTimeout < 3*time.Millisecond {
		return fmt.Errorf("%w: watchdog timeout %v is below 3ms", ErrInvalidArgument, o.watchdogTimeout)
	}
	if o.renewInterval == 0 {
		o.renewInterval = o.watchdogTimeout / 3
	}
	if o.renewInterval >= o.watchdogTimeout {
		return fmt.Errorf("%w: renew interval %v is not shorter than the watchdog timeout %v",
			ErrInvalidArgument, o.renewInterval, o.watchdogTimeout)
	}
	return nil
}

// AcquireOption configures one acquisition: a Lock or TryLock of any lock
// (every Locker, MultiLock, RedLock), an ExpirableSemaphore's Acquire or
// TryAcquire, a Semaphore's TryAcquire. The options are WithLeaseTime and
// WithLockReplicaAcks; an acquisition they do not apply to fails with
// ErrInvalidArgument before any round trip (a Semaphore's permits have no
// lease, a semaphore takes the client's WithReplicaAcks only). Every
// AcquireOption is also a TryOption.
type AcquireOption func(*lockOptions)

// TryOption configures one call that tries: TryLock, and the semaphores'
// TryAcquire. It is any AcquireOption, or WithWaitTime, which only these calls
// take (Lock and Acquire wait until their ctx is done, so a wait time given to
// them could only be ignored).
type TryOption interface {
	applyTry(*lockOptions)
}

func (f AcquireOption) applyTry(o *lockOptions) { f(o) }

// waitTime is the TryOption WithWaitTime returns.
type waitTime time.Duration

func (d waitTime) applyTry(o *lockOptions) { o.waitTime = time.Duration(d) }

type lockOptions struct {
	leaseTime time.Duration // 0: watchdog
	waitTime  time.Duration // Try calls only; 0: one attempt
	acks      *lua.Acks     // nil: the client's WithReplicaAcks
	queue     bool          // set by the call, not an option: a fair lock's attempts queue the caller
	elect     *lua.Elect    // set by Campaign, not an option: the acquisition records the leader
}

// WithLockReplicaAcks overrides, for one acquisition of a lock, the replica
// acknowledgements that WithReplicaAcks sets for the whole client: the
// acquisition, the release of its lease and the renewals of the hold it starts
// (an owner's first acquisition of the lock) wait for replicas replicas, for
// at most timeout; replicas 0 asks for none. Locks only: a semaphore's
// acquisition given it fails with ErrInvalidArgument.
func WithLockReplicaAcks(replicas int, timeout time.Duration) AcquireOption {
	return func(o *lockOptions) { o.acks = &lua.Acks{Replicas: replicas, Timeout: timeout} }
}

// validAcks checks a and gives a timeout of zero its default, 1 s.
func validAcks(a *lua.Acks) error {
	if a.Replicas < 0 || a.Timeout < 0 {
		return fmt.Errorf("%w: negative replica acknowledgement (%d replicas, timeout %v)", ErrInvalidArgument, a.Replicas, a.Timeout)
	}
	if a.Replicas > 0 && a.Timeout == 0 {
		a.Timeout = time.Second
	}
	return nil
}

// WithLeaseTime gives the hold a fixed lease: the lock (an ExpirableSemaphore's
// permits) expires d after it was taken unless released first, and the
// watchdog does not renew it (Redisson's leaseTime). Zero, the default, means
// a watchdog lease. A Semaphore's TryAcquire given it fails with
// ErrInvalidArgument: its permits have no lease.
func WithLeaseTime(d time.Duration) AcquireOption {
	return func(o *lockOptions) { o.leaseTime = d }
}

// WithWaitTime makes TryLock wait up to d for the lock (Redisson's
// tryLock(waitTime, ...)), and a semaphore's TryAcquire up to d for its
// permits (tryAcquire(permits, waitTime)). Zero, the default, means a single
// attempt. Only the Try calls take it: Lock and Acquire wait until their ctx
// is done (bound them with context.WithTimeout).
func WithWaitTime(d time.Duration) TryOption { return waitTime(d) }

// newLockOptions reads the options of a call of Lock.
func newLockOptions(opts []AcquireOption) (lockOptions, error) {
	var o lockOptions
	if len(opts) > 0 {
		p := new(lockOptions) // only here: o stays on the stack without options
		for _, f := range opts {
			f(p)
		}
		o = *p
	}
	return o, o.validate()
}

// newTryLockOptions reads the options of a call of TryLock.
func newTryLockOptions(opts []TryOption) (lockOptions, error) {
	var o lockOptions
	if len(opts) > 0 {
		p := new(lockOptions) // only here: o stays on the stack without options
		for _, f := range opts {
			f.applyTry(p)
		}
		o = *p
	}
	return o, o.validate()
}

// validate checks the options of a call, and gives defaults.
func (o *lockOptions) validate() error {
	switch {
	case o.leaseTime < 0:
		return fmt.Errorf("%w: negative lease time %v", ErrInvalidArgument, o.leaseTime)
	case o.waitTime < 0:
		return fmt.Errorf("%w: negative wait time %v", ErrInvalidArgument, o.waitTime)
	case o.acks != nil:
		return validAcks(o.acks)
	}
	return nil
}

// WithObserver installs o, which sees every public call of the client's
// objects, and, when it implements them, the optional interfaces of package
// observe: holds, waits, the watchdog's renewals and the pub/sub
// connections. holdfastotel's NewObserver is one, for OpenTelemetry. With
// none installed (the default) the cost is a nil check per call. A nil o
// installs none.
func WithObserver(o observe.Observer) ClientOption {
	return func(co *clientOptions) { co.observer = o }
}

// lease returns the lease an acquisition with options lo gives the lock in
// Redis: its fixed lease, else the watchdog's, watched.
func (lo lockOptions) lease(watched lua.Millis) lua.Millis {
	if lo.leaseTime > 0 {
		return lua.NewMillis(lo.leaseTime)
	}
	return watched
}

// expiry returns when a holder's lease read as ttl by an attempt just answered
// runs out: the bound of the head's sleep. A lock without expiry (ttl < 0, set
// by another program) is looked at again after the watchdog timeout.
func (o clientOptions) expiry(ttl time.Duration) time.Time {
	if ttl < 0 {
		ttl = o.watchdogTimeout
	}
	return time.Now().Add(max(ttl, time.Millisecond)) // the key expires within the millisecond
}
