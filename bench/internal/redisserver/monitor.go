package redisserver

import (
	"bufio"
	"fmt"
	"net"
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
	m := &Monitor{conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if line, err := m.readLine(5 * time.Second); err != nil || line != "+OK" {
		_ = conn.Close()
		return nil, fmt.Errorf("MONITOR: %q, %v", line, err)
	}
	return m, nil
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
		name, fromScript, ok := parseMonitorLine(line)
		if !ok {
			continue
		}
		all[name]++
		if fromScript {
			nested[name]++
		}
	}
	shares := make(map[string]float64, len(nested))
	for name, n := range nested {
		shares[name] = float64(n) / float64(all[name])
	}
	return shares, nil
}

// parseMonitorLine splits `+1700000000.000000 [0 lua] "SET" "k" "v"` into the
// command name ("set") and whether a script ran it.
func parseMonitorLine(line string) (name string, fromScript, ok bool) {
	head, rest, ok := strings.Cut(line, "] \"")
	if !ok {
		return "", false, false
	}
	name, _, ok = strings.Cut(rest, "\"")
	return strings.ToLower(name), strings.HasSuffix(head, " lua"), ok
}
