// Package rlock is Redisson's lock toolkit for Go: distributed locks,
// semaphores, latches and leader election on Redis, wire-compatible with
// Redisson so that Go and Java processes exclude each other on the same names.
//
// This page is a map: what there is, in the order a newcomer needs it, and
// where each part is explained. The shortest complete program is the README's
// quick start (examples/quickstart); Example shows the basic use.
//
// # Start: a Client, an owner, a lock
//
// New wraps a go-redis client (one server, Sentinel or Cluster) in a Client.
// It has an id (a UUID) and owns the shared machinery: one pub/sub connection
// through which all its waiters learn of releases, and one watchdog goroutine
// that renews all its holds. Create one Client per process and Close it at the
// end: Close releases the holds still open.
//
// An owner is the Go counterpart of a Java thread. Go has no thread identity,
// so the owner travels in the context: WithOwner(ctx) starts one, and every
// call made with that ctx (or a ctx derived from it) acts for it. An owner
// that holds a lock and takes it again re-enters it; the lock is free once
// every acquisition was unlocked. A ctx without an owner acquires for a fresh
// owner each time: a plain non-reentrant mutex, released through the Lease its
// acquisition returned. Examples: Example, ExampleWithOwner,
// ExampleMutex_TryLock, ExampleMutex_Unlock.
//
// # The objects
//
// Each is a handle, safe for concurrent use, on Redisson's keys, made by a
// method of Client (MultiLock and RedLock by functions, from Mutexes). An
// acquisition returns a handle of its own (Lease, MultiLease, Permits,
// Leadership) that gives it back.
//
//   - Mutex (NewMutex; Redisson's RLock): the reentrant lock. Lock waits for it,
//     TryLock tries once or, with WithWaitTime, for a bounded time; both return
//     a Lease, which Unlock gives back.
//   - The other locks, on the same hash, all Lockers: NonReentrantMutex;
//     FencedMutex, whose Lease.Token is a fencing token (ExampleFencedMutex);
//     SpinMutex, whose waiters retry after a Backoff instead of listening;
//     FairMutex and NonReentrantFairMutex, first come first served across
//     processes (ExampleFairMutex); RWMutex, whose ReadLock and WriteLock are
//     a ReadMutex and a WriteMutex (ExampleRWMutex).
//   - MultiLock (NewMultiLock): several locks, all or none; RedLock
//     (NewRedLock): a majority of independent primaries. Both return a
//     MultiLease (ExampleMultiLock, ExampleRedLock).
//   - Semaphore (NewSemaphore; RSemaphore): a count of permits, no owners
//     (ExampleSemaphore).
//   - ExpirableSemaphore (NewExpirableSemaphore; RPermitExpirableSemaphore):
//     permits with ids and leases; an acquisition returns a Permits handle
//     (ExampleExpirableSemaphore).
//   - CountDownLatch (NewCountDownLatch; RCountDownLatch): waiters Await a
//     count that CountDown brings to zero (ExampleCountDownLatch).
//   - Election (NewElection; etcd's concurrency.Election, on a fenced lock):
//     Campaign returns a Leadership; followers read the leader, a LeaderInfo,
//     with Leader or Observe (ExampleElection; docs/election.md).
//
// docs/porting.md maps every Redisson call to its Go counterpart;
// docs/design.md explains the layout, the scripts, the waiting and the
// renewals.
//
// # Leases, and knowing a hold is lost
//
// Without WithLeaseTime a hold has a watchdog lease: the lock expires after
// the client's watchdog timeout (30 s by default) unless renewed, and the
// watchdog renews it every third of that while it is held. A holder that dies
// therefore frees its locks within the timeout. With WithLeaseTime(d) the lock
// (the permits) expires d after it was taken and is not renewed.
//
// Every handle says when it ends and why: Lease, MultiLease, Permits and
// Leadership have Done, a channel closed when the hold ends, and Err, nil
// while it is held, then the reason: ErrUnlocked (ErrReleased for Permits)
// after a release, ErrLockLost (ErrPermitLost) when the hold was lost,
// ErrUnlockUnconfirmed when Redis did not confirm the release, ErrClosed
// after Close. A hold is declared lost as soon as its lease may have run out
// without a confirmed renewal, and Err never reports a hold valid past that
// deadline, even right after the process was paused: code that must not run
// without the lock asks Err right before each write (ExampleLease_Done).
// Context gives work a ctx that the hold's end cancels, with the reason as
// its cause (context.Cause; ExampleLease_Context, docs/election.md).
// The client's watchdog also tracks the keys of its holds (Redis client
// tracking; WithTracking, on by default): a key deleted, replaced, cut short,
// flushed or lost in a failover ends its holds within a round trip instead of
// at the next renewal (Done closes, Err matches ErrLockLost or
// ErrPermitLost). WithOnLost calls a function once per lost hold, the client's
// logger (slog.Default unless WithLogger sets another, or none) logs it, as
// it logs the renewal rounds that fail before, with the lease left, and an
// observer (WithObserver) is told. docs/safety.md says what a lease
// guarantees and what a fencing token adds; docs/design.md, "Loss known at
// once", how a loss is found.
//
// Every hold ends. Unlock releases even when its ctx has ended (a request's
// deferred Unlock), bounded by the client's release timeout; a release Redis
// does not confirm ends the lease and stops the renewals, so that the lock
// expires by itself (ErrUnlockUnconfirmed).
//
// # Leader election
//
// An Election (NewElection) is a fenced lock plus a leader record. Campaign
// waits until the caller leads and returns a Leadership: one term, whose
// Token is the term's fencing token, whose Proclaim changes the leader's
// value and Resign ends it, and whose Done, Err and Context say when and why
// it ended, as a Lease's (a loss is known at once, as above). Followers read
// the leader, a LeaderInfo, with Leader, or are sent every change by Observe.
// A Java process that takes getFencedLock on the same name is a candidate too
// (ExampleElection; docs/election.md).
//
// # Who holds a lock
//
// In Redis a holder is its owner field, "<client id>:<owner id>"
// (Lease.Holder, Client.ID), as in Redisson. Package identity says who that
// client is: from its first hold until Close a Client keeps a small record of
// itself in Redis (service, host, pid, library version, start;
// Client.Identity), whose service WithService names, so that holdfast status
// and the command's busy lines (docs/cli.md), or identity.Read, name a
// holder "orders-svc on host-3, pid 4121" rather than by a UUID. A Java
// holder has no record.
//
// # Waiting
//
// A waiting call listens on the object's channel, as Redisson's do, and
// sleeps at most until the lease it read: no wait outlives the hold it waits
// for. With client tracking a waiter also follows the key it waits on, so
// that a hold ended with nothing published (an operator's DEL, a FLUSHALL, an
// eviction, a restart that lost it, a count set by hand) lets it in within a
// round trip, in every process. A wait ended by its ctx returns an error
// matching both ErrNotAcquired and ctx's error (docs/design.md, "Waiting").
//
// # Options
//
// New takes ClientOptions: WithWatchdogTimeout, WithRenewInterval,
// WithReleaseTimeout, WithFairWaitTimeout, WithRecheckInterval,
// WithReplicaAcks, WithTracking, WithOnLost, WithLogger, WithObserver
// (docs/observability.md, ExampleWithObserver; module holdfastotel for
// OpenTelemetry), WithService. An acquisition takes AcquireOptions:
// WithLeaseTime and, for a lock, WithLockReplicaAcks (the client's
// WithReplicaAcks for that acquisition alone). The calls that try (TryLock,
// TryAcquire) take TryOptions: any AcquireOption, and WithWaitTime.
//
// # Round trips
//
// An uncontended Lock or TryLock is one round trip (one EVALSHA), and so is
// Unlock; neither touches pub/sub. Waiting is described at Mutex.Lock.
//
// # Deployments
//
// The Client takes any go-redis client: a *redis.Client on one server or
// through Sentinel (redis.NewFailoverClient), or a *redis.ClusterClient. On a
// Redis 7+ Cluster releases travel by sharded pub/sub, in the lock's shard
// only. WithReplicaAcks makes acquisitions, renewals and releases wait for
// replicas (Redis' WAIT): an acquisition they did not receive, which a
// failover could lose, is refused, and a hold's deadline moves only on a
// renewal they received, so that a holder cut off with its primary stops
// saying valid before a promoted replica lets its hold expire
// (ExampleWithReplicaAcks). docs/safety.md says what each deployment, and
// MultiLock and RedLock, guarantee.
//
// The waiters of semaphores and latches, and an election's observers, listen
// on pub/sub like lock waiters and look again at least every recheck interval
// (WithRecheckInterval), so a lost message cannot leave them waiting for ever,
// as it can in Redisson.
//
// # Errors
//
// Errors are values wrapping the sentinels of this package (ErrNotAcquired,
// ErrNotHeld, ErrLockLost, ErrUnlocked, ErrUnlockUnconfirmed, ErrWrongType,
// ErrConflict, ErrNonReentrant, ErrUpgrade, ErrNotReplicated, ErrClosed,
// ErrInvalidArgument, ErrUnreachable; for the synchronizers ErrPermitLost,
// ErrNoSuchPermit, ErrReleased, ErrLatchDeleted; for the election ErrNoLeader,
// ErrNotLeader); test them with errors.Is. Two
// carry data: *NotReplicatedError and *UnlockUnconfirmedError. Other Redis
// errors are wrapped as they come, with the script's hash and line taken off
// an error raised inside a script (servers word those differently).
//
// # Redis down
//
// A call that cannot reach Redis fails with an error matching ErrUnreachable
// that says where Redis was expected ("rlock: lock "jobs": cannot reach Redis at
// 10.0.0.5:6379: dial tcp …: connection refused"). How long it tries first is
// go-redis' to say, through the options of the client given to New: it sends a
// command up to MaxRetries+1 times (4 by default), each time dialling up to
// DialerRetries times (5) DialerRetryTimeout apart (100 ms) within DialTimeout
// (5 s); so a refused connection fails a call after about 1.7 s, and a server
// that accepts connections but does not answer after ReadTimeout (3 s) per
// try. A command that never left the client is not undone. go-redis also logs
// each failed dial through its own logger (redis.SetLogger), which a library
// must leave to the program.
//
// # Further reading
//
//   - README.md: why holdfast, the quick start, the command line, the tests.
//   - docs/porting.md: every Redisson call and its Go counterpart.
//   - docs/design.md: the model, the keys, the scripts, waiting, renewal.
//   - docs/safety.md: what holds and what does not, by deployment; fencing.
//   - docs/election.md: the election, its guarantees, a singleton worker.
//   - docs/observability.md: observers, metrics, traces, logs.
//   - docs/cli.md: the holdfast command (lock, elect, status, unlock).
//   - docs/performance.md, docs/semaphore.md, docs/loss.md: measurements.
package rlock
