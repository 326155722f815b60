package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/redis/go-redis/v9"
)

// counterEvent is one change of a semaphore's free permits as the server
// applied it: INCRBY (a release, or a reclaim of expired permits) or DECRBY
// (an acquire) on the semaphore's key, with the time the MONITOR feed gives
// it (the server's clock, taken as it feeds the command to monitors, right
// after executing it) moved to CLOCK_MONOTONIC.
type counterEvent struct {
	T     int64 // CLOCK_MONOTONIC ns
	Delta int64
}

// counterMonitor reads a MONITOR feed and keeps the counter changes of one
// key. Every implementation benchmarked here keeps the free permits in one
// string key changed only by INCRBY and DECRBY (Redisson's layout; the
// peers' by design), so the feed gives the server's exact free-permit time line.
type counterMonitor struct {
	*redisserver.Monitor
	key    string
	offset int64 // CLOCK_REALTIME − CLOCK_MONOTONIC, ns
	done   chan struct{}
	marker string
	events []counterEvent
	err    error
}

func startCounterMonitor(addr, key string) (*counterMonitor, error) {
	mon, err := redisserver.StartMonitor(addr)
	if err != nil {
		return nil, err
	}
	m := &counterMonitor{Monitor: mon, key: key, offset: realtimeOffset(), done: make(chan struct{}),
		marker: fmt.Sprintf("semaphore-bench-monitor-end-%d", time.Now().UnixNano())}
	go func() {
		defer close(m.done)
		m.err = m.Each(m.line)
	}()
	return m, nil
}

// line keeps the line's counter change, if it is one; it returns false at
// the end marker.
func (m *counterMonitor) line(line string) bool {
	if strings.Contains(line, m.marker) {
		return false
	}
	if !strings.Contains(line, m.key) {
		return true
	}
	c, ok := redisserver.ParseMonitorLine(line)
	if !ok || len(c.Args) != 3 || c.Args[1] != m.key {
		return true
	}
	n, err := strconv.ParseInt(c.Args[2], 10, 64)
	if err != nil {
		return true
	}
	switch strings.ToLower(c.Args[0]) {
	case "incrby":
	case "decrby":
		n = -n
	default:
		return true
	}
	m.events = append(m.events, counterEvent{T: c.T - m.offset, Delta: n})
	return true
}

// stop sends the end marker through rdb, waits until the feed reaches it and
// returns the events.
func (m *counterMonitor) stop(rdb *redis.Client) ([]counterEvent, error) {
	if err := rdb.Echo(context.Background(), m.marker).Err(); err != nil {
		return nil, err
	}
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("MONITOR feed: no end marker in 30 s")
	}
	if m.err != nil {
		return nil, fmt.Errorf("MONITOR feed: %w", m.err)
	}
	return m.events, nil
}

func (m *counterMonitor) close() { _ = m.Close() }

// realtimeOffset returns CLOCK_REALTIME − CLOCK_MONOTONIC in ns, from the
// tightest of a few back-to-back readings.
func realtimeOffset() int64 {
	best, off := int64(1<<62), int64(0)
	for range 20 {
		m0 := monoclock.Now()
		r := time.Now().UnixNano()
		m1 := monoclock.Now()
		if m1-m0 < best {
			best, off = m1-m0, r-(m0+m1)/2
		}
	}
	return off
}
