package cli

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/holdfast-go/holdfast/bench/internal/report"
	"github.com/holdfast-go/holdfast/bench/internal/sems"
)

// Catalog is what a command chooses from by name on its command line: the
// libraries it can run, or its cases.
type Catalog[T any] struct {
	// All holds every member, in the order a full run takes them.
	All []T
	// Name returns a member's name.
	Name func(T) string
	// One and Many call a member and members in errors and logs
	// ("library", "libraries").
	One, Many string
	// Hint ends the error for an unknown name, in parentheses; by default
	// it lists the names.
	Hint string
}

// Libraries is the catalog of the lock libraries all.
func Libraries(all []libs.Library) Catalog[libs.Library] {
	return Catalog[libs.Library]{All: all, Name: func(l libs.Library) string { return l.Name }, One: "library", Many: "libraries"}
}

// Semaphores is the catalog of the semaphores all.
func Semaphores(all []sems.Library) Catalog[sems.Library] {
	return Catalog[sems.Library]{All: all, Name: func(l sems.Library) string { return l.Name }, One: "semaphore", Many: "semaphores"}
}

// Names returns the name of each of ls.
func (c Catalog[T]) Names(ls []T) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = c.Name(l)
	}
	return out
}

// AllNames returns the name of each member.
func (c Catalog[T]) AllNames() []string { return c.Names(c.All) }

// Select returns the members named in the comma-separated list names, in
// the list's order, or all of them when names is empty.
func (c Catalog[T]) Select(names string) ([]T, error) {
	if names == "" {
		return c.All, nil
	}
	var out []T
	for n := range strings.SplitSeq(names, ",") {
		found := false
		for _, l := range c.All {
			if c.Name(l) == strings.TrimSpace(n) {
				out, found = append(out, l), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown %s %q (%s)", c.One, n, c.hint())
		}
	}
	return out, nil
}

func (c Catalog[T]) hint() string {
	if c.Hint != "" {
		return c.Hint
	}
	return "have " + strings.Join(c.AllNames(), ", ")
}

// Server is a command's private redis-server, with when the run started
// and the facts of the machine (report.Machine) for its report.
type Server struct {
	*redisserver.Server
	// Started is the run's start (UTC), Env the machine.
	Started time.Time
	Env     report.Facts

	start time.Time
}

// Elapsed returns the time since the run started.
func (s *Server) Elapsed() time.Duration { return time.Since(s.start) }

// Start begins a command's run: it selects the members of c named in
// f.LibNames (see Select), starts a private redis-server from f.RedisBin
// (see redisserver.Start) and logs both. The caller stops the server.
func Start[T any](f *Flags, c Catalog[T]) ([]T, *Server, error) {
	start := time.Now()
	selected, err := c.Select(f.LibNames)
	if err != nil {
		return nil, nil, err
	}
	srv, err := redisserver.Start(context.Background(), f.RedisBin)
	if err != nil {
		return nil, nil, err
	}
	log.Printf("redis-server %s on %s; %s: %s", srv.Version(), srv.Addr, c.Many, strings.Join(c.Names(selected), ", "))
	return selected, &Server{Server: srv, Started: start.UTC(), Env: report.Machine(srv.Version(), f.RedisBin), start: start}, nil
}
