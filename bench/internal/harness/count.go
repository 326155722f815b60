package harness

import (
	"context"
	"runtime"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/redisserver"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// Cost sums what counted batches of an op cost: the ops, the client's
// round trips, the server's commands and script calls and its time in them
// (INFO commandstats usec: UsecAll over all commands, UsecTop over those
// clients sent, see redisserver.CommandStats.Usec), the server's main-thread
// CPU time, and this process's CPU time, allocations and bytes allocated.
type Cost struct {
	N, RT, Cmds, Scripts int64
	UsecAll, UsecTop     float64
	ServerCPU, CPU       time.Duration
	Mallocs, Bytes       uint64
}

// snapshot is what a counting batch compares before and after.
type snapshot struct {
	server redisserver.Stats
	rt     int64
	mem    runtime.MemStats
	cpu    time.Duration
}

// Count runs n ops of op alone and adds their costs to c: rt reads the op's
// client's round trips (nil: none counted), nested is, per command, the
// share of its calls that scripts make (nil: none); statsClient reads the
// server's statistics.
func (c *Cost) Count(ctx context.Context, statsClient *redis.Client, op Op, rt func() int64, nested map[string]float64, n int) error {
	before, err := takeSnapshot(ctx, statsClient, rt, true)
	if err != nil {
		return err
	}
	if err := op.Repeat(ctx, n); err != nil {
		return err
	}
	after, err := takeSnapshot(ctx, statsClient, rt, false)
	if err != nil {
		return err
	}
	c.N += int64(n)
	c.RT += after.rt - before.rt
	cmds, scripts := after.server.Commands.Delta(before.server.Commands)
	c.Cmds += cmds
	c.Scripts += scripts
	all, top := after.server.Commands.Usec(before.server.Commands, nested)
	c.UsecAll += all
	c.UsecTop += top
	c.ServerCPU += after.server.MainThreadCPU - before.server.MainThreadCPU
	c.CPU += after.cpu - before.cpu
	c.Mallocs += after.mem.Mallocs - before.mem.Mallocs
	c.Bytes += after.mem.TotalAlloc - before.mem.TotalAlloc
	return nil
}

// Per returns v per op counted.
func (c *Cost) Per(v float64) float64 { return v / float64(c.N) }

// takeSnapshot reads the counters, ordered so that the probes themselves
// stay out of the windows: before the batch INFO commandstats, then INFO cpu,
// then the process's counters (ReadMemStats, the CPU time last); after it the
// reverse. So the server's main-thread CPU window holds only the tail of one
// short INFO cpu and the head of another, and the process's CPU and
// allocation windows hold no probe.
func takeSnapshot(ctx context.Context, statsClient *redis.Client, rt func() int64, beforeBatch bool) (snapshot, error) {
	var s snapshot
	readLocal := func() {
		if rt != nil {
			s.rt = rt()
		}
		runtime.ReadMemStats(&s.mem)
	}
	readServer := func(section string) error {
		st, err := redisserver.ReadStats(ctx, statsClient, section)
		if section == "cpu" {
			s.server.MainThreadCPU = st.MainThreadCPU
		} else {
			s.server.Commands = st.Commands
		}
		return err
	}
	sections := []string{"commandstats", "cpu"}
	if !beforeBatch {
		s.cpu = ProcessCPU()
		readLocal()
		slices.Reverse(sections)
	}
	for _, sec := range sections {
		if err := readServer(sec); err != nil {
			return s, err
		}
	}
	if beforeBatch {
		readLocal()
		s.cpu = ProcessCPU()
	}
	return s, nil
}

// ProcessCPU returns the user plus system CPU time of this process
// (getrusage RUSAGE_SELF).
func ProcessCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic("getrusage: " + err.Error())
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
