// Package chaos is holdfast's fault matrix: worker processes (the
// test binary re-executed by redistest) use every object kind against real
// redis-servers while the parent injects one fault again and again, and one
// checker judges the history they record.
//
// # The history
//
// Each worker prints one JSON line per operation (Recorder): acquire,
// release, the holder learning its hold was lost, the critical section, latch
// calls; the parent adds the faults and the latch counts it sets. Times are
// CLOCK_MONOTONIC, one clock for every process of the host.
//
// # The checker (Check)
//
//   - Overlaps: critical sections of one object on the monotonic clock; at
//     most one holder for a lock's exclusive side, no reader beside a writer,
//     at most N permits. An overlap is inherent to leases when one of the two
//     holders was told its hold was lost (Err, Done, or its release) and a
//     fault that can end its lease reached it while it held (a freeze or kill
//     of its process, data loss, a failover), or its own fixed lease ran out:
//     its last write raced the loss. Any other overlap is a violation, and so
//     is one whose two handles both said valid at one moment (each section
//     records when its last check that found the hold valid began) unless a
//     fault that takes holds from Redis before their expiry (Op.OK: a kill,
//     a freeze, a restart, a FLUSHALL, a failover) reached one of them: a
//     handle never says valid past its hold's expiry in Redis, and no other
//     holder is admitted before it.
//   - The shared resource (Resource, on a server no fault touches): a counter
//     per lock incremented by GET then SET inside each section (lost
//     increments), and a fenced register per FencedMutex that refuses tokens
//     below the highest it saw (stale fenced writes).
//   - Stuck: an acquire or await that never returned, or returned more than
//     2 s past its wait bound.
//   - Orphans (after the scenario, waiting out the leases of killed
//     holders): keys under the scenario's prefix other than the objects that
//     are meant to stay (semaphores, latches, fencing token counters, request
//     and unlock latches with a TTL), semaphores short of permits, and
//     subscriptions to the scenario's channels once every worker is idle.
//   - Leaked goroutines: each worker counts its goroutines after Close
//     against those before its clients existed (and redistest.Main runs goleak
//     in every worker process).
//   - Detection latency: from the end of a fault that reached a holder to the
//     moment it learnt of its loss; takeover latency: from a fault that can end
//     holds to the next acquisition of an object held at that moment. A loss
//     that no fault explains (Report.Unexplained) fails the scenario: a false
//     loss, or a hold that another client took away.
//   - Elections (election.go): terms strictly increasing (an acquisition
//     that returned before another began has the smaller token), and each
//     follower's views (Observe, one follower per name and process) in term
//     order and linearizable: a view read since the follower's previous one
//     is no older than any term acquired before that, names a leader whose
//     campaign had begun, and not one whose resignation was confirmed
//     before it. Leaders are exclusive holds, checked as the locks are, and
//     write to a fenced register with their term's token.
//   - Linearizability (github.com/anishathalye/porcupine): the acquire and
//     release history against a sequential lock table (see model.go). A hold
//     that was lost ends somewhere between its acquisition and the moment its
//     holder learnt it; one whose holder never said (killed) may end any time.
//
// TestCheckerCatchesPlantedDoubleGrant shows the checker finds a double
// grant; TestChaosPlantedBugsCaught runs three buggy client doubles (Plant*)
// through real scenarios and requires each to be reported as a bug.
//
// # Tiers
//
// TestChaos runs the short tier in every `go test`; HOLDFAST_CHAOS=full (make
// chaos) runs the full tier (docs/safety.md, "Fault matrix", says how long
// each takes). scenarios_test.go lists which fault reaches which kind.
// HOLDFAST_CHAOS_TRACKING=off runs the workers with rlock.WithTracking(false),
// to compare the detection latencies with and without client tracking.
package chaos
