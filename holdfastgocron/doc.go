// Package holdfastgocron runs github.com/go-co-op/gocron/v2 jobs across several
// scheduler instances on holdfast's locks: a [Locker] (gocron.Locker) whose
// lock of a job's run is kept a minimum time, so that two schedulers whose
// ticks are skewed never run one tick twice, and an [Elector] (gocron.Elector)
// on an rlock.Election, whose IsLeader is a local check.
//
// It is a module of its own, so that a program that does not import it does
// not require gocron.
//
// # Locker: one run per tick, on skewed schedulers
//
// gocron asks its Locker for the job's name before each run and unlocks after
// the run. With a plain lock, the first instance to fire takes the lock, runs a
// fast job and releases it; an instance whose clock (or start) is a few
// milliseconds behind fires the same tick right after and finds the lock free,
// so the tick runs twice (https://github.com/go-co-op/gocron/issues/841).
// The Locker keeps each lock until at least minHold after it was taken, even
// when the job ended sooner: the lagging instance finds it held and skips the
// tick. minHold must be longer than the skew between instances and shorter
// than the job's interval:
//
//	locker, err := holdfastgocron.NewLocker(c, 500*time.Millisecond) // skew < 500 ms < interval
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//
// The lock is a holdfast rlock.Mutex (Redisson's RLock) named by the key
// prefix and the job's name, taken with one attempt (a busy lock skips the
// tick) for a fresh owner, and held with the watchdog: a process that dies
// while it holds it frees it within the client's watchdog timeout.
//
// # Elector: only the leader runs jobs
//
// NewElector campaigns in the background on an rlock.Election, campaigning
// again whenever a term ends. IsLeader is asked before every run; it makes no
// round trip: it reads the current rlock.Leadership's Err, which is nil only
// while the term is held and never after its lease may have run out. A leader
// that dies or is cut off is replaced within the watchdog timeout; one that
// closes its Elector resigns, and another instance leads at once.
//
//	el := holdfastgocron.NewElector(c.NewElection("reports"), hostname)
//	defer el.Close(ctx)
//	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
//
// docs/gocron.md explains the choice between the two and why the Locker keeps
// its locks a minimum time rather than keying them by the tick.
package holdfastgocron
