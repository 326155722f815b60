package redisserver

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Monitor reads a MONITOR feed, to tell the commands that scripts run (shown
// as "[<db> lua]") from those that clients send. A monitored server spends
// time on the feed: keep it open only while nothing is measured.
type Monitor struct {
	conn net.Conn
	r    *bufio.Reader
}

// StartMonitor connects to addr and sends MONITOR.
func StartMonitor(addr string) (*Monitor, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	m := &Monitor{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if line, err := m.readLine(5 * time.Second); err != nil || line != "+OK" {
		_ = conn.Close()
		return nil, fmt.Errorf("MONITOR: %q, %v", line, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return m, nil
}

// Each calls fn with every line of the feed until fn returns false (Each
// then returns nil) or the feed fails.
func (m *Monitor) Each(fn func(line string) bool) error {
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			return err
		}
		if !fn(strings.TrimRight(line, "\r\n")) {
			return nil
		}
	}
}

// Close ends the feed.
func (m *Monitor) Close() error { return m.conn.Close() }

func (m *Monitor) readLine(timeout time.Duration) (string, error) {
	if err := m.conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	line, err := m.r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// NestedShares reads the feed up to the first command carrying marker (which
// the caller sends, e.g. as ECHO, after the commands of interest) and returns,
// per command name in lower case, the share of its calls since the last
// marker that scripts made.
func (m *Monitor) NestedShares(marker string, timeout time.Duration) (map[string]float64, error) {
	nested, all := map[string]int{}, map[string]int{}
	deadline := time.Now().Add(timeout)
	for {
		line, err := m.readLine(time.Until(deadline))
		if err != nil {
			return nil, fmt.Errorf("MONITOR feed: %w", err)
		}
		if strings.Contains(line, marker) {
			break
		}
		c, ok := ParseMonitorLine(line)
		if !ok {
			continue
		}
		name := strings.ToLower(c.Args[0])
		all[name]++
		if c.Script {
			nested[name]++
		}
	}
	shares := make(map[string]float64, len(nested))
	for name, n := range nested {
		shares[name] = float64(n) / float64(all[name])
	}
	return shares, nil
}

// MonitorLine is one command of a MONITOR feed.
type MonitorLine struct {
	// T is the server's time of the command (ns since the epoch), taken as
	// it fed the command to monitors, right after running it.
	T int64
	// Script tells whether a script ran the command.
	Script bool
	// Args are the command's name and arguments, unquoted.
	Args []string
}

// ParseMonitorLine parses a line of a MONITOR feed, such as
// `+1700000000.123456 [0 lua] "decrby" "k" "1"`.
func ParseMonitorLine(line string) (c MonitorLine, ok bool) {
	line = strings.TrimPrefix(line, "+")
	head, rest, ok := strings.Cut(line, " [")
	if !ok {
		return c, false
	}
	sec, usec, ok := strings.Cut(head, ".")
	if !ok {
		return c, false
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	u, err2 := strconv.ParseInt(usec, 10, 64)
	if err1 != nil || err2 != nil {
		return c, false
	}
	c.T = s*1e9 + u*1e3
	client, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return c, false
	}
	c.Script = strings.HasSuffix(client, " lua")
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
		c.Args = append(c.Args, b.String())
		if i >= len(rest) {
			break
		}
		rest = rest[i+1:]
	}
	return c, len(c.Args) > 0
}
