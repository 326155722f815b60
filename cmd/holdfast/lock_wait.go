package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// When "holdfast lock" prints its progress line while it waits: after the
// first second, then every progressEvery.
const (
	progressFirst = time.Second
	progressEvery = 10 * time.Second
)

// progressQuiet: no progress line is printed when -w runs out less than this
// after it, since the "is still busy after" line that follows at once would
// say the same (with -w 1, both came at the first second).
const progressQuiet = progressFirst / 2

// progress prints, unless -q or -n, a line on stderr once the wait has lasted
// progressFirst and then every progressEvery: how long holdfast has waited,
// who holds the lock and for how much longer; none when -w runs out within
// progressQuiet of it. It stops when ctx is done or
// when the returned function is called; that function waits for it.
func (s *lockSession) progress(ctx context.Context) func() {
	if s.cfg.quiet || s.cfg.noWait {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		t := time.NewTimer(progressFirst)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if s.cfg.wait > 0 && time.Until(start.Add(s.cfg.wait)) < progressQuiet {
				return // -w runs out at once: its "still busy" line says it all
			}
			waited := time.Since(start).Round(time.Second)
			fmt.Fprintf(s.io.err, "holdfast %s: waiting for %q for %v: %s\n", s.cfg.cmd(), s.cfg.name, waited, s.describe(ctx))
			t.Reset(progressEvery)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// maxHoldersShown is how many owner fields a progress line lists.
const maxHoldersShown = 3

// describeHolder says who holds the lock name (the records of the clients of
// its hash's owner fields, describeFields; with the read/write lock's mode)
// and its remaining lease, for a message. It never fails: what it cannot read,
// it leaves out.
func describeHolder(ctx context.Context, rdb redis.UniversalClient, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	h, err := rdb.HGetAll(ctx, name).Result()
	if err != nil {
		return "holder unknown (" + err.Error() + ")"
	}
	mode := h["mode"]
	delete(h, "mode")
	if len(h) == 0 {
		return "free just now"
	}
	fields := make([]string, 0, len(h))
	for f := range h {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	var b strings.Builder
	b.WriteString("held by " + describeFields(ctx, rdb, fields))
	if mode != "" {
		fmt.Fprintf(&b, " (%s)", mode)
	}
	if ttl, err := rdb.PTTL(ctx, name).Result(); err == nil && ttl > 0 {
		fmt.Fprintf(&b, ", lease %v left", ttl.Round(100*time.Millisecond))
	}
	return b.String()
}
