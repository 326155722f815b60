package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/holdfast-go/holdfast/rlock"
)

// A singleton worker: every replica of a service campaigns, one leads and
// does the work, and it stops working the moment its leadership ends
// (Resign here; in production also a loss: lease ran out, key deleted, Close).
// The term's token goes with every write, so that a resource can refuse a
// leader that was paused past its lease.
func ExampleElection() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx := context.Background()
	e := c.NewElection("reports:singleton")

	lead, err := e.Campaign(ctx, "replica-1") // blocks until this replica leads
	if err != nil {
		log.Fatal(err)
	}
	work, stopWork := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { // the singleton's work, until the leadership ends
		defer close(stopped)
		select {
		case <-lead.Done():
			stopWork()
		case <-work.Done():
		}
		// ... write to resources with lead.Token() as the fencing token ...
	}()

	info, err := e.Leader(ctx) // what any follower sees
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", info.Value, "same term:", info.Token == lead.Token())

	if err := lead.Resign(ctx); err != nil { // the next candidate takes over at once
		log.Fatal(err)
	}
	<-stopped
	fmt.Println("work stopped:", work.Err() != nil, errors.Is(lead.Err(), rlock.ErrUnlocked))
	_, err = e.Leader(ctx)
	fmt.Println(errors.Is(err, rlock.ErrNoLeader))
	// Output:
	// leader: replica-1 same term: true
	// work stopped: true true
	// true
}

// A follower watches the leader change: Observe delivers the current leader
// first, then every change, until its ctx ends.
func ExampleElection_Observe() {
	c, closeAll := exampleClient() // rlock.New on your Redis
	defer closeAll()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := c.NewElection("reports:singleton")

	views := e.Observe(ctx)
	fmt.Println("elected:", (<-views).Elected())
	lead, err := e.Campaign(ctx, "replica-2")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", (<-views).Value)
	if err := lead.Proclaim(ctx, "replica-2 (draining)"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", (<-views).Value)
	if err := lead.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("elected:", (<-views).Elected())
	// Output:
	// elected: false
	// leader: replica-2
	// leader: replica-2 (draining)
	// elected: false
}
