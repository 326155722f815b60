package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/monoclock"
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
	conn   net.Conn
	key    string
	offset int64 // CLOCK_REALTIME − CLOCK_MONOTONIC, ns
	done   chan struct{}
	marker string
	events []counterEvent
	err    error
}

func startCounterMonitor(addr, key string) (*counterMonitor, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	m := &counterMonitor{conn: conn, key: key, offset: realtimeOffset(), done: make(chan struct{}),
		marker: fmt.Sprintf("semaphore-bench-monitor-end-%d", time.Now().UnixNano())}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		_ = conn.Close()
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 1<<20)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+OK" {
		_ = conn.Close()
		return nil, fmt.Errorf("MONITOR: %q, %v", line, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	go m.read(r)
	return m, nil
}

func (m *counterMonitor) read(r *bufio.Reader) {
	defer close(m.done)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			m.err = err
			return
		}
		if strings.Contains(line, m.marker) {
			return
		}
		if !strings.Contains(line, m.key) {
			continue
		}
		ts, args, ok := splitMonitorLine(strings.TrimRight(line, "\r\n"))
		if !ok || len(args) != 3 || args[1] != m.key {
			continue
		}
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			continue
		}
		switch strings.ToLower(args[0]) {
		case "incrby":
		case "decrby":
			n = -n
		default:
			continue
		}
		m.events = append(m.events, counterEvent{T: ts - m.offset, Delta: n})
	}
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

func (m *counterMonitor) close() { _ = m.conn.Close() }

// splitMonitorLine splits `+1700000000.123456 [0 lua] "decrby" "k" "1"` into
// the time (ns since the epoch) and the unquoted arguments.
func splitMonitorLine(line string) (ts int64, args []string, ok bool) {
	line = strings.TrimPrefix(line, "+")
	head, rest, ok := strings.Cut(line, " [")
	if !ok {
		return 0, nil, false
	}
	sec, usec, ok := strings.Cut(head, ".")
	if !ok {
		return 0, nil, false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	u, err2 := strconv.ParseInt(usec, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, nil, false
	}
	_, rest, ok = strings.Cut(rest, "] ")
	if !ok {
		return 0, nil, false
	}
	for len(rest) > 0 {
		rest = strings.TrimLeft(rest, " ")
		if !strings.HasPrefix(rest, "\"") {
			break
		}
		var b strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			b.WriteByte(rest[i])
		}
		args = append(args, b.String())
		if i >= len(rest) {
			break
		}
		rest = rest[i+1:]
	}
	return s*1e9 + u*1e3, args, len(args) > 0
}

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
