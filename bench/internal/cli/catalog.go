package cli

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/libs"
	"github.com/holdfast-go/holdfast/bench/internal/link"
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

// Server is a command's private redis-server, with when the run started,
// the facts of the machine (report.Machine) and the link (-link) for its
// report. Its Addr is the address every client of the run dials: the
// link's proxy, if the profile has one (see link), else the server's.
type Server struct {
	*redisserver.Server
	// Started is the run's start (UTC), Env the machine.
	Started time.Time
	Env     report.Facts
	// Link is the link profile and the PING measured through it at the
	// start; Direct is the redis-server's own address.
	Link   link.Info
	Direct string

	start time.Time
	proxy *link.Process
}

// Stop ends the link's proxy process, if any (logging what it forwarded
// and its CPU time), and stops the server.
func (s *Server) Stop() {
	if s.proxy != nil {
		if err := s.proxy.Close(); err != nil {
			log.Printf("link process: %v", err)
		}
		log.Printf("link %s: %d chunks, %d bytes forwarded; link process CPU %s",
			s.Link.Profile, s.proxy.Chunks, s.proxy.Bytes, s.proxy.CPU().Round(time.Millisecond))
	}
	s.Server.Stop()
}

// LinkCPU returns the CPU time the link's proxy process has used so far
// (10 ms steps; 0 without a proxy).
func (s *Server) LinkCPU() time.Duration {
	if s.proxy == nil {
		return 0
	}
	return s.proxy.CPU()
}

// linkPings is how many PINGs StartServer sends through the link.
const linkPings = 200

// StartServer starts a private redis-server from f.RedisBin (see
// redisserver.Start) behind the link f.Link, measures PING through the
// link and logs both. The link's proxy runs in a process of its own (the
// binary re-executed, see link.StartProcess), so that its CPU time and
// allocations stay out of the coordinator's. The caller stops the server.
func StartServer(f *Flags) (*Server, error) {
	start := time.Now()
	prof, err := link.Lookup(f.Link)
	if err != nil {
		return nil, err
	}
	srv, err := redisserver.Start(context.Background(), f.RedisBin)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: srv, Started: start.UTC(), Env: report.Machine(srv.Version(), f.RedisBin), Direct: srv.Addr, start: start}
	if prof.Proxy {
		if s.proxy, err = link.StartProcess(srv.Addr, prof.Delay); err != nil {
			srv.Stop()
			return nil, fmt.Errorf("link %s: %w", prof.Name, err)
		}
		srv.Addr = s.proxy.Addr()
	}
	if s.Link, err = link.Measure(context.Background(), prof, srv.Addr, linkPings); err != nil {
		s.Stop()
		return nil, err
	}
	s.Env = append(s.Env, report.Fact{Name: "Link", Value: s.Link.About})
	log.Printf("redis-server %s on %s; %s", srv.Version(), s.Direct, s.Link.Line())
	return s, nil
}

// Elapsed returns the time since the run started.
func (s *Server) Elapsed() time.Duration { return time.Since(s.start) }

// Start begins a command's run: it selects the members of c named in
// f.LibNames (see Select), starts a private redis-server behind its link
// (see StartServer) and logs both. The caller stops the server.
func Start[T any](f *Flags, c Catalog[T]) ([]T, *Server, error) {
	selected, err := c.Select(f.LibNames)
	if err != nil {
		return nil, nil, err
	}
	srv, err := StartServer(f)
	if err != nil {
		return nil, nil, err
	}
	log.Printf("%s: %s", c.Many, strings.Join(c.Names(selected), ", "))
	return selected, srv, nil
}
