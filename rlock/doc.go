// Package rlock is Redisson's lock toolkit for Go: reentrant distributed locks on
// Redis, wire-compatible with Redisson so that Go and Java processes exclude each
// other on the same lock.
//
// # Model
//
// A Client wraps a go-redis client. It has an id (a UUID) and owns two pieces of
// shared machinery: one pub/sub subscriber connection through which all its
// waiters learn of releases, and one watchdog goroutine that renews all its
// holds. Create one Client per process and Close it at the end.
//
// An owner is the Go counterpart of a Java thread. Go has no thread identity, so
// the owner travels in the context: WithOwner(ctx) starts one, and every call made
// with that ctx (or a ctx derived from it) acts for it. An owner that holds a lock
// and takes it again re-enters it; the lock is free once every acquisition was
// unlocked. A ctx without an owner acquires for a fresh owner each time: a plain
// non-reentrant mutex, released through the Lease its acquisition returned.
//
// A Mutex is a handle on one lock name (Redisson's RLock). Lock waits for the lock,
// TryLock tries once or waits for a bounded time; both return a Lease, the
// acquisition, which Unlock gives back. Lease.Done is closed when the lease ends,
// and Lease.Err says why: unlocked, lost (ErrLockLost), or client closed.
//
// # Leases and the watchdog
//
// Without WithLeaseTime a hold has a watchdog lease: the lock expires after the
// client's watchdog timeout (30 s by default) unless renewed, and the watchdog
// renews it every third of that while it is held. A holder that dies therefore
// frees its locks within the timeout. With WithLeaseTime(d) the lock expires d
// after it was taken and is not renewed. Either way a hold is declared lost, and
// its leases' Done closed, as soon as its lease may have run out without a
// confirmed renewal, and Lease.Err never reports a lease valid past that
// deadline, even right after the process was paused: code that must not run
// without the lock asks Err right before each write (docs/safety.md).
//
// Every hold ends. Unlock releases even when its ctx has ended (a request's
// deferred Unlock), bounded by the client's release timeout; a release Redis
// does not confirm ends the lease and stops the renewals, so that the lock
// expires by itself (ErrUnlockUnconfirmed). Close releases the holds still open.
//
// # Round trips
//
// An uncontended Lock or TryLock is one round trip (one EVALSHA), and so is
// Unlock; neither touches pub/sub. Waiting is described at Mutex.Lock.
//
// # Deployments and composite locks
//
// The Client takes any go-redis client: a *redis.Client on one server or through
// Sentinel (redis.NewFailoverClient), or a *redis.ClusterClient. On a Redis 7+
// Cluster releases travel by sharded pub/sub, in the lock's shard only.
// WithReplicaAcks makes acquisitions, renewals and releases wait for replicas
// (Redis' WAIT): an acquisition they did not receive, which a failover could
// lose, is refused, and a hold's deadline moves only on a renewal they
// received, so that a holder cut off with its primary stops saying valid
// before a promoted replica lets its hold expire. MultiLock takes several locks all or none; RedLock takes a lock on a
// majority of independent primaries. docs/safety.md says what each mode
// guarantees.
//
// # Semaphores and latches
//
// The Client also makes Redisson's synchronizers, on the same keys, channels
// and messages, so that Go and Java processes share them: Semaphore
// (RSemaphore: a count of permits, no owners), ExpirableSemaphore
// (RPermitExpirableSemaphore: permits with ids and leases; an acquisition
// returns a Permits handle, renewed by the watchdog unless it has a fixed
// lease, whose Done and Err tell when its permits are lost) and CountDownLatch
// (RCountDownLatch). Their waiters block on pub/sub like lock waiters and look
// again at least every recheck interval (WithRecheckInterval), so a lost
// message cannot leave them waiting for ever, as it can in Redisson.
//
// # Errors
//
// Errors are values wrapping the sentinels of this package (ErrNotAcquired,
// ErrNotHeld, ErrLockLost, ErrUnlocked, ErrUnlockUnconfirmed, ErrWrongType,
// ErrConflict, ErrNonReentrant, ErrUpgrade, ErrNotReplicated, ErrClosed,
// ErrInvalidArgument, ErrUnreachable, and for the synchronizers ErrPermitLost,
// ErrNoSuchPermit, ErrReleased, ErrLatchDeleted); test them with errors.Is. Two
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
package rlock
