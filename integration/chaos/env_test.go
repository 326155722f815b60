package chaos

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/integration/redistest"
	"github.com/stretchr/testify/require"
)

// start sets the stop time and starts the workers.
func (e *env) start() {
	e.stop = Mono() + int64(3*time.Second+e.s.Dur)
	e.cfg.Until = e.stop
	for range e.s.Procs {
		e.spawn()
	}
	require.Eventually(e.t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.ops) > 0
	}, 30*time.Second, 10*time.Millisecond, "no worker got going")
}

// spawn starts one worker process and the goroutine that reads its history.
func (e *env) spawn() {
	e.mu.Lock()
	idx := e.next
	e.next++
	e.mu.Unlock()
	cfg, err := json.Marshal(e.configOf(idx))
	require.NoError(e.t, err)
	var w *redistest.Worker
	if e.lab != nil {
		w = redistest.StartWorkerIn(e.t, e.lab.hostOf(idx), "TestWorker", workerRole, idx, ConfigEnv+"="+string(cfg))
	} else {
		w = redistest.StartIndexedWorker(e.t, "TestWorker", workerRole, idx, ConfigEnv+"="+string(cfg))
	}
	e.mu.Lock()
	e.workers = append(e.workers, w)
	e.mu.Unlock()
	e.readers.Go(func() { e.read(w, idx) })
}

// read collects worker idx's history and its IDLE and LEAKED lines.
func (e *env) read(w *redistest.Worker, idx int) {
	for line := range w.Lines() {
		op, ok, err := ParseOp(line)
		switch {
		case ok:
			e.mu.Lock()
			e.ops = append(e.ops, op)
			switch {
			case op.Op == OpAcquire && op.OK:
				e.open[idx]++
			case op.Op == OpRelease:
				e.open[idx]--
			}
			e.mu.Unlock()
		case err != nil:
			e.t.Errorf("worker %d: %v: %q", idx, err, line)
		case line == "IDLE":
			e.idle <- idx
		case line == "STARTED":
			e.mu.Lock()
			e.started[idx] = true
			e.mu.Unlock()
		case strings.HasPrefix(line, "LEAKED "):
			n, _ := strconv.Atoi(strings.TrimPrefix(line, "LEAKED "))
			e.mu.Lock()
			e.leaked += n
			e.mu.Unlock()
		}
	}
}

// record adds an op of the parent to the history.
func (e *env) record(op Op) {
	op.Proc = -1
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops = append(e.ops, op)
}

// injectUntilStop injects the scenario's fault every s.Every until a second
// before the workers stop, and keeps re-arming the latches meanwhile.
func (e *env) injectUntilStop() {
	f := faults[e.s.Fault]
	require.NotNil(e.t, f, "fault %q", e.s.Fault)
	stopLatches := e.armLatches()
	defer stopLatches()
	for Mono()+int64(e.s.Every+time.Second) < e.stop {
		<-time.After(e.s.Every) // the pace of the faults, by design
		call := Mono()
		target, ends := f(e)
		if target == noFault {
			continue
		}
		e.record(Op{Op: OpFault, Name: e.s.Fault, Call: call, Ret: Mono(), OK: ends, Bound: int64(target + 1)})
	}
}

// armLatches starts re-arming every latch (TrySetCount 3) every 100 ms, as
// parent ops of the history; the returned function stops it.
func (e *env) armLatches() func() {
	if !contains(e.s.Kinds, KindLatch) {
		return func() {}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond): // pacing by design
			}
			for i := range e.s.Names {
				name := objectName(e.cfg.Prefix, KindLatch, i)
				op := Op{Kind: KindLatch, Name: name, Op: OpSet, Call: Mono(), Bound: 3}
				ok, err := e.c.NewCountDownLatch(name).TrySetCount(e.ctx, 3)
				op.Ret, op.OK = Mono(), ok
				if err == nil {
					e.record(op)
				}
			}
		}
	}()
	return func() { close(stop); <-done }
}

// contains reports whether xs has x.
func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// finish waits until every live worker is idle, counts the subscriptions
// left, lets the workers close and waits for them.
func (e *env) finish() int {
	e.mu.Lock()
	live := len(e.workers) - e.killed
	e.mu.Unlock()
	deadline := time.After(time.Until(monoTime(e.stop)) + e.s.WaitBound + e.s.Work + 40*time.Second)
	for range live {
		select {
		case <-e.idle:
		case <-deadline:
			e.t.Errorf("workers did not all finish")
			return -1
		}
	}
	subs := e.subscriptions()
	for range live {
		require.NoError(e.t, e.res.rdb.RPush(e.ctx, e.cfg.CloseKey, "close").Err())
	}
	e.readers.Wait()
	for _, w := range e.workers {
		if err := w.Wait(); err != nil && !e.wasKilled(w) {
			e.t.Errorf("worker %d: %v\n%s", w.Index, err, w.Output())
		}
	}
	return subs
}

// noFault is what a fault returns when it did nothing this time.
const noFault = -2

// describeOps is for debugging: how many ops of each kind.
func describeOps(ops []Op) string {
	n := map[string]int{}
	for _, op := range ops {
		n[op.Op]++
	}
	return fmt.Sprint(n)
}
