package holdfastgocron_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/holdfast-go/holdfast/holdfastgocron"
	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// Every instance runs the same program: each tick of the job runs once, on
// the instance that fires first; the others, whose ticks come up to 500 ms
// later, find the lock kept and skip it.
func ExampleNewLocker() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c, err := rlock.New(rdb) // one Client per process: its watchdog keeps the locks
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Longer than the skew between instances, shorter than the job's interval.
	locker, err := holdfastgocron.NewLocker(c, 500*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close(context.Background())

	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.NewJob(
		gocron.CronJob("*/10 * * * * *", true), // every 10 s
		gocron.NewTask(func() { log.Print("report") }),
		gocron.WithName("report"), // the lock's name: "gocron:report"
	)
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	// ... run until the program ends.
}

// Only the leader's scheduler runs the jobs; when it dies or is cut off,
// another instance leads within the watchdog timeout and runs them.
func ExampleNewElector() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	c, err := rlock.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	host, _ := os.Hostname()
	el := holdfastgocron.NewElector(c.NewElection("reports:scheduler"), host)
	defer el.Close(context.Background()) // resigns: another instance leads at once

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(el))
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.NewJob(gocron.DurationJob(time.Minute), gocron.NewTask(func() {
		if lead := el.Leadership(); lead != nil {
			log.Printf("report, term %d", lead.Token()) // a fencing token for what it writes
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	// ... run until the program ends.
}
