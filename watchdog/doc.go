// Package watchdog is a building block of package rlock: it keeps holds alive
// (lock holds, read holds of read/write locks, and permits of a
// permit-expirable semaphore: lua.RenewalKind) and tells their holders when a
// hold is lost. Applications use rlock,
// whose Client runs one Watchdog for all its locks (see rlock.Lease.Done and
// rlock.WithOnLost), and never this package directly.
//
// One Watchdog serves every hold of one client with one goroutine, as etcd's
// session keeps one lease alive for many mutexes. A hold taken without an explicit
// lease is renewed every Interval (Timeout/3 by default) back to Timeout: the
// renewals of all holds, of every kind, are batched, at most BatchSize holds per
// script call (lua.RenewCmd) and never two hash slots in one call, and all
// batches of a round are sent in one pipelined round trip. A hold taken with a fixed lease is not renewed, only
// watched until its deadline.
//
// A hold is declared lost, and its OnLost callback runs once, when
//   - a renewal finds that the lock no longer has the owner's field (deleted,
//     expired, force-unlocked or taken over), or that the semaphore no longer
//     has the permit, or has it expired (released, reclaimed, deleted):
//     ErrGone; or
//   - its deadline passes with no renewal confirmed: ErrNotRenewed for renewed
//     holds, ErrLeaseEnded for fixed leases. The deadline is the send time of the
//     last confirmed acquire or renewal plus the lease, on the local monotonic
//     clock: like etcd's lessor, the watchdog assumes the lock is gone without
//     waiting to hear it, so a process that was frozen past its lease learns the
//     loss before it sends another renewal; or
//   - with Options.Track, the server says the hold's key changed (client
//     tracking) or a connection that carried such news broke, and a look finds
//     the hold gone: ErrInvalidated, within a round trip of the change; or
//     finds its lease cut short, which then runs out: ErrShortened. Renewals
//     then go through the tracked connections; they stay the backstop.
//
// Cause says which of these a loss was, as observe.LossCause.
//
// With Options.Track the tracker also serves waiters: a Follow is a key that a
// waiter of the client waits on and does not hold (a lock's, a semaphore's
// count); the tracker reads it on its tracked connection and tells the waiter
// when a change lets it in, so that a hold ended with nothing published (an
// operator's DEL, a flush, a restart) wakes the waiters of every process.
//
// The model, with Options.Track: the Watchdog's index (one mutex) owns every
// hold: whether it is watched, its deadline, whether its release is in
// flight. The tracker owns only its work, under a mutex of its own: the keys
// the server said changed (nil: every key, after a reconnect or a flush), the
// new holds it has yet to look at (arrivals), the holds whose look is to be
// tried again, and the pacing of its ticks (tickPolicy, which stops ticking
// when idle). Its goroutine repeats one pass in plain phases: take the holds
// due (news, new holds the delay old, retries), look at them on their node
// (one round trip), and write what the looks found into the index: gone
// holds end, cut leases get an earlier deadline.
//
// Transient errors (timeouts, a lost connection, a restarting server) are logged
// and do not stop renewal: the next round tries again while the deadline allows.
//
// Registration is synchronous: Watch returns a Hold that the next round renews, and
// after Stop returns no later round includes it and OnLost is not called. A renewal
// already in flight can still reach Redis after Stop; it is harmless because it
// extends a lock only while the owner's field is still there, and a permit only
// while it is still held.
package watchdog
