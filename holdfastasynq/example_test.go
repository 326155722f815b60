package holdfastasynq_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"time"

	"github.com/hibiken/asynq"
	"github.com/holdfast-go/holdfast/holdfastasynq"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// Every replica runs the same program: one of them runs the Scheduler, all of
// them process tasks; the tasks of one account run one at a time, and at most
// two "report" tasks run at once across the replicas.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c, err := rlock.New(rdb) // one per process: its watchdog keeps the holds
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The periodic tasks: enqueued by the leader only.
	go func() {
		err := holdfastasynq.RunScheduler(ctx, c.NewElection("asynq:scheduler"),
			func(*rlock.Leadership) (*asynq.Scheduler, error) {
				s := asynq.NewSchedulerFromRedisClient(rdb, nil)
				_, err := s.Register("@every 1m", asynq.NewTask("report", nil))
				return s, err
			})
		if err != nil {
			log.Print(err)
		}
	}()

	// The workers.
	mux := asynq.NewServeMux()
	mux.Use(holdfastasynq.Serialize(c, func(t *asynq.Task) string {
		if t.Type() == "account:sync" {
			return string(t.Payload()) // the account id
		}
		return "" // other tasks: no lock
	}))
	mux.Use(holdfastasynq.Limit(c, map[string]int64{"report": 2}))
	mux.HandleFunc("account:sync", func(ctx context.Context, t *asynq.Task) error {
		return nil // ctx is cancelled, with rlock.ErrLockLost as its cause, if the lock is lost
	})
	mux.HandleFunc("report", func(ctx context.Context, t *asynq.Task) error { return nil })
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		IsFailure:      holdfastasynq.IsFailure, // a busy key or type does not use up retries
		RetryDelayFunc: holdfastasynq.BusyRetryDelay(time.Second, nil),
	})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done()
	srv.Shutdown()
}
