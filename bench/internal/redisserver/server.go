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
	// Addr is the address clients dial: the server's host:port on
	// 127.0.0.1, or a link's in front of it (cli.StartServer).
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

// CommandStat is one command's cumulative counters in INFO commandstats.
type CommandStat struct {
	Calls int64 // calls=
	Usec  int64 // usec=: time spent executing the command, in µs
}

// CommandStats maps a command name (as in INFO commandstats, e.g. "evalsha",
// "client|tracking") to its cumulative counters.
type CommandStats map[string]CommandStat

// Stats is one snapshot of INFO commandstats and cpu.
type Stats struct {
	Commands CommandStats
	// MainThreadCPU is used_cpu_user_main_thread + used_cpu_sys_main_thread:
	// the CPU time of the thread that reads, runs and answers commands.
	MainThreadCPU time.Duration
}

// ReadCommandStats runs INFO commandstats. Redis counts commands that scripts
// run with redis.call in these statistics too.
func ReadCommandStats(ctx context.Context, rdb *redis.Client) (CommandStats, error) {
	st, err := ReadStats(ctx, rdb, "commandstats")
	return st.Commands, err
}

// ReadStats runs INFO on the given sections (commandstats, cpu) in one call.
func ReadStats(ctx context.Context, rdb *redis.Client, sections ...string) (Stats, error) {
	info, err := rdb.Info(ctx, sections...).Result()
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Commands: CommandStats{}}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := sc.Text()
		if cmd, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			if err := st.Commands.parse(cmd); err != nil {
				return Stats{}, err
			}
			continue
		}
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_user_main_thread" || name == "used_cpu_sys_main_thread" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return Stats{}, fmt.Errorf("parse %q: %w", line, err)
			}
			st.MainThreadCPU += time.Duration(f * 1e9)
		}
	}
	return st, sc.Err()
}

// parse adds one "name:calls=…,usec=…,…" line (without "cmdstat_").
func (s CommandStats) parse(line string) error {
	name, rest, ok := strings.Cut(line, ":")
	if !ok {
		return nil
	}
	var c CommandStat
	for kv := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var dst *int64
		switch k {
		case "calls":
			dst = &c.Calls
		case "usec":
			dst = &c.Usec
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("parse %q: %w", line, err)
		}
		*dst = n
	}
	s[name] = c
	return nil
}

// IsScript reports whether the command runs a script or function.
func IsScript(name string) bool {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// Delta summarises the commands run between an earlier snapshot and s,
// leaving out INFO (the benchmark's own probe).
func (s CommandStats) Delta(earlier CommandStats) (total, scripts int64) {
	for name, c := range s {
		if name == "info" {
			continue
		}
		d := c.Calls - earlier[name].Calls
		if IsScript(name) {
			scripts += d
		}
		total += d
	}
	return total, scripts
}

// Usec returns the µs spent executing commands between an earlier snapshot
// and s, leaving out INFO: all is the sum of usec over every command; top
// weighs each command's usec by 1 − nested[name], nested being the share of
// its calls that scripts make (its name in lower case, before any "|"). A
// script's usec includes the commands it runs, which Redis also counts under
// their own names, so all counts those twice and top once.
func (s CommandStats) Usec(earlier CommandStats, nested map[string]float64) (all, top float64) {
	for name, c := range s {
		if name == "info" {
			continue
		}
		d := float64(c.Usec - earlier[name].Usec)
		base, _, _ := strings.Cut(name, "|")
		all += d
		top += d * (1 - nested[base])
	}
	return all, top
}
