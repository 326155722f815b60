// Package redisserver starts a private redis-server on a free loopback port
// and reads its command statistics.
package redisserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server owned by the benchmark.
type Server struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr    string
	cmd     *exec.Cmd
	done    chan struct{}
	version string
}

// Start launches bin (e.g. /usr/bin/redis-server) without persistence on a
// free port of 127.0.0.1 and waits until it answers PING.
func Start(ctx context.Context, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "holdfast-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--loglevel", "warning",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = os.RemoveAll(dir); close(s.done) }()

	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := rdb.Ping(ctx).Err(); err == nil {
			break
		} else if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING: %w; output: %s", s.Addr, err, strings.TrimSpace(out.String()))
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("redis-server exited during start-up: %s", strings.TrimSpace(out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.version = infoField(info, "redis_version")
	return s, nil
}

// Version returns the server's redis_version.
func (s *Server) Version() string { return s.version }

// Stop kills the server and waits for it to exit.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func infoField(info, name string) string {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// CommandStats maps a command name (as in INFO commandstats, e.g. "evalsha",
// "client|tracking") to its cumulative calls count.
type CommandStats map[string]int64

// ReadCommandStats runs INFO commandstats. Redis counts commands that scripts
// run with redis.call in these statistics too.
func ReadCommandStats(ctx context.Context, rdb *redis.Client) (CommandStats, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	cs := CommandStats{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("parse %q: %w", line, err)
				}
				cs[name] = n
			}
		}
	}
	return cs, sc.Err()
}

// Delta summarises the commands run between an earlier snapshot and s,
// leaving out INFO (the benchmark's own probe).
func (s CommandStats) Delta(earlier CommandStats) (total, scripts int64) {
	for name, n := range s {
		d := n - earlier[name]
		switch {
		case name == "info":
			continue
		case name == "eval" || name == "evalsha" || name == "eval_ro" || name == "evalsha_ro" ||
			name == "fcall" || name == "fcall_ro":
			scripts += d
		}
		total += d
	}
	return total, scripts
}
