// Package holdfastasynq runs asynq (github.com/hibiken/asynq) under holdfast's
// locks: a Scheduler that runs only while its process leads an election, and
// two server middlewares, one that serializes the tasks of a key across every
// worker (a Mutex per key) and one that bounds how many tasks of a type run at
// once across every worker (an ExpirableSemaphore per type). It is a module of
// its own, so that a program that does not import it does not link asynq.
//
// # One scheduler among many processes
//
// asynq's Scheduler enqueues each periodic task once per tick per Scheduler:
// every replica that runs one enqueues it again. RunScheduler campaigns in an
// rlock.Election, builds and starts a Scheduler when the campaign is won,
// shuts it down when the leadership ends (resigned, lost, the Client closed)
// or ctx ends, and campaigns again:
//
//	e := c.NewElection("asynq:scheduler")
//	err := holdfastasynq.RunScheduler(ctx, e, func(*rlock.Leadership) (*asynq.Scheduler, error) {
//		s := asynq.NewSchedulerFromRedisClient(rdb, nil)
//		_, err := s.Register("@every 1m", asynq.NewTask("report", nil))
//		return s, err
//	})
//
// A Scheduler cannot start again once shut down, so RunScheduler asks for a
// new one for each term.
//
// # Middlewares
//
// Serialize takes a Mutex named by a key function before the handler runs and
// unlocks it after; Limit takes one permit of the task type's
// ExpirableSemaphore. Both hold with the watchdog: a worker that dies frees
// its lock or permit within the rlock Client's watchdog timeout. The handler's
// ctx is cancelled when the lock or permit is lost, with the Lease's (the
// Permits') Err as its cause (context.Cause), and the task then fails with an
// error wrapping that cause, so that asynq retries it by its own rules. A lock
// or permit not available within the wait (WithWait, 5 s by default) fails the
// task with an error matching ErrBusy and rlock.ErrNotAcquired: asynq retries
// it later. Give the Server IsFailure (Config.IsFailure = IsFailure) so that
// those retries do not count against the task's MaxRetry, and
// BusyRetryDelay to retry them sooner than asynq's default back-off.
//
// docs/asynq.md in the repository explains the decisions.
package holdfastasynq
